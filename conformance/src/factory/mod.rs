//! How the suite gets a device: one factory per backend, each opening a fresh client per case.
//! The CUDA and wgpu factories exist with the crate's `cuda` and `wgpu` features (on by default).

use lockstep::{ComputeClient, Device};
use lockstep_sim::{FaultPlan, InjectedFault};

#[cfg(feature = "cuda")]
mod cuda;
mod sim;
#[cfg(feature = "wgpu")]
mod wgpu;

#[cfg(feature = "cuda")]
pub use cuda::CudaFactory;
pub use sim::SimFactory;
#[cfg(feature = "wgpu")]
pub use wgpu::WgpuFactory;

/// What a device can tell the suite beyond the client API (the simulator's sanitizer).
pub trait Observer {
    /// Problems the device noticed (use after free, reads of unwritten memory, …). With
    /// `excuse_unwritten`, reads of never-written bytes are left out: where a write was made to
    /// fail on purpose, reading what it would have written is expected.
    fn sanitizer_reports(&self, excuse_unwritten: bool) -> Vec<String>;
    /// Every fault the device injected so far, in injection order (none where it injects none).
    fn injected_faults(&self) -> Vec<InjectedFault>;
    /// How many operations the device's streams have been given so far (the numbering of
    /// [`InjectedFault::op`]).
    fn ops_enqueued(&self) -> u64;
    /// A hash of everything the device executed, where the device is deterministic.
    fn trace_hash(&self) -> Option<u64>;
    /// Every operation the device executed, where it records them (the simulator with
    /// `record_trace`).
    fn trace(&self) -> Vec<lockstep_sim::TraceEntry>;
}

/// A fresh client for one test case, and what can observe its device.
pub struct Session<D: Device> {
    /// The client of the session's device.
    pub client: ComputeClient<D>,
    /// What sees inside the device (the simulator's probe); `None` on real devices.
    pub observer: Option<Box<dyn Observer>>,
}

impl<D: Device> Session<D> {
    /// Sanitizer reports so far, as readable lines (see [`Observer::sanitizer_reports`]).
    pub fn reports(&self, excuse_unwritten: bool) -> Vec<String> {
        self.observer
            .as_ref()
            .map(|o| o.sanitizer_reports(excuse_unwritten))
            .unwrap_or_default()
    }
}

/// Opens devices of one backend for the suite.
pub trait DeviceFactory: Sync {
    /// The device the factory opens.
    type Device: Device;

    /// The name given to `--device`.
    fn name(&self) -> &'static str;

    /// Opens a fresh device. `seed` drives a deterministic device; others ignore it.
    fn open(&self, seed: u64) -> Session<Self::Device>;

    /// Opens a fresh device that injects the faults of `plan`, with an observer that lists
    /// them; `None` where the backend cannot inject faults (real hardware, the default).
    fn open_with_faults(&self, seed: u64, plan: &FaultPlan) -> Option<Session<Self::Device>> {
        let _ = (seed, plan);
        None
    }

    /// Whether [`open_with_faults`](Self::open_with_faults) opens devices.
    fn injects_faults(&self) -> bool {
        false
    }

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
