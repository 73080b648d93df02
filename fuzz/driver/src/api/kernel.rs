//! Kernels drawn from a small grammar over [`KernelBuilder`], and the oracle of `build`: it
//! returns `Ok` or a typed `KernelError`, never panics, and an `Ok` kernel keeps what
//! validation promises, checked here without the runtime's help: a workgroup size whose
//! product (in `u128`) is 1 to [`MAX_WORKGROUP_INVOCATIONS`], shared arrays of at least one
//! element, and none of the faults the lowering knows it put in ([`Verdict`]). A kernel the
//! lowering knows to be valid must be accepted.

mod grammar;
mod lower;

use arbitrary::Arbitrary;
use lockstep::kernel::{
    Access, ElemType, Kernel, KernelBuilder, KernelError, MAX_WORKGROUP_INVOCATIONS,
};

pub(super) use grammar::Elem;
use grammar::Stmt;
use lower::Lower;

use super::world::{KERNELS, World};

/// A kernel as the fuzzer draws it.
#[derive(Arbitrary, Debug)]
pub(super) struct KernelSpec {
    workgroup: Workgroup,
    /// Up to 4 bindings: element type, and whether the kernel may write it.
    bindings: Vec<(Elem, bool)>,
    /// Up to 2 parameters.
    params: Vec<Elem>,
    /// Up to 2 shared arrays.
    shared: Vec<(Elem, SharedLen)>,
    /// Up to 3 locals, which the grammar assigns.
    locals: Vec<Elem>,
    /// Up to 6 statements at each level.
    body: Vec<Stmt>,
    /// Below 32 (one kernel in eight), operands of the wrong type are left so, not cast: the
    /// kernel is then refused.
    loose: u8,
}

/// A workgroup size, from boundary classes.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum Workgroup {
    /// Each dimension from its class.
    Dims([Dim; 3]),
    /// A triple whose product is `2^64` or more: refused, however it is multiplied.
    Overflowing(u8),
    /// A valid size from a table of small ones (fast to run).
    Small(u8),
}

/// One dimension of a workgroup size.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum Dim {
    Zero,
    One,
    /// `2^(n % 32)`.
    Pow2(u8),
    /// `2^(n % 32) - 1`.
    Below(u8),
    /// `2^(n % 32) + 1`.
    Above(u8),
    Max,
}

/// Triples whose product overflows `u64`; the first three wrap to exactly 0.
const OVERFLOWING: [[u32; 3]; 4] = [
    [1 << 22; 3],
    [1 << 21, 1 << 21, 1 << 22],
    [1 << 31, 1 << 31, 4],
    [u32::MAX; 3],
];

/// Valid sizes that run fast.
const SMALL: [[u32; 3]; 6] = [
    [1, 1, 1],
    [2, 1, 1],
    [4, 2, 1],
    [8, 1, 1],
    [2, 2, 2],
    [1, 1, 3],
];

impl Workgroup {
    pub fn size(self) -> [u32; 3] {
        match self {
            Workgroup::Dims(dims) => dims.map(Dim::value),
            Workgroup::Overflowing(n) => OVERFLOWING[n as usize % OVERFLOWING.len()],
            Workgroup::Small(n) => SMALL[n as usize % SMALL.len()],
        }
    }
}

impl Dim {
    fn value(self) -> u32 {
        let pow = |n: u8| 1u32 << (n % 32);
        match self {
            Dim::Zero => 0,
            Dim::One => 1,
            Dim::Pow2(n) => pow(n),
            Dim::Below(n) => pow(n) - 1,
            Dim::Above(n) => pow(n).wrapping_add(1),
            Dim::Max => u32::MAX,
        }
    }
}

/// A shared array's length.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum SharedLen {
    /// No elements: refused by `build`.
    Zero,
    /// `1 + n % 64`.
    Small(u8),
    /// 8192 elements: more shared memory than the simulator's 16 KiB for 4-byte elements,
    /// refused at launch.
    Large,
}

impl SharedLen {
    fn len(self) -> u32 {
        match self {
            SharedLen::Zero => 0,
            SharedLen::Small(n) => 1 + n as u32 % 64,
            SharedLen::Large => 8192,
        }
    }
}

