//! `lockstep explore --recording`: a recorded run (`LOCKSTEP_RECORD`) explored on the
//! simulator. Its recorded threads become the explorer's threads: each seed keeps every
//! thread's own order, draws the order between threads within the happens-before the
//! recording shows ([`order`]), seeds the simulators' interleaving of streams and, under
//! `--faults`, injects one fault ([`faults`]). The calls run through the replay's one path
//! (`lockstep::replay::Replayer`), and a seed fails ([`verdict`]) when a call panics, the
//! simulator's sanitizer reports (stream races, kernel races, divergent barriers, unwritten
//! shared reads), its watchdog fires, an injected fault never comes back as an error, or a
//! result differs from the recorded run's: under another order of racing threads, that
//! difference is the bug (the result depends on the interleaving).
//!
//! **Architecture Invariant:** a seed determines the run (thread order, interleaving, fault),
//! so `lockstep explore --recording PATH --seed S --seeds 1` repeats any seed's failure.

pub mod faults;
pub mod order;
pub mod recording;
pub mod run;
pub mod shrink;
pub mod verdict;

use lockstep::replay::ReplayError;

pub use order::Plan;
pub use recording::{LoadError, RecordedCall, Recording};
pub use run::{SeedRun, run_in_order, run_seed};
pub use verdict::{CallAt, RecordedClass, RecordedFailure};

/// Totals of a recording's exploration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Explored {
    /// Seeds run.
    pub seeds: u64,
    /// Calls run, over every seed.
    pub calls_run: u64,
    /// Results found equal to the recorded run's, over every seed.
    pub results_compared: u64,
    /// Faults injected, over every seed.
    pub faults_injected: u64,
    /// Each failing seed, with why, in seed order.
    pub failures: Vec<(u64, RecordedFailure)>,
}

/// Explores `seeds` seeds of `recording` from `first_seed`, calling `on_seed` after each.
///
/// # Errors
/// [`ReplayError`] if a call names a device the recording never declared.
pub fn explore(
    recording: &Recording,
    first_seed: u64,
    seeds: u64,
    faults: bool,
    mut on_seed: impl FnMut(&SeedRun),
) -> Result<Explored, ReplayError> {
    let plan = Plan::of(recording);
    let mut explored = Explored::default();
    for n in 0..seeds {
        let run = run_seed(recording, &plan, first_seed.wrapping_add(n), faults)?;
        explored.seeds += 1;
        explored.calls_run += run.calls_run;
        explored.results_compared += run.results_compared;
        explored.faults_injected += run.faults_injected;
        if let Some(failure) = &run.failure {
            explored.failures.push((run.seed, failure.clone()));
        }
        on_seed(&run);
    }
    Ok(explored)
}

#[cfg(test)]
mod tests;
