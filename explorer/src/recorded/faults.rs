//! The fault a seed injects into a recording under `--faults`: one scripted fault, its device,
//! kind and trigger drawn from the seed among the triggers the recording's calls make, so
//! that a small recording meets a fault in most seeds (rates per trigger would rarely fire in
//! a run of a few calls).

use std::collections::BTreeMap;

use lockstep::record::Op;
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::recording::{RecordedCall, Recording};

/// Separates the fault's draw from the thread order's and the simulator's.
const FAULT_SALT: u64 = 0xfa17_5eed_0bad_c0de;

/// The fault a seed injects: the recorded device that injects it, and its plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// The recorded device's number.
    pub device: u32,
    /// One scripted fault.
    pub plan: FaultPlan,
}

/// The fault of seed `seed` in `recording`: a device drawn among those whose calls trigger
/// faults, a kind its calls trigger, and the n-th trigger of that kind on it (counted on every
/// stream); `None` for a recording whose calls trigger none.
pub fn draw(recording: &Recording, seed: u64) -> Option<Fault> {
    let mut devices: BTreeMap<u32, Vec<&RecordedCall>> = BTreeMap::new();
    for call in &recording.calls {
        devices.entry(call.device).or_default().push(call);
    }
    let faulty: Vec<(u32, Vec<(FaultKind, u64)>)> = (devices.into_iter())
        .map(|(device, calls)| {
            let kinds = triggers(&calls).into_iter().filter(|&(_, n)| n > 0);
            (device, kinds.collect::<Vec<_>>())
        })
        .filter(|(_, kinds)| !kinds.is_empty())
        .collect();
    if faulty.is_empty() {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ FAULT_SALT);
    let (device, kinds) = &faulty[rng.random_range(0..faulty.len())];
    let (kind, n) = kinds[rng.random_range(0..kinds.len())];
    let plan = FaultPlan::scripted([ScriptedFault::at(kind, rng.random_range(1..=n))]);
    Some(Fault {
        device: *device,
        plan,
    })
}

/// How many triggers of each kind the calls make, at most: allocations (every create may
/// need one), transfers (filled creates, writes, reads), launches run, and operations.
fn triggers(calls: &[&RecordedCall]) -> [(FaultKind, u64); 4] {
    let (mut allocations, mut transfers, mut launches) = (0, 0, 0);
    for call in calls {
        match &call.op {
            Op::Create { data, .. } => {
                allocations += 1;
                transfers += u64::from(data.is_some());
            }
            Op::Write { .. } | Op::Read { .. } => transfers += 1,
            Op::Launch { dry_run: false, .. } => launches += 1,
            _ => {}
        }
    }
    [
        (FaultKind::AllocationFailure, allocations),
        (FaultKind::TransferFailure, transfers),
        (FaultKind::KernelFault, launches),
        (FaultKind::DeviceLoss, transfers + launches),
    ]
}
