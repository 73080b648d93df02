//! The kernels conformance programs launch, each with its host reference implementation. Every
//! kernel guards its accesses, so it is correct for any buffer length and launch size.

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};

/// Invocations per workgroup of every conformance kernel.
pub const WORKGROUP: u32 = 8;

/// A kernel a program may launch. `dst` is read-write; `src` is read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// `dst[i] += k`
    AddConst,
    /// `dst[i] = dst[i] * k + src[i]` for `i` in both.
    MulAdd,
    /// `dst[0] += src[i]` for every `i`, with atomics.
    AtomicSum,
}

impl KernelKind {
    /// Every kernel kind.
    pub const ALL: [KernelKind; 3] = [
        KernelKind::AddConst,
        KernelKind::MulAdd,
        KernelKind::AtomicSum,
    ];

    /// Whether the kernel takes a `src` binding.
    pub fn has_src(self) -> bool {
        !matches!(self, KernelKind::AddConst)
    }

    /// The kernel, built and validated.
    pub fn kernel(self) -> Kernel {
        let built = match self {
            KernelKind::AddConst => {
                let mut b = KernelBuilder::new("add_const", [WORKGROUP, 1, 1]);
                let dst = b.binding(ElemType::U32, Access::ReadWrite);
                let k = b.param(ElemType::U32);
                let i = b.global_id(Axis::X);
                b.if_(i.lt(dst.len()), |b| {
                    b.store(dst, i, dst.load(i) + k);
                });
                b.build()
            }
            KernelKind::MulAdd => {
                let mut b = KernelBuilder::new("mul_add", [WORKGROUP, 1, 1]);
                let dst = b.binding(ElemType::U32, Access::ReadWrite);
                let src = b.binding(ElemType::U32, Access::Read);
                let k = b.param(ElemType::U32);
                let i = b.global_id(Axis::X);
                b.if_(i.lt(dst.len()).and(i.lt(src.len())), |b| {
                    b.store(dst, i, dst.load(i) * k + src.load(i));
                });
                b.build()
            }
            KernelKind::AtomicSum => {
                let mut b = KernelBuilder::new("atomic_sum", [WORKGROUP, 1, 1]);
                let dst = b.binding(ElemType::U32, Access::ReadWrite);
                let src = b.binding(ElemType::U32, Access::Read);
                let i = b.global_id(Axis::X);
                b.if_(i.lt(src.len()), |b| {
                    b.atomic_add(dst, 0u32, src.load(i));
                });
                b.build()
            }
        };
        built.expect("conformance kernels are valid")
    }

    /// Workgroups along x that cover every element the kernel touches.
    pub fn workgroups(self, dst_len: usize, src_len: usize) -> u32 {
        let elems = match self {
            KernelKind::AddConst => dst_len,
            KernelKind::MulAdd => dst_len.min(src_len),
            KernelKind::AtomicSum => src_len,
        };
        (elems as u32).div_ceil(WORKGROUP)
    }

    /// Applies the kernel to host copies, as the device must.
    pub fn reference(self, dst: &mut [u32], src: &[u32], k: u32) {
        match self {
            KernelKind::AddConst => dst.iter_mut().for_each(|d| *d = d.wrapping_add(k)),
            KernelKind::MulAdd => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, s)| *d = d.wrapping_mul(k).wrapping_add(*s)),
            KernelKind::AtomicSum => {
                if let Some(first) = dst.first_mut() {
                    *first = src.iter().fold(*first, |acc, s| acc.wrapping_add(*s));
                }
            }
        }
    }
}

/// `dst[i] = k`: writes a buffer without reading it (an output `empty` gave), in workgroups of
/// [`WORKGROUP`].
pub fn fill() -> Kernel {
    let mut b = KernelBuilder::new("fill", [WORKGROUP, 1, 1]);
    let dst = b.binding(ElemType::U32, Access::ReadWrite);
    let k = b.param(ElemType::U32);
    let i = b.global_id(Axis::X);
    b.if_(i.lt(dst.len()), |b| b.store(dst, i, k));
    b.build().expect("fill is valid")
}

/// A kernel that only stores out of range: `data[len + past_end] = 1`. In checked mode it must
/// report a `KernelFault` for binding 0 at index `len + past_end` and leave memory unchanged.
pub fn overrun() -> Kernel {
    let mut b = KernelBuilder::new("overrun", [1, 1, 1]);
    let data = b.binding(ElemType::U32, Access::ReadWrite);
    let past_end = b.param(ElemType::U32);
    b.store(data, data.len() + past_end, 1u32);
    b.build().expect("overrun is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_match_their_definitions() {
        let mut dst = vec![1, 2, 3];
        KernelKind::MulAdd.reference(&mut dst, &[10, 20], 2);
        assert_eq!(dst, vec![12, 24, 3]);
        let mut dst = vec![5, 9];
        KernelKind::AtomicSum.reference(&mut dst, &[1, 2, 3], 0);
        assert_eq!(dst, vec![11, 9]);
        assert_eq!(KernelKind::AtomicSum.workgroups(2, 17), 3);
    }
}
