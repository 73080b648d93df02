//! What a device is and what it can do: its name, sizes and limits, and optional features.
//! Kernel validation reads them (`crate::kernel`), devices report them, and the runtime sizes
//! its pools by them.
//!
//! **Architecture Invariant:** this module imports nothing of the runtime (which element types
//! the features allow is the kernel's business: `Features::supports`, in `kernel/types.rs`).

/// How a device executes captured graphs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphSupport {
    /// The device records a native graph and replays it as one dispatch (CUDA graphs).
    Hardware,
    /// The device re-issues recorded launches from prebuilt state.
    Software,
}

/// Optional capabilities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    /// How the device runs captured graphs.
    pub graphs: GraphSupport,
    /// Device timestamps for profiling.
    pub timestamps: bool,
    /// Whether streams truly run concurrently. When false (wgpu's single queue), work of
    /// different streams still obeys every ordering rule, but never overlaps in time.
    pub concurrent_streams: bool,
    /// Whether kernels may use [`ElemType::F16`](crate::kernel::ElemType::F16) (WGSL's
    /// `shader-f16`, CUDA's `__half` bits); a kernel that does is refused on a device without it.
    pub f16: bool,
    /// Whether kernels may use [`ElemType::BF16`](crate::kernel::ElemType::BF16) (CUDA on
    /// compute capability 8.0 or later; WGSL has no bfloat16).
    pub bf16: bool,
}

/// What a device is and what it can do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Human-readable adapter name, e.g. "NVIDIA H200" or "lockstep simulator".
    pub name: String,
    /// Backend and driver, e.g. "vulkan (NVIDIA 580.0)".
    pub backend: String,
    /// Total device memory, in bytes.
    pub memory_bytes: u64,
    /// Largest single allocation, in bytes (a pool page or an exclusive slice cannot exceed it).
    pub max_allocation_bytes: u64,
    /// Alignment of binding offsets inside an allocation, and of pitched rows.
    pub alignment_bytes: u64,
    /// Widest single load, in bytes (the pitch of rows is at least this).
    pub max_load_width_bytes: u32,
    /// Largest workgroup count per dimension of one launch.
    pub max_workgroups: [u32; 3],
    /// Largest total size of one kernel's workgroup-shared arrays.
    pub max_shared_memory_bytes: u64,
    /// Optional capabilities.
    pub features: Features,
}
