//! How a simulated device is built: its seed, its size and the faults it will inject.

use crate::fault::FaultPlan;

/// Everything that determines a simulated device's behaviour. Two devices built from equal
/// configs and driven by the same calls execute the same operations in the same order.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Seeds the scheduler (which ready stream advances next, how much runs in the background)
    /// and, through a separate generator, probabilistic faults.
    pub seed: u64,
    /// Device memory, in bytes: allocations beyond it fail with `OutOfMemory`.
    pub memory_bytes: u64,
    /// Largest single allocation, in bytes.
    pub max_allocation_bytes: u64,
    /// At every device call, up to this many queued operations execute "in the background",
    /// as a real GPU progresses while the host is busy. Zero makes execution fully lazy.
    pub max_background_steps: u32,
    /// Faults the device injects.
    pub faults: FaultPlan,
    /// Keep every trace entry (for export) and not just the running hash.
    pub record_trace: bool,
    /// Virtual nanoseconds after which the device declares the run hung and loses itself, so
    /// that every later call fails with a typed error instead of running on forever.
    pub watchdog_ns: u64,
    /// Whether the device supports the half floats (`Features::f16` and `Features::bf16`);
    /// off, it models a device without them, whose kernels using one are refused.
    pub half_floats: bool,
    /// Whether the device records timestamps (`Features::timestamps`); off, it models a device
    /// without them (wgpu without `TIMESTAMP_QUERY`), whose `record_timestamp` is refused with
    /// `Unsupported`, so clients time work on the host.
    pub timestamps: bool,
    /// A dynamic workgroup count above `max_workgroups` makes its launch do nothing (the
    /// runtime's contract). Off, the device runs it, as it once did (for `u32::MAX` counts,
    /// into a `TaskPanicked`). Only the fuzzer's self-test turns this off, to prove the fuzzer
    /// refinds that bug.
    pub bound_dynamic_counts: bool,
}

impl SimConfig {
    /// A device seeded with `seed`: 1 GiB of memory, 256 MiB allocations at most, up to 3
    /// background operations per call, no faults, no recorded trace, no watchdog, half floats
    /// and timestamps supported.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            memory_bytes: 1 << 30,
            max_allocation_bytes: 256 << 20,
            max_background_steps: 3,
            faults: FaultPlan::default(),
            record_trace: false,
            watchdog_ns: u64::MAX,
            half_floats: true,
            timestamps: true,
            bound_dynamic_counts: true,
        }
    }

    /// The same config, for a device without `f16` and `bf16`.
    pub fn without_half_floats(mut self) -> Self {
        self.half_floats = false;
        self
    }

    /// The same config, for a device without timestamps.
    pub fn without_timestamps(mut self) -> Self {
        self.timestamps = false;
        self
    }

    /// The same config, injecting `faults`.
    pub fn with_faults(mut self, faults: FaultPlan) -> Self {
        self.faults = faults;
        self
    }

    /// The same config, with `memory_bytes` of memory and allocations of at most
    /// `max_allocation_bytes`.
    pub fn with_memory(mut self, memory_bytes: u64, max_allocation_bytes: u64) -> Self {
        self.memory_bytes = memory_bytes;
        self.max_allocation_bytes = max_allocation_bytes;
        self
    }
}
