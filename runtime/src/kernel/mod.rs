//! Kernels: defined once in a small typed IR, lowered by each device.
//!
//! A kernel is written with [`KernelBuilder`] over `Copy` [`Value`]s, validated once by
//! [`KernelBuilder::build`] (or [`Kernel::new`](crate::Kernel::new) for a hand-made
//! [`KernelDef`]) with [`validate`], identified for compile caches by
//! [`KernelDef::content_hash`], and launched through
//! [`ComputeClient::launch`](crate::ComputeClient::launch).

pub mod accuracy;
mod builder;
pub mod display;
mod ir;
pub mod semantics;
mod types;
mod uniformity;
mod validate;
mod validated;

pub use builder::{
    Binding, ForeignOrigin, KernelArray, KernelBuilder, LocalArray, Shared, Value, Var,
};
pub use ir::*;
pub use types::{used as types_used, uses_half};
pub use uniformity::DivergenceCause;
pub use validate::{
    KernelError, MAX_LOCAL_ARRAY_LEN, MAX_WORKGROUP_INVOCATIONS, validate, validate_for_device,
};
pub use validated::Kernel;

/// How a device must compile a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Whether the kernel guards its accesses (see [`KernelChecks`]).
    pub checks: KernelChecks,
    /// Identifies the kernel in fault records; assigned by the runtime, unique per device.
    pub kernel_id: u32,
}

impl CompileOptions {
    /// Checked compilation of the kernel numbered `kernel_id` (what the runtime asks for by
    /// default).
    pub const fn checked(kernel_id: u32) -> Self {
        Self {
            checks: KernelChecks::checked(),
            kernel_id,
        }
    }
}

/// Whether a kernel guards every access to its bindings and shared arrays.
///
/// Checked (the default), an access out of range is skipped (a load yields zero) and the first
/// one is reported in the stream's fault record (see [`FaultRecord`]), which the runtime
/// returns as [`ServerError::KernelFault`](crate::ServerError::KernelFault). Unchecked, the
/// kernel runs without guards and without the fault record, as a tuned deployment would; an
/// access out of range is then undefined behaviour on a GPU: it may read or write any memory
/// of the device's context, other allocations included. That is why an unchecked kernel can
/// only be asked for through the `unsafe` [`KernelChecks::unchecked`], as wgpu asks for
/// shader modules without runtime checks (`ShaderRuntimeChecks::unchecked`).
///
/// ```
/// use lockstep::kernel::KernelChecks;
/// assert!(KernelChecks::default().is_checked());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelChecks {
    checked: bool,
}

impl KernelChecks {
    /// Every access guarded, the first fault reported.
    pub const fn checked() -> Self {
        Self { checked: true }
    }

    /// No guards and no fault record.
    ///
    /// # Safety
    /// Every launch of every kernel compiled with these checks must keep every access of every
    /// invocation in range: each index into a binding below the binding's length in elements,
    /// each index into a shared array below its length, and a dynamic workgroup count's buffer
    /// large enough for the workgroups it names. A kernel built to guard its own accesses (for
    /// example `if i < data.len()` around each access to `data`, as the conformance suite's
    /// kernels do) meets this for any launch. On a GPU an access out of range is undefined
    /// behaviour; the simulator traps it instead (a
    /// [`DeviceError::ExecutionFault`](crate::DeviceError::ExecutionFault) on the stream), so a
    /// test run there finds it.
    #[allow(
        unsafe_code,
        reason = "declares the contract of unchecked kernels; runs nothing"
    )]
    pub const unsafe fn unchecked() -> Self {
        Self { checked: false }
    }

    /// Whether accesses are guarded.
    pub const fn is_checked(self) -> bool {
        self.checked
    }
}

impl Default for KernelChecks {
    /// Checked.
    fn default() -> Self {
        Self::checked()
    }
}

