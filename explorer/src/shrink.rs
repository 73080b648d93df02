//! Shrinking a failing seed: delta debugging (ddmin) over its workload's operations, in the
//! order the threads perform them, then simpler operations (smaller sizes), keeping only changes after which
//! the run still fails in the same [`FailureClass`] (compared by value: the failing operation's
//! kind or the stage around the workload, and the check).
//!
//! **Invariant:** shrinking is a pure function of the world, the workload and the opener: each
//! candidate is run once on the deterministic simulator, candidates are tried in a fixed order,
//! and at most [`MAX_RUNS`] runs are spent. Removing operations keeps the schedule consistent,
//! because a candidate is a subsequence of the run order from which threads and schedule are
//! rebuilt ([`workload_of`]).

use std::collections::BTreeMap;

use super::failure::{ExploreFailure, FailureClass};
use super::workload::{Action, Step, Workload};
use super::world::World;
use super::{Opener, run_workload};

/// Runs a shrink may spend; when they are spent, the smallest failing workload so far stands.
pub const MAX_RUNS: usize = 2_000;

/// A shrunk failing workload.
#[derive(Clone, Debug)]
pub struct Shrunk {
    /// The smallest failing workload found.
    pub workload: Workload,
    /// Operations of the drawn workload.
    pub original_len: usize,
    /// Runs spent, the first (which classifies the failure) included.
    pub runs: usize,
    /// Why the shrunk workload fails.
    pub failure: ExploreFailure,
    /// Allocations a pool's cap refused in the shrunk run.
    pub capped_refusals: u64,
}

/// Why a seed could not be shrunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShrinkError {
    /// The drawn workload passes.
    #[error("the seed's workload passes: there is nothing to shrink")]
    Passes,
    /// A failing workload passed when run again.
    #[error("a workload seen to fail passed when run again: runs are not deterministic")]
    Nondeterministic,
}

/// Shrinks the drawn workload of `world`, which must fail when run with `opener`.
pub fn shrink<O: Opener>(opener: &O, world: &World) -> Result<Shrunk, ShrinkError> {
    let drawn = Workload::draw(world);
    let steps: Vec<(usize, Step)> = drawn.in_order().map(|(t, s)| (t, s.clone())).collect();
    let mut judge = Judge::new(opener, world, &steps)?;
    // Operations after a failing one never run.
    let steps = match judge.turn.filter(|&turn| turn + 1 < steps.len()) {
        Some(turn) if judge.fails(&steps[..=turn]) => steps[..=turn].to_vec(),
        _ => steps,
    };
    let steps = ddmin(steps, |candidate| judge.fails(candidate));
    let steps = simplify(steps, &mut judge);
    let (failure, capped_refusals) = judge.last_failure(&steps)?;
    Ok(Shrunk {
        workload: workload_of(&steps),
        original_len: drawn.len(),
        runs: judge.runs,
        failure,
        capped_refusals,
    })
}

/// Runs candidates and says whether they fail the original way; counts and memoizes runs.
struct Judge<'a, O: Opener> {
    opener: &'a O,
    world: &'a World,
    class: FailureClass,
    /// The failing operation's turn in the drawn workload, if an operation failed.
    turn: Option<usize>,
    /// Whether refusals by a pool's cap are acceptable (the drawn run had some too); otherwise
    /// candidates must avoid them, so the printed program can assume every allocation succeeds.
    capped_ok: bool,
    runs: usize,
    /// Verdicts by the candidate's text (its `Debug` form).
    seen: BTreeMap<String, bool>,
}

impl<'a, O: Opener> Judge<'a, O> {
    fn new(opener: &'a O, world: &'a World, steps: &[(usize, Step)]) -> Result<Self, ShrinkError> {
        let (execution, _) = run_workload(opener, world, &workload_of(steps), false);
        let failure = execution.failure.ok_or(ShrinkError::Passes)?;
        Ok(Judge {
            opener,
            world,
            class: failure.class,
            turn: failure.operation.map(|operation| operation.turn),
            capped_ok: execution.capped_refusals > 0,
            runs: 1,
            seen: BTreeMap::new(),
        })
    }

    fn fails(&mut self, steps: &[(usize, Step)]) -> bool {
        let key = format!("{steps:?}");
        if let Some(&verdict) = self.seen.get(&key) {
            return verdict;
        }
        if self.runs >= MAX_RUNS {
            return false;
        }
        self.runs += 1;
        let (execution, _) = run_workload(self.opener, self.world, &workload_of(steps), false);
        let verdict = (self.capped_ok || execution.capped_refusals == 0)
            && execution
                .failure
                .is_some_and(|failure| failure.class == self.class);
        self.seen.insert(key, verdict);
        verdict
    }

    /// The failure message and capped refusals of `steps`, which were seen to fail (one more
    /// run).
    fn last_failure(
        &mut self,
        steps: &[(usize, Step)],
    ) -> Result<(ExploreFailure, u64), ShrinkError> {
        self.runs += 1;
        let (execution, _) = run_workload(self.opener, self.world, &workload_of(steps), false);
        let failure = execution.failure.ok_or(ShrinkError::Nondeterministic)?;
        Ok((failure, execution.capped_refusals))
    }
}

