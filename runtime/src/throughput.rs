//! What tuning measures and proposes: the keys and values of
//! [`ComputeClient::measure_throughput`](crate::ComputeClient::measure_throughput)(crate::ComputeClient::measure_throughput), whose
//! results the server caches per device, and the widest vector
//! [`ComputeClient::io_optimized_vector_sizes`](crate::ComputeClient::io_optimized_vector_sizes)
//! proposes. The client's methods are in `client/throughput.rs`.

use std::time::Duration;

use crate::kernel::ElemType;
use crate::profiling::TimingMethod;

/// The widest vector (in elements)
/// [`ComputeClient::io_optimized_vector_sizes`](crate::ComputeClient::io_optimized_vector_sizes)
/// proposes.
pub const MAX_VECTOR_SIZE: usize = 8;

/// What [`ComputeClient::measure_throughput`](crate::ComputeClient::measure_throughput) measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThroughputKey {
    /// Multiply-adds of `elem` in registers, counted as two operations each.
    Arithmetic(ElemType),
    /// A copy between two device buffers of `u32`: bytes read plus bytes written.
    Memory,
}

/// The size of a measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    /// Workgroups of 64 invocations, each handling one element.
    pub workgroups: u32,
    /// Multiply-adds per invocation (arithmetic only).
    pub iterations: u32,
}

impl Default for KernelConfig {
    /// 256 Ki invocations, 1024 multiply-adds each: long enough on a GPU to dwarf launch
    /// latency; use a smaller one on the simulator, which interprets every operation.
    fn default() -> Self {
        Self {
            workgroups: 4096,
            iterations: 1024,
        }
    }
}

/// A measured throughput.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThroughputValue {
    /// Operations ([`ThroughputKey::Arithmetic`]) or bytes ([`ThroughputKey::Memory`]) per
    /// second.
    pub per_second: f64,
    /// Operations or bytes the timed launches did.
    pub work: u64,
    /// Time the timed launches took.
    pub elapsed: Duration,
    /// How they were timed.
    pub method: TimingMethod,
}