/// Layout of the per-stream fault record that checked kernels write.
///
/// In checked mode a kernel takes one extra binding after its declared ones: a read-write `u32`
/// array of [`FaultRecord::WORDS`] elements. An out-of-range access sets `[FLAG] = 1` and fills
/// the other words; later violations leave the record unchanged (first fault wins, written with
/// a compare-and-swap on `FLAG` on real devices). The simulator records the first access in its
/// order; a GPU, where invocations run in no defined order, may name any of them (CUDA reports
/// each invocation's last out-of-range access when the invocation ends, so that checking an
/// access costs two register selects, not a branch). The runtime
/// reads and clears it at `flush`/`sync`. `[BINDING]` names the array: a binding's number,
/// [`FaultRecord::SHARED_ARRAY`] plus a shared array's number, or
/// [`FaultRecord::LOCAL_ARRAY`] plus a local array's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRecord {
    /// The [`CompileOptions::kernel_id`] of the kernel that faulted.
    pub kernel_id: u32,
    /// The array accessed out of range: see [`SHARED_ARRAY`](Self::SHARED_ARRAY).
    pub binding: u32,
    /// The out-of-range element index.
    pub index: u32,
}

impl FaultRecord {
    /// Number of `u32` words in the record.
    pub const WORDS: usize = 4;
    /// Size of the record, in bytes.
    pub const BYTES: usize = Self::WORDS * 4;
    /// Word index of the flag: 0 while no fault is recorded, 1 once one is.
    pub const FLAG: usize = 0;
    /// Word index of the faulting kernel's id.
    pub const KERNEL: usize = 1;
    /// Word index of the faulting array's word.
    pub const BINDING: usize = 2;
    /// Word index of the out-of-range element index.
    pub const INDEX: usize = 3;
    /// Added to a shared array's number in `[BINDING]`; binding numbers stay below it.
    pub const SHARED_ARRAY: u32 = 1 << 31;
    /// Added to a local array's number in `[BINDING]`; binding numbers stay below it.
    pub const LOCAL_ARRAY: u32 = 1 << 30;

    /// What `[BINDING]` holds for a fault in `array`.
    pub const fn array_word(array: Array) -> u32 {
        match array {
            Array::Binding(b) => b.0,
            Array::Shared(s) => Self::SHARED_ARRAY | s.0,
            Array::Local(l) => Self::LOCAL_ARRAY | l.0,
        }
    }

    /// The array a `[BINDING]` word names.
    pub const fn array_of_word(word: u32) -> Array {
        if word & Self::SHARED_ARRAY != 0 {
            Array::Shared(SharedId(word & !Self::SHARED_ARRAY))
        } else if word & Self::LOCAL_ARRAY != 0 {
            Array::Local(LocalArrayId(word & !Self::LOCAL_ARRAY))
        } else {
            Array::Binding(BindingId(word))
        }
    }

    /// Decodes a record read back from the device; `None` when no fault was recorded.
    pub fn decode(words: &[u32; Self::WORDS]) -> Option<Self> {
        (words[Self::FLAG] == 1).then(|| Self {
            kernel_id: words[Self::KERNEL],
            binding: words[Self::BINDING],
            index: words[Self::INDEX],
        })
    }

    /// Whether the record holds neither "no fault" nor a fault: the write that zeroed it
    /// failed (that failure surfaced on its own), and kernels cannot record into it.
    pub fn is_corrupt(words: &[u32; Self::WORDS]) -> bool {
        words[Self::FLAG] > 1
    }
}

impl KernelDef {
    /// A content hash that is stable across runs and machines: FNV-1a over the kernel's `Debug`
    /// rendering, which spells out every node of the tree. Two kernels with the same hash are
    /// treated as the same kernel by compile caches.
    pub fn content_hash(&self) -> u64 {
        let mut hasher = Fnv1a::default();
        std::fmt::Write::write_fmt(&mut hasher, format_args!("{self:?}"))
            .expect("writing into a hasher cannot fail");
        hasher.0
    }

    /// Whether an invocation may end early while others of its workgroup still reach barriers:
    /// the kernel has both a [`Stmt::Return`] and a [`Stmt::Barrier`]. Lowerings then keep an
    /// ended invocation arriving at the barriers the others reach (the IR's rule), which a GPU
    /// barrier does not promise for invocations that left the kernel.
    pub fn returns_before_barriers(&self) -> bool {
        let all = display::statements(&self.body);
        all.iter().any(|s| matches!(s, Stmt::Return))
            && all.iter().any(|s| matches!(s, Stmt::Barrier))
    }
}

/// 64-bit FNV-1a, used where a hash must not depend on the process (compile caches, traces).
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(pub u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Feeds `bytes` to the hash.
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Feeds `v`, little endian, to the hash.
    pub fn write_u64(&mut self, v: u64) {
        self.write_bytes(&v.to_le_bytes());
    }
}

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.write_bytes(s.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests;
