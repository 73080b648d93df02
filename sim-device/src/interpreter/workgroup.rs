//! The workgroup engine, for kernels with shared arrays, barriers, atomics or `while` loops:
//! a batch of whole workgroups at a time, each lane with its own program counter over the
//! flattened [`Program`]. Lanes at one program counter form a group; a step runs one
//! instruction for a group drawn by the launch's seeded generator, and half of the time (while
//! fewer than [`MAX_GROUPS`] groups run) for only the lanes on one side of a random cut through
//! the workgroup's local ids, the same cut in every workgroup of the batch; so a workgroup's
//! invocations interleave instruction by instruction and results that depend on their order
//! differ between seeds (the race check reports the accesses behind them whatever the order),
//! while the batch's workgroups, which share nothing but global memory, mostly step together
//! and each step runs over many lanes. Lanes that reach the same program counter join its
//! group again. A barrier holds its lanes until no lane of the batch can run: every live lane
//! then waits at a barrier or has finished. In a workgroup whose lanes all wait at one barrier
//! they pass it together, and the batch's epoch advances; a workgroup whose lanes wait at
//! different barriers, or some of whose lanes reached the end of the kernel, reached a barrier
//! in divergent control flow, which is reported, and its lanes pass the barriers they wait at.
//! A lane that returned early is no longer live: the barriers pass without it. (The epoch counts
//! the barriers every workgroup with a lane still running has passed: at a release, each such
//! workgroup passes one barrier, or is reported as divergent.)

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::lanes::Batch;
use super::program::{Inst, Program};
use super::walk::{below, increment};
use super::{DivergentBarrier, KernelTrap};

/// Instructions a batch of workgroups may dispatch (each over a group of lanes) before the
/// simulator declares it endless, as a GPU's watchdog would: far more than any kernel the
/// simulator can run in reasonable time needs.
pub(super) const MAX_DISPATCHES: u64 = 1 << 22;

/// Groups of lanes running at once past which a pick no longer splits a group: each split
/// makes later steps run over fewer lanes, and left unbounded a loop's lanes spread over
/// every instruction of its body, each step then costing the scheduler more than the
/// instruction. Four groups still interleave every lane with every other one.
const MAX_GROUPS: usize = 4;

/// Lanes by the program counter they wait at.
///
/// **Invariant:** ascending by program counter, one entry per program counter; each group
/// non-empty and ascending.
#[derive(Default)]
struct Groups(Vec<(usize, Vec<u32>)>);

impl Groups {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Takes out the group with the `k`-th lowest program counter.
    fn take(&mut self, k: usize) -> (usize, Vec<u32>) {
        self.0.remove(k)
    }
}

/// The workgroup engine's state, kept from one workgroup of a launch to the next so that its
/// lane lists reuse their buffers: a workgroup of the explorer's kernels has 8 lanes, and
/// allocating per instruction cost more than running it.
#[derive(Default)]
pub(super) struct Scheduler {
    /// Lanes that can run, by program counter.
    running: Groups,
    /// Lanes held at a barrier, by the barrier's program counter.
    waiting: Groups,
    /// Lanes that reached the end, in the order they did.
    finished: Vec<u32>,
    /// Empty lane lists, for reuse.
    spare: Vec<Vec<u32>>,
}

impl Scheduler {
    /// An empty lane list.
    fn list(&mut self) -> Vec<u32> {
        self.spare.pop().unwrap_or_default()
    }

    /// Takes back a lane list (emptied here).
    fn recycle(&mut self, mut lanes: Vec<u32>) {
        lanes.clear();
        self.spare.push(lanes);
    }

    /// Adds `lanes` to the group running (or, `waiting`, held) at `pc`, keeping it ascending.
    fn join(&mut self, waiting: bool, pc: usize, lanes: Vec<u32>) {
        if lanes.is_empty() {
            return self.recycle(lanes);
        }
        let groups = if waiting {
            &mut self.waiting
        } else {
            &mut self.running
        };
        match groups.0.binary_search_by_key(&pc, |(at, _)| *at) {
            Err(k) => groups.0.insert(k, (pc, lanes)),
            Ok(k) => {
                let group = &mut groups.0[k].1;
                if group.last() < lanes.first() {
                    group.extend_from_slice(&lanes);
                    self.recycle(lanes);
                } else {
                    let mut merged = self.spare.pop().unwrap_or_default();
                    merge(group, &lanes, &mut merged);
                    let old = std::mem::replace(group, merged);
                    self.recycle(old);
                    self.recycle(lanes);
                }
            }
        }
    }

