//! The fault a seed injects into a recording under `--faults`: one scripted fault, its kind
//! and trigger drawn from the seed among the triggers the recording's calls make, so that a
//! small recording meets a fault in most seeds (rates per trigger would rarely fire in a run
//! of a few calls).

use lockstep::record::Op;
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::recording::Recording;

/// Separates the fault's draw from the thread order's and the simulator's.
const FAULT_SALT: u64 = 0xfa17_5eed_0bad_c0de;

/// The plan of seed `seed` for every device of `recording`: one fault at the n-th trigger of
/// a kind the calls trigger (counted on every device together, an upper bound for each); no
/// fault for a recording that triggers none.
pub fn plan(recording: &Recording, seed: u64) -> FaultPlan {
    let counts = triggers(recording);
    let kinds: Vec<(FaultKind, u64)> = counts.into_iter().filter(|&(_, n)| n > 0).collect();
    if kinds.is_empty() {
        return FaultPlan::default();
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ FAULT_SALT);
    let (kind, n) = kinds[rng.random_range(0..kinds.len())];
    FaultPlan::scripted([ScriptedFault::at(kind, rng.random_range(1..=n))])
}

/// How many triggers of each kind the calls make, at most: allocations (every create may
/// need one), transfers (filled creates, writes, reads), launches run, and operations.
fn triggers(recording: &Recording) -> [(FaultKind, u64); 4] {
    let (mut allocations, mut transfers, mut launches) = (0, 0, 0);
    for call in &recording.calls {
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
