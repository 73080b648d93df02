//! Kernels with the bugs the kernel sanitizer exists to find, for its self-tests and for
//! comparing it with CUDA's `compute-sanitizer` (`examples/faulty_kernels.rs`). Each is valid IR:
//! the validator cannot see these bugs.

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};

use super::build;
use super::matmul::matmul_with;

/// Invocations per workgroup of [`racy_reduce`] and [`divergent_barrier`].
pub const LANES: u32 = 64;

/// The tiled product of `matmul` without the barrier that ends each step: the next step's
/// staging overwrites tiles other invocations may still be reading (a write-after-read race
/// on shared memory, whenever `k` exceeds one step).
pub fn matmul_missing_barrier() -> Kernel {
    matmul_with("matmul_missing_barrier", false)
}

/// A tree sum through shared memory with a barrier after the first store but none between
/// the levels: a level reads words the previous level's other invocations write. Bindings:
/// `input` (read), `out` (one per workgroup).
pub fn racy_reduce() -> Kernel {
    let mut k = KernelBuilder::new("racy_reduce", [LANES, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let tree = k.shared(ElemType::F32, LANES);
    let (i, lane) = (k.global_id(Axis::X), k.local_id(Axis::X));
    let x = k.var(ElemType::F32, 0.0f32);
    k.if_(i.lt(input.len()), |k| k.assign(x, input.load(i)));
    k.store(tree, lane, x.get());
    k.workgroup_barrier();
    let mut stride = LANES / 2;
    while stride > 0 {
        k.if_(lane.lt(stride), |k| {
            let sum = tree.load(lane) + tree.load(lane + stride);
            k.store(tree, lane, sum);
        });
        stride /= 2;
    }
    k.if_(lane.equals(0u32), |k| {
        let w = k.workgroup_id(Axis::X);
        k.store(out, w, tree.load(0u32));
    });
    build(k)
}

/// A barrier that only some invocations may reach: invocation 0 raises `flag[0]`, and every
/// invocation passes a barrier only if it still reads the flag lowered. The flag's index is
/// uniform, so the validator lets the branch be; whether invocations diverge depends on which
/// of them read the flag before invocation 0 raised it (a race on `flag[0]`, too). Bindings:
/// `flag` (`u32`, zero before), `out` (one per invocation).
pub fn divergent_barrier() -> Kernel {
    let mut k = KernelBuilder::new("divergent_barrier", [LANES, 1, 1]);
    let flag = k.binding(ElemType::U32, Access::ReadWrite);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let (i, lane) = (k.global_id(Axis::X), k.local_id(Axis::X));
    k.if_(lane.equals(0u32), |k| k.store(flag, 0u32, 1u32));
    let seen = k.var(ElemType::U32, flag.load(0u32));
    k.if_(seen.get().equals(0u32), |k| k.workgroup_barrier());
    k.store(out, i, seen.get());
    build(k)
}

/// Every faulty kernel.
pub fn all() -> [Kernel; 3] {
    [matmul_missing_barrier(), racy_reduce(), divergent_barrier()]
}
