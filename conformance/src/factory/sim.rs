//! The simulator as a conformance device.

use lockstep::{ComputeClient, ServerOptions};
use lockstep_sim::{
    FaultPlan, InjectedFault, SanitizerReport, SimCluster, SimConfig, SimDevice, SimProbe,
};

use super::{DeviceFactory, Observer, Session};

/// The simulator, optionally with runtime options changed (the suite's self-test turns the
/// cross-stream ordering off to prove the properties notice).
#[derive(Clone, Debug, Default)]
pub struct SimFactory {
    /// Server options every session runs with.
    pub options: ServerOptions,
    /// Keep every trace entry (for export and for diffing two runs), not just the hash.
    pub record_trace: bool,
    /// Model a device without `f16` and `bf16` (`SimConfig::half_floats` off): the suite's
    /// self-test shows their properties reported `n/a`.
    pub without_half_floats: bool,
}

impl SimFactory {
    /// The simulated device a session with `seed` runs on.
    pub fn config(&self, seed: u64) -> SimConfig {
        SimConfig {
            record_trace: self.record_trace,
            half_floats: !self.without_half_floats,
            ..SimConfig::new(seed)
        }
    }
}

impl Observer for SimProbe {
    fn sanitizer_reports(&self, excuse_unwritten: bool) -> Vec<String> {
        self.observations()
            .reports
            .iter()
            .filter(|r| {
                !(excuse_unwritten && matches!(r, SanitizerReport::UninitializedRead { .. }))
            })
            .map(|r| r.to_string())
            .collect()
    }

    fn injected_faults(&self) -> Vec<InjectedFault> {
        self.observations().faults.clone()
    }

    fn ops_enqueued(&self) -> u64 {
        self.observations().ops_enqueued
    }

    fn trace_hash(&self) -> Option<u64> {
        Some(self.observations().trace_hash)
    }

    fn trace(&self) -> Vec<lockstep_sim::TraceEntry> {
        self.observations().entries.clone()
    }
}

impl DeviceFactory for SimFactory {
    type Device = SimDevice;

    fn name(&self) -> &'static str {
        "sim"
    }

    fn open(&self, seed: u64) -> Session<SimDevice> {
        self.session(SimDevice::new(self.config(seed)))
    }

    fn open_with_faults(&self, seed: u64, plan: &FaultPlan) -> Option<Session<SimDevice>> {
        let config = self.config(seed).with_faults(plan.clone());
        Some(self.session(SimDevice::new(config)))
    }

    fn injects_faults(&self) -> bool {
        true
    }

    fn deterministic(&self) -> bool {
        true
    }

    fn world_size_max(&self) -> usize {
        SIM_WORLD_SIZE_MAX
    }

    fn open_world(&self, seed: u64, count: usize) -> Option<Vec<Session<SimDevice>>> {
        if count == 0 || count > SIM_WORLD_SIZE_MAX {
            return None;
        }
        let cluster = SimCluster::new(self.config(seed), count as u32);
        Some(
            cluster
                .into_devices()
                .into_iter()
                .map(|device| self.session(device))
                .collect(),
        )
    }
}

/// The largest simulated cluster the suite opens.
const SIM_WORLD_SIZE_MAX: usize = 4;

impl SimFactory {
    fn session(&self, device: SimDevice) -> Session<SimDevice> {
        let probe = device.probe();
        Session {
            client: ComputeClient::with_options(device, self.options),
            observer: Some(Box::new(probe)),
        }
    }
}
