//! Shrinking a failing seed of a recording: its calls in the order the seed ran them, without
//! whole threads first, then by ddmin (`crate::shrink::ddmin`, shared with drawn workloads),
//! keeping a candidate only if it fails in the same [`RecordedClass`].
//!
//! **Invariant:** a candidate is a subsequence of the failing run's order, run in that order
//! with the seed's simulators and fault, so removing calls never redraws the order that
//! failed; the shrunk recording lists its calls in that order, so running it in file order
//! ([`run_in_order`] over `0..n`) repeats the failure. At most [`MAX_RUNS`] runs are spent.

use std::collections::BTreeMap;

use lockstep::record::{Event, Op};

use super::faults::Fault;
use super::order::Plan;
use super::recording::Recording;
use super::run::run_in_order;
use super::verdict::{RecordedClass, RecordedFailure};
use crate::shrink::{MAX_RUNS, ShrinkError, ddmin};

/// A shrunk failing seed of a recording.
#[derive(Clone, Debug)]
pub struct ShrunkRecording {
    /// The calls kept, in the order the failing seed ran them (their file order), with only
    /// the declarations they name.
    pub recording: Recording,
    /// Calls of the recording explored.
    pub original_calls: usize,
    /// Runs spent, the first (which classifies the failure) included.
    pub runs: usize,
    /// Why the shrunk recording fails.
    pub failure: RecordedFailure,
    /// The fault the seed injects (none without `--faults`).
    pub fault: Option<Fault>,
}

/// Shrinks seed `seed` of `recording` (explored with `--faults` if `faults`), which must fail.
///
/// # Errors
/// [`ShrinkError::Passes`] if the seed passes, [`ShrinkError::Nondeterministic`] if the shrunk
/// recording passes when run again.
pub fn shrink(
    recording: &Recording,
    seed: u64,
    faults: bool,
) -> Result<ShrunkRecording, ShrinkError> {
    let fault = faults
        .then(|| super::faults::draw(recording, seed))
        .flatten();
    let order = Plan::of(recording).order(seed);
    let mut judge = Judge {
        recording,
        seed,
        fault: fault.as_ref(),
        class: None,
        runs: 0,
        seen: BTreeMap::new(),
    };
    let failure = judge.run(&order).ok_or(ShrinkError::Passes)?;
    judge.class = Some(failure.class.clone());
    // Calls after the failing one never ran.
    let failed_at = failure.call.and_then(|at| {
        order
            .iter()
            .position(|&i| recording.calls[i].call == at.call)
    });
    let order = order[..failed_at.map_or(order.len(), |p| p + 1)].to_vec();
    let order = without_threads(order, &mut judge);
    let order = ddmin(order, |candidate| judge.fails(candidate));
    let failure = judge.run(&order).ok_or(ShrinkError::Nondeterministic)?;
    Ok(ShrunkRecording {
        recording: in_run_order(recording, &order),
        original_calls: recording.calls.len(),
        runs: judge.runs,
        failure,
        fault: fault.clone(),
    })
}

/// Tries the order without each thread's calls, keeping each removal that still fails.
fn without_threads(mut order: Vec<usize>, judge: &mut Judge<'_>) -> Vec<usize> {
    for thread in judge.recording.threads() {
        let candidate: Vec<usize> = (order.iter().copied())
            .filter(|&i| judge.recording.calls[i].thread != thread)
            .collect();
        if candidate.len() < order.len() && judge.fails(&candidate) {
            order = candidate;
        }
    }
    order
}

/// Runs candidates (subsequences of the failing order) and says whether they fail the
/// original way; counts and memoizes runs.
struct Judge<'a> {
    recording: &'a Recording,
    seed: u64,
    fault: Option<&'a Fault>,
    /// The original failure's class, once known.
    class: Option<RecordedClass>,
    runs: usize,
    seen: BTreeMap<Vec<usize>, bool>,
}

impl Judge<'_> {
    /// Runs the calls at `order` (indices into the recording's calls) in that order.
    fn run(&mut self, order: &[usize]) -> Option<RecordedFailure> {
        self.runs += 1;
        let candidate = in_run_order(self.recording, order);
        let in_file_order: Vec<usize> = (0..candidate.calls.len()).collect();
        run_in_order(&candidate, &in_file_order, self.seed, self.fault)
            .ok()
            .and_then(|run| run.failure)
    }

    fn fails(&mut self, order: &[usize]) -> bool {
        if let Some(&verdict) = self.seen.get(order) {
            return verdict;
        }
        if self.runs >= MAX_RUNS {
            return false;
        }
        let verdict = self
            .run(order)
            .is_some_and(|failure| Some(failure.class) == self.class);
        self.seen.insert(order.to_vec(), verdict);
        verdict
    }
}

/// The recording of the calls at `order`, listed in that order (positions renumbered so each
/// outcome follows its call), with the kernels they name.
fn in_run_order(recording: &Recording, order: &[usize]) -> Recording {
    let calls: Vec<_> = (order.iter().enumerate())
        .map(|(k, &i)| {
            let mut call = recording.calls[i].clone();
            call.position = 2 * k;
            call.outcome_position = call.outcome.as_ref().map(|_| 2 * k + 1);
            call
        })
        .collect();
    let named = |hash: &u64| {
        calls.iter().any(|c| match &c.op {
            Op::Launch { kernel, .. } | Op::Compile { kernel } => kernel == hash,
            _ => false,
        })
    };
    let declarations = (recording.declarations.iter())
        .filter(|d| !matches!(d, Event::Kernel { hash, .. } if !named(hash)))
        .cloned()
        .collect();
    Recording {
        declarations,
        calls,
        unread: None,
    }
}