    /// Takes the lanes to run next out of `running` (not empty): a random group, and half of
    /// the time the lanes on one side of a random cut through the local ids of a workgroup of
    /// `group_lanes` invocations (the other side stays). Any two lanes of a workgroup are on
    /// opposite sides of some cut, and either side may run first, so every pair of a
    /// workgroup's lanes can interleave either way.
    fn pick(&mut self, rng: &mut ChaCha8Rng, group_lanes: u32) -> (usize, Vec<u32>) {
        let k = rng.random_range(0..self.running.len());
        let (pc, mut group) = self.running.take(k);
        if group.len() < 2 || self.running.len() + 1 >= MAX_GROUPS || !rng.random_ratio(1, 2) {
            return (pc, group);
        }
        let cut = rng.random_range(1..group_lanes.max(2));
        let in_front = rng.random();
        let mut other = self.list();
        group.retain(|&l| {
            let keep = (l % group_lanes < cut) == in_front;
            if !keep {
                other.push(l);
            }
            keep
        });
        if group.is_empty() {
            std::mem::swap(&mut group, &mut other);
        }
        self.join(false, pc, other);
        (pc, group)
    }

    /// Moves every waiting lane past its barrier.
    fn release_barriers(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        for (pc, group) in waiting.0 {
            self.join(false, pc + 1, group);
        }
    }
}

/// `a` and `b` (each ascending, no lane in both) merged into `out` (emptied first), ascending.
fn merge(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] < b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

/// Runs every lane of `batch` (whole workgroups) through `program`, interleaved by `rng`.
pub(super) fn run(
    batch: &mut Batch,
    program: &Program,
    scheduler: &mut Scheduler,
    rng: &mut ChaCha8Rng,
) -> Result<(), KernelTrap> {
    debug_assert!(
        scheduler.running.is_empty() && scheduler.waiting.is_empty(),
        "the previous workgroup finished"
    );
    let mut all = scheduler.list();
    all.extend(0..batch.lane_count() as u32);
    scheduler.join(false, 0, all);
    scheduler.finished.clear();
    let mut dispatches = 0u64;
    loop {
        if scheduler.running.is_empty() {
            if scheduler.waiting.is_empty() {
                return Ok(());
            }
            check_uniform(batch, program, &scheduler.waiting, &scheduler.finished);
            scheduler.release_barriers();
            batch.epoch += 1;
            continue;
        }
        let (pc, group) = scheduler.pick(rng, batch.group_lanes());
        dispatches += 1;
        if dispatches > MAX_DISPATCHES {
            // The launch ends here: the scheduler is not used again.
            return Err(KernelTrap::Endless {
                dispatches: MAX_DISPATCHES,
            });
        }
        let group = if batch.any_trapped {
            let live = batch.live(&group);
            scheduler.recycle(group);
            live
        } else {
            group
        };
        batch.statement = program.statements[pc];
        match &program.insts[pc] {
            Inst::Barrier => scheduler.join(true, pc, group),
            Inst::End => {
                scheduler.finished.extend_from_slice(&group);
                scheduler.recycle(group);
            }
            // A lane that returned waits nowhere: the barriers the others reach later pass
            // without it, and it is not a lane that finished while others wait.
            Inst::Return => scheduler.recycle(group),
            inst => scheduler.step(batch, inst, pc, group),
        }
    }
}