/// What the oracle knows of a kernel that `build` accepted.
pub(super) struct Built {
    pub kernel: Kernel,
    pub bindings: Vec<(ElemType, Access)>,
    pub params: Vec<ElemType>,
    /// Bytes of its shared arrays, which a device limits.
    pub shared_bytes: u64,
    /// Whether it uses a half float anywhere, which a device without them refuses.
    pub uses_half: bool,
}

/// What the lowering knows of the kernel it built.
#[derive(Default)]
pub(super) struct Verdict {
    /// Faults it put in (a write to a read-only binding, a barrier under an id-dependent
    /// branch, ...): `build` must refuse the kernel.
    pub faults: Vec<&'static str>,
    /// It cannot tell whether a barrier's control flow diverges (through a variable, say):
    /// either outcome may be right.
    pub unsure: bool,
    pub uses_half: bool,
}

/// The invocations a workgroup of `size` holds, without overflow.
pub(super) fn invocations(size: [u32; 3]) -> u128 {
    size.iter().map(|&d| u128::from(d)).product()
}

/// Builds `spec` into kernel slot `slot` and checks `build`'s verdict.
pub(super) fn build(world: &mut World, slot: u8, spec: &KernelSpec) -> Result<(), String> {
    let size = spec.workgroup.size();
    let mut k = KernelBuilder::new("drawn", size);
    let lower = Lower::declare(&mut k, spec);
    lower.body(&mut k, &spec.body);
    let (declared, verdict) = lower.finish();
    let result = k.build();
    let slot = &mut world.kernels[slot as usize % KERNELS];
    *slot = None;
    let kernel = check_build(result, size, &declared, &verdict)?;
    *slot = kernel.map(|kernel| Built {
        kernel,
        bindings: declared.bindings,
        params: declared.params,
        shared_bytes: declared
            .shared
            .iter()
            .map(|&(e, n)| e.size_bytes() as u64 * u64::from(n))
            .sum(),
        uses_half: verdict.uses_half,
    });
    Ok(())
}

/// What a kernel declares.
pub(super) struct Declared {
    pub bindings: Vec<(ElemType, Access)>,
    pub params: Vec<ElemType>,
    pub shared: Vec<(ElemType, u32)>,
}

/// Checks `build`'s `result` for a kernel of workgroup `size` declaring `declared`, whose
/// lowering found `verdict`; the kernel to keep, if accepted.
fn check_build(
    result: Result<Kernel, KernelError>,
    size: [u32; 3],
    declared: &Declared,
    verdict: &Verdict,
) -> Result<Option<Kernel>, String> {
    let product = invocations(size);
    let size_ok = (1..=u128::from(MAX_WORKGROUP_INVOCATIONS)).contains(&product);
    let shared_ok = declared.shared.iter().all(|&(_, len)| len > 0);
    match result {
        Ok(_) if !size_ok => Err(format!(
            "build accepted workgroup size {size:?}, whose product is {product}"
        )),
        Ok(_) if !shared_ok => Err("build accepted a shared array of no elements".into()),
        Ok(_) if !verdict.faults.is_empty() => Err(format!(
            "build accepted a kernel with {}",
            verdict.faults.join(", ")
        )),
        Ok(kernel) if kernel.def().workgroup_size != size => {
            Err(format!("build changed the workgroup size {size:?}"))
        }
        Ok(kernel) => Ok(Some(kernel)),
        Err(KernelError::InvalidWorkgroupSize { size: got, .. }) if !size_ok && got == size => {
            Ok(None)
        }
        // With several faults, any of them may be the one named.
        Err(err) if !size_ok && verdict.faults.is_empty() => {
            Err(format!("size {size:?} refused with {err:?}"))
        }
        Err(KernelError::EmptySharedArray { .. }) if !shared_ok => Ok(None),
        Err(err) if !shared_ok && verdict.faults.is_empty() => {
            Err(format!("an empty shared array refused with {err:?}"))
        }
        Err(err) if verdict.faults.is_empty() && !verdict.unsure => {
            Err(format!("build refused a valid kernel: {err}"))
        }
        Err(_) => Ok(None),
    }
}
