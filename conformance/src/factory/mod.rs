//! How the suite gets a device: one factory per backend, each opening a fresh client per case.

use lockstep::{ComputeClient, Device};

mod cuda;
mod sim;
mod wgpu;

pub use cuda::CudaFactory;
pub use sim::SimFactory;
pub use wgpu::WgpuFactory;

/// What a device can tell the suite beyond the client API (the simulator's sanitizer).
pub trait Observer {
    /// Problems the device noticed (use after free, reads of unwritten memory, …).
    fn sanitizer_reports(&self) -> Vec<String>;
    /// A hash of everything the device executed, where the device is deterministic.
    fn trace_hash(&self) -> Option<u64>;
    /// Every operation the device executed, where it records them (the simulator with
    /// `record_trace`).
    fn trace(&self) -> Vec<lockstep_sim::TraceEntry>;
}

/// A fresh client for one test case, and what can observe its device.
pub struct Session<D: Device> {
    pub client: ComputeClient<D>,
    pub observer: Option<Box<dyn Observer>>,
}

impl<D: Device> Session<D> {
    /// Sanitizer reports so far, as readable lines.
    pub fn reports(&self) -> Vec<String> {
        self.observer
            .as_ref()
            .map(|o| o.sanitizer_reports())
            .unwrap_or_default()
    }
}

/// Opens devices of one backend for the suite.
pub trait DeviceFactory: Sync {
    type Device: Device;

    /// The name given to `--device`.
    fn name(&self) -> &'static str;

    /// Opens a fresh device. `seed` drives a deterministic device; others ignore it.
    fn open(&self, seed: u64) -> Session<Self::Device>;

    /// Whether equal seeds give equal executions (only then is a trace hash meaningful).
    fn deterministic(&self) -> bool;

    /// How many devices of one world (devices that can run collectives together) this
    /// backend can open at once.
    fn world_size_max(&self) -> usize {
        1
    }

    /// Opens `count` fresh devices of one world, ordinals `0..count` in order; `None` when
    /// `count` exceeds [`world_size_max`](Self::world_size_max).
    fn open_world(&self, seed: u64, count: usize) -> Option<Vec<Session<Self::Device>>> {
        (count == 1).then(|| vec![self.open(seed)])
    }
}