/// Zeller's ddmin: removes chunks of ever finer partitions of `items` while the rest still
/// `fails`. Shared by drawn workloads and recordings; `fails` decides, memoizes and bounds.
pub(crate) fn ddmin<T: Clone>(mut items: Vec<T>, mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
    let mut n = 2;
    while items.len() >= 2 {
        let bounds: Vec<usize> = (0..=n).map(|k| k * items.len() / n).collect();
        let chunks: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
        let subset = chunks
            .iter()
            .map(|&(a, b)| items[a..b].to_vec())
            .find(|c| n > 2 && fails(c));
        if let Some(subset) = subset {
            items = subset;
            n = 2;
            continue;
        }
        let complement = chunks
            .iter()
            .map(|&(a, b)| [&items[..a], &items[b..]].concat())
            .find(|c| fails(c));
        if let Some(complement) = complement {
            items = complement;
            n = (n - 1).max(2);
            continue;
        }
        if n >= items.len() {
            break;
        }
        n = (2 * n).min(items.len());
    }
    items
}

/// Tries simpler forms of each operation ([`simpler`]), keeping the first that still fails.
fn simplify<O: Opener>(
    mut steps: Vec<(usize, Step)>,
    judge: &mut Judge<'_, O>,
) -> Vec<(usize, Step)> {
    for i in 0..steps.len() {
        for action in simpler(&steps[i].1.action) {
            let mut candidate = steps.clone();
            candidate[i].1.action = action;
            if judge.fails(&candidate) {
                steps = candidate;
                break;
            }
        }
    }
    steps
}

/// Simpler forms of `action`, simplest first: sized operations with 1, 2, 4, … elements (below
/// their size), tensor groups of one-element tensors, tensor reads without their view.
fn simpler(action: &Action) -> Vec<Action> {
    if let Action::ReadTensors {
        slot,
        view: Some(_),
    } = action
    {
        let slot = *slot;
        return vec![Action::ReadTensors { slot, view: None }];
    }
    if let Action::CreateTensors { slot, shapes, fill } = action {
        return [vec![vec![1]], vec![vec![1]; shapes.len()]]
            .into_iter()
            .filter(|ones| ones != shapes)
            .map(|shapes| Action::CreateTensors {
                slot: *slot,
                shapes,
                fill: *fill,
            })
            .collect();
    }
    let Some(len) = length(&mut action.clone()).map(|len| *len) else {
        return Vec::new();
    };
    (0..usize::BITS)
        .map(|b| 1usize << b)
        .take_while(|&smaller| smaller < len)
        .map(|smaller| {
            let mut simpler = action.clone();
            if let Some(len) = length(&mut simpler) {
                *len = smaller;
            }
            simpler
        })
        .collect()
}

/// The element count of a sized action. Every action is listed, so that a new sized one is
/// not left unshrunk.
fn length(action: &mut Action) -> Option<&mut usize> {
    match action {
        Action::Create { len, .. }
        | Action::EmptyThenFill { len, .. }
        | Action::Write { len, .. }
        | Action::FromPeer { len, .. } => Some(len),
        // Tensor groups shrink by their shapes, tensor reads by their view (`simpler`); a
        // misaligned edge write is a few bytes already; the rest have no size.
        Action::CreateTensors { .. }
        | Action::Edge(_)
        | Action::Launch(_)
        | Action::Read { .. }
        | Action::ReadPair { .. }
        | Action::ReadTensors { .. }
        | Action::ReadLazy { .. }
        | Action::Materialize
        | Action::Exclusive { .. }
        | Action::Profile(_)
        | Action::DryRun(_)
        | Action::Release { .. }
        | Action::ReleaseTensors { .. }
        | Action::Flush
        | Action::Sync
        | Action::SyncAll
        | Action::Overrun { .. }
        | Action::BeginCapture { .. }
        | Action::EndCapture
        | Action::CaptureOutOfOrder { .. }
        | Action::Oversized { .. }
        | Action::LaunchView { .. }
        | Action::Replay
        | Action::DropGraph
        | Action::AllReduce { .. }
        | Action::ToPeer { .. }
        | Action::ViewToPeer { .. }
        | Action::Install
        | Action::Prepare
        | Action::Cleanup
        | Action::Usage => None,
    }
}

/// The workload performing `steps` in this order: threads keep their relative order, and
/// threads left without steps are dropped.
pub fn workload_of(steps: &[(usize, Step)]) -> Workload {
    let mut ids: Vec<usize> = steps.iter().map(|&(t, _)| t).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut threads = vec![Vec::new(); ids.len()];
    let mut schedule = Vec::with_capacity(steps.len());
    for (t, step) in steps {
        let k = ids.partition_point(|id| id < t);
        threads[k].push(step.clone());
        schedule.push(k);
    }
    Workload { threads, schedule }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::On;

    #[test]
    fn a_subsequence_of_the_run_order_rebuilds_a_consistent_workload() {
        let step = |slot| Step {
            on: On::Thread,
            action: Action::Read { slot },
        };
        let workload = workload_of(&[(3, step(0)), (1, step(1)), (3, step(2))]);
        assert_eq!(
            workload.threads,
            vec![vec![step(1)], vec![step(0), step(2)]]
        );
        assert_eq!(workload.schedule, vec![1, 0, 1]);
        let order: Vec<_> = workload.in_order().map(|(t, s)| (t, s.clone())).collect();
        assert_eq!(order, vec![(1, step(0)), (0, step(1)), (1, step(2))]);
    }
}