impl Scheduler {
    /// Runs `inst` (at `pc`) for `lanes`, and schedules each lane where it goes next.
    fn step(&mut self, batch: &mut Batch, inst: &Inst, pc: usize, lanes: Vec<u32>) {
        match inst {
            Inst::Effect(stmt) => {
                batch.effect(stmt, &lanes);
                self.join(false, pc + 1, lanes);
            }
            Inst::BranchUnless { cond, target } => {
                let cond = batch.eval(cond, &lanes).bools();
                let (taken, skipped) = self.split(&lanes, |l| cond[l as usize] != 0);
                batch.spares.give(cond);
                self.recycle(lanes);
                self.join(false, pc + 1, taken);
                self.join(false, *target, skipped);
            }
            Inst::Jump(target) => self.join(false, *target, lanes),
            Inst::ForStart {
                start,
                end,
                counter,
                limit,
            } => {
                let (_, first) = batch.eval(start, &lanes).words();
                let (_, last) = batch.eval(end, &lanes).words();
                batch.set_slot(*counter, &first, &lanes);
                batch.set_slot(*limit, &last, &lanes);
                batch.spares.give(first);
                batch.spares.give(last);
                self.join(false, pc + 1, lanes);
            }
            Inst::ForTest {
                var,
                elem,
                counter,
                limit,
                exit,
            } => {
                let locals = &mut batch.locals;
                let (inside, done) = self.split(&lanes, |l| {
                    let l = l as usize;
                    below(*elem, locals[*counter][l], locals[*limit][l])
                });
                for &l in &inside {
                    let l = l as usize;
                    locals[var.0 as usize][l] = locals[*counter][l];
                }
                self.recycle(lanes);
                self.join(false, pc + 1, inside);
                self.join(false, *exit, done);
            }
            Inst::ForNext {
                elem,
                counter,
                test,
            } => {
                for &l in &lanes {
                    let slot = &mut batch.locals[*counter][l as usize];
                    *slot = increment(*elem, *slot);
                }
                self.join(false, *test, lanes);
            }
            Inst::Barrier | Inst::Return | Inst::End => {
                unreachable!(
                    "the scheduler holds lanes at barriers and ends them at returns and the end"
                )
            }
        }
    }

    /// The lanes of `lanes` where `holds`, and those where it does not, each ascending, in
    /// lists of the scheduler's.
    fn split(&mut self, lanes: &[u32], holds: impl Fn(u32) -> bool) -> (Vec<u32>, Vec<u32>) {
        let (mut yes, mut no) = (self.list(), self.list());
        for &l in lanes {
            if holds(l) {
                yes.push(l);
            } else {
                no.push(l);
            }
        }
        (yes, no)
    }
}

/// Every live lane waits at a barrier or has finished: records the launch's first divergent
/// barrier, if a workgroup reached one (its lanes wait at different barriers, or some of them
/// finished). Of two workgroups, the lower one's is kept: the one a launch running its
/// workgroups one after another reports.
fn check_uniform(batch: &mut Batch, program: &Program, waiting: &Groups, finished: &[u32]) {
    if waiting.len() == 1 && finished.is_empty() {
        return;
    }
    let group_lanes = batch.group_lanes();
    let first = batch.first_invocation;
    let workgroups = batch.lane_count() / group_lanes as usize;
    // Per workgroup of the batch: each barrier its lanes wait at (statement, first lane), and
    // its first finished lane. A group's lanes ascend, so a workgroup's come together.
    let mut at: Vec<Vec<(u32, u64)>> = vec![Vec::new(); workgroups];
    for (pc, lanes) in &waiting.0 {
        for chunk in lanes.chunk_by(|a, b| a / group_lanes == b / group_lanes) {
            let lane = chunk[0];
            at[(lane / group_lanes) as usize].push((program.statements[*pc], first + lane as u64));
        }
    }
    let mut done: Vec<Option<u64>> = vec![None; workgroups];
    for &lane in finished {
        let slot = &mut done[(lane / group_lanes) as usize];
        *slot = Some(slot.map_or(first + lane as u64, |d| d.min(first + lane as u64)));
    }
    let divergent = (at.into_iter().zip(done))
        .find(|(waiting, done)| waiting.len() > 1 || (!waiting.is_empty() && done.is_some()));
    let Some((waiting, finished)) = divergent else {
        return;
    };
    let found = DivergentBarrier { waiting, finished };
    let outcome = &mut batch.outcome;
    let lower = |d: &DivergentBarrier| d.first_invocation() / group_lanes as u64;
    if outcome
        .divergent_barrier
        .as_ref()
        .is_none_or(|kept| lower(kept) > lower(&found))
    {
        outcome.divergent_barrier = Some(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_interleaves_two_ascending_lists() {
        let mut out = vec![99];
        merge(&[0, 3, 4, 9], &[1, 2, 5, 10, 11], &mut out);
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 9, 10, 11]);
        merge(&[], &[7], &mut out);
        assert_eq!(out, [7]);
    }
}
