//! How the suite gets a device: one factory per backend, each opening a fresh client per case.

use lockstep::{ComputeClient, Device, ServerOptions};
use lockstep_sim::{SimConfig, SimDevice, SimProbe};

/// What a device can tell the suite beyond the client API (the simulator's sanitizer).
pub trait Observer {
    /// Problems the device noticed (use after free, reads of unwritten memory, …).
    fn sanitizer_reports(&self) -> Vec<String>;
    /// A hash of everything the device executed, where the device is deterministic.
    fn trace_hash(&self) -> Option<u64>;
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
}

/// The simulator, optionally with runtime options changed (the suite's self-test turns the
/// cross-stream ordering off to prove the properties notice).
#[derive(Clone, Debug, Default)]
pub struct SimFactory {
    pub options: ServerOptions,
}

impl SimFactory {
    /// The simulated device a session with `seed` runs on.
    pub fn config(seed: u64) -> SimConfig {
        SimConfig::new(seed)
    }
}

impl Observer for SimProbe {
    fn sanitizer_reports(&self) -> Vec<String> {
        self.observations()
            .reports
            .iter()
            .map(|r| r.to_string())
            .collect()
    }

    fn trace_hash(&self) -> Option<u64> {
        Some(self.observations().trace_hash)
    }
}

impl DeviceFactory for SimFactory {
    type Device = SimDevice;

    fn name(&self) -> &'static str {
        "sim"
    }

    fn open(&self, seed: u64) -> Session<SimDevice> {
        let device = SimDevice::new(Self::config(seed));
        let probe = device.probe();
        Session {
            client: ComputeClient::with_options(device, self.options),
            observer: Some(Box::new(probe)),
        }
    }

    fn deterministic(&self) -> bool {
        true
    }
}
