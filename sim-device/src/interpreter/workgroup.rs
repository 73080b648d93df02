//! The workgroup engine, for kernels with shared arrays, barriers, atomics or `while` loops:
//! one workgroup at a time, each lane with its own program counter over the flattened
//! [`Program`]. Lanes at one program counter form a group; a step runs one instruction for a
//! group drawn by the launch's seeded generator, and half of the time for only a random
//! part of it, so a workgroup's invocations interleave instruction by instruction and
//! results that depend on their order differ between seeds (the race check reports the
//! accesses behind them whatever the order). Lanes that reach the same program counter join
//! its group again. A barrier holds its lanes until no lane can run: every live lane of the
//! workgroup then waits at a barrier or has finished. If they wait at one barrier and none has
//! finished, they pass it together and the workgroup's epoch advances; otherwise the barrier
//! was reached in divergent control flow, which is reported, and the lanes pass the barriers
//! they wait at.

use std::collections::BTreeMap;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::lanes::Batch;
use super::program::{Inst, Program};
use super::walk::{below, increment, split};
use super::{DivergentBarrier, KernelTrap};

/// Instructions a workgroup may dispatch (each over a group of lanes) before the simulator
/// declares it endless, as a GPU's watchdog would: far more than any kernel the simulator
/// can run in reasonable time needs.
pub(super) const MAX_DISPATCHES: u64 = 1 << 22;

/// Lanes by the program counter they wait at; each group ascending.
type Groups = BTreeMap<usize, Vec<u32>>;

/// Runs every lane of `batch` (one workgroup) through `program`, interleaved by `rng`.
pub(super) fn run(
    batch: &mut Batch,
    program: &Program,
    rng: &mut ChaCha8Rng,
) -> Result<(), KernelTrap> {
    let lanes = batch.lane_count() as u32;
    let mut running: Groups = BTreeMap::from([(0, (0..lanes).collect())]);
    let mut waiting = Groups::new();
    let mut finished: Vec<u32> = Vec::new();
    let mut dispatches = 0u64;
    loop {
        if running.is_empty() {
            if waiting.is_empty() {
                return Ok(());
            }
            check_uniform(batch, program, &waiting, &finished);
            for (pc, group) in std::mem::take(&mut waiting) {
                join(&mut running, pc + 1, group);
            }
            batch.epoch += 1;
            continue;
        }
        let (pc, group) = pick(&mut running, rng);
        dispatches += 1;
        if dispatches > MAX_DISPATCHES {
            return Err(KernelTrap::Endless {
                dispatches: MAX_DISPATCHES,
            });
        }
        let group = if batch.any_trapped {
            batch.live(&group)
        } else {
            group
        };
        batch.statement = program.statements[pc];
        match &program.insts[pc] {
            Inst::Barrier => join(&mut waiting, pc, group),
            Inst::End => finished.extend(group),
            inst => {
                for (next, lanes) in step(batch, inst, pc, group) {
                    join(&mut running, next, lanes);
                }
            }
        }
    }
}

/// Takes the lanes to run next out of `running` (not empty): a random group, and half of
/// the time a random part of it (the rest stays).
fn pick(running: &mut Groups, rng: &mut ChaCha8Rng) -> (usize, Vec<u32>) {
    let k = rng.random_range(0..running.len());
    let pc = *running
        .keys()
        .nth(k)
        .expect("k is below the number of groups");
    let group = running.remove(&pc).expect("pc is a key of running");
    if group.len() < 2 || !rng.random_ratio(1, 2) {
        return (pc, group);
    }
    let (now, later): (Vec<u32>, Vec<u32>) = group.into_iter().partition(|_| rng.random());
    if now.is_empty() {
        return (pc, later);
    }
    if !later.is_empty() {
        running.insert(pc, later);
    }
    (pc, now)
}

/// Adds `lanes` to the group waiting at `pc`, keeping it ascending.
fn join(groups: &mut Groups, pc: usize, lanes: Vec<u32>) {
    if lanes.is_empty() {
        return;
    }
    match groups.get_mut(&pc) {
        None => {
            groups.insert(pc, lanes);
        }
        Some(group) => {
            group.extend(lanes);
            group.sort_unstable();
        }
    }
}

/// Runs `inst` (at `pc`) for `lanes`; returns where each lane goes next.
fn step(batch: &mut Batch, inst: &Inst, pc: usize, lanes: Vec<u32>) -> Vec<(usize, Vec<u32>)> {
    match inst {
        Inst::Effect(stmt) => {
            batch.effect(stmt, &lanes);
            vec![(pc + 1, lanes)]
        }
        Inst::BranchUnless { cond, target } => {
            let cond = batch.eval(cond, &lanes).bools();
            let (taken, skipped) = split(&lanes, &cond);
            batch.spares.give(cond);
            vec![(pc + 1, taken), (*target, skipped)]
        }
        Inst::Jump(target) => vec![(*target, lanes)],
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
            vec![(pc + 1, lanes)]
        }
        Inst::ForTest {
            var,
            elem,
            counter,
            limit,
            exit,
        } => {
            let (inside, done): (Vec<u32>, Vec<u32>) = lanes.into_iter().partition(|&l| {
                let l = l as usize;
                below(*elem, batch.locals[*counter][l], batch.locals[*limit][l])
            });
            for &l in &inside {
                let l = l as usize;
                batch.locals[var.0 as usize][l] = batch.locals[*counter][l];
            }
            vec![(pc + 1, inside), (*exit, done)]
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
            vec![(*test, lanes)]
        }
        Inst::Barrier | Inst::End => {
            unreachable!("the scheduler holds lanes at barriers and at the end")
        }
    }
}

/// Every live lane waits at a barrier or has finished: records the workgroup's first
/// divergent barrier, if this is one (lanes at different barriers, or some already finished).
fn check_uniform(batch: &mut Batch, program: &Program, waiting: &Groups, finished: &[u32]) {
    if waiting.len() == 1 && finished.is_empty() {
        return;
    }
    if batch.outcome.divergent_barrier.is_some() {
        return;
    }
    let first = batch.first_invocation;
    let waiting: Vec<(u32, u64)> = waiting
        .iter()
        .map(|(&pc, lanes)| (program.statements[pc], first + lanes[0] as u64))
        .collect();
    batch.outcome.divergent_barrier = Some(DivergentBarrier {
        waiting,
        finished: finished.iter().min().map(|&l| first + l as u64),
    });
}
