//! Executes kernel IR on the host, with the semantics of `lockstep::kernel::semantics` and the
//! checked-mode rules of `lockstep::kernel::FaultRecord`.
//!
//! Two engines share the evaluation of expressions and the statements without control flow
//! (`lanes.rs`: each expression is evaluated for every active lane before the next, so the IR
//! is walked once per group of lanes rather than once per invocation):
//! - the batched engine (`walk.rs`) runs kernels made of assignments, stores, `if` and `for`
//!   (the explorer's, where the simulator spends most of its time) a batch of whole
//!   workgroups at a time (up to [`BATCH_LANES`] lanes), walking the tree;
//! - the workgroup engine (`workgroup.rs`) runs every other kernel (shared arrays, barriers,
//!   atomics, `while`, `break`, `continue`) one workgroup at a time, each lane with a program
//!   counter over the flattened kernel (`program.rs`), so lanes wait at barriers.
//!
//! **Invariant:** both engines run each lane's statements in program order and apply the
//! stores and atomics of one instruction in lane order (local ids x fastest). The batched
//! engine's result therefore equals running the invocations one after another in launch order
//! (workgroups x fastest, then local ids), for every kernel in which no invocation reads a word
//! another invocation of the launch writes (on a GPU such a kernel races); the workgroup
//! engine's equals an execution the memory model allows (see `lockstep::kernel`), and for a
//! race-free kernel every such execution gives the same memory except for the values atomics
//! return. The fault record takes the first violation (in program order) of the lowest
//! violating invocation, and an unchecked trap reports the same one.

mod lanes;
mod program;
mod walk;
mod workgroup;

use std::fmt;

use lockstep::kernel::{Array, CompileOptions, FaultRecord, KernelDef, Scalar};

use lanes::{Batch, Launch};
use program::Program;

/// One array's words: a binding's, copied out of device memory for the launch, or a
/// workgroup's shared array.
#[derive(Debug)]
pub(crate) struct BindingData {
    pub words: Vec<u32>,
    /// Per word: whether it holds written data (loads of unwritten words are reported).
    pub initialized: Vec<bool>,
    /// Per word: whether this launch stored to it.
    pub dirty: Vec<bool>,
}

impl BindingData {
    /// `len` words that nothing wrote (a fresh shared array): zero, and reported when read.
    pub fn unwritten(len: usize) -> Self {
        Self {
            words: vec![0; len],
            initialized: vec![false; len],
            dirty: vec![false; len],
        }
    }
}

/// What went wrong while running a kernel.
#[derive(Debug, PartialEq)]
pub(crate) enum KernelTrap {
    /// Unchecked mode: an access outside its array, which real hardware reports as an illegal
    /// address.
    OutOfBounds { array: Array, index: u32 },
    /// A workgroup ran past the simulator's watchdog (an endless loop, most likely).
    Endless { dispatches: u64 },
}

impl fmt::Display for KernelTrap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelTrap::OutOfBounds { array, index } => {
                write!(f, "illegal address: {array} index {index} (unchecked mode)")
            }
            KernelTrap::Endless { dispatches } => write!(
                f,
                "a workgroup did not finish within {dispatches} instruction dispatches (an endless loop?)"
            ),
        }
    }
}

/// A barrier reached in divergent control flow: by some lanes of a workgroup while others
/// wait at another barrier or have finished. Invocations are launch indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DivergentBarrier {
    /// Each barrier lanes wait at (its ordinal in program order) and the first such lane.
    pub waiting: Vec<(usize, u64)>,
    /// The first lane that finished instead, if any did.
    pub finished: Option<u64>,
}

impl fmt::Display for DivergentBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let places: Vec<String> = self
            .waiting
            .iter()
            .map(|(barrier, invocation)| {
                format!("invocation {invocation} waits at barrier {barrier}")
            })
            .chain(
                self.finished
                    .map(|i| format!("invocation {i} has finished")),
            )
            .collect();
        f.write_str(&places.join(", "))
    }
}

/// What a launch observed besides its effects on memory.
#[derive(Debug, Default)]
pub(crate) struct LaunchOutcome {
    /// Arrays that had unwritten words loaded, at most once each.
    pub uninitialized_loads: Vec<Array>,
    /// The launch's first barrier reached in divergent control flow.
    pub divergent_barrier: Option<DivergentBarrier>,
}

/// Most invocations the batched engine runs together (whole workgroups; a larger workgroup
/// runs alone).
const BATCH_LANES: usize = 1024;

/// A bounds violation: the invocation (launch order), the array and the index.
#[derive(Clone, Copy)]
struct Violation {
    invocation: u64,
    array: Array,
    index: u32,
}

/// Which engine runs a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Batched,
    Workgroup,
}

impl Engine {
    /// The batched engine where it can run the kernel, else the workgroup engine.
    fn for_kernel(def: &KernelDef) -> Self {
        if def.shared.is_empty() && walk::runs(&def.body) {
            Engine::Batched
        } else {
            Engine::Workgroup
        }
    }
}

/// Runs `def` over `count` workgroups. `bindings` hold the declared bindings, then (checked
/// mode) the fault record.
pub(crate) fn run(
    def: &KernelDef,
    options: CompileOptions,
    count: [u32; 3],
    bindings: &mut [BindingData],
    params: &[Scalar],
) -> Result<LaunchOutcome, KernelTrap> {
    run_on(
        Engine::for_kernel(def),
        def,
        options,
        count,
        bindings,
        params,
    )
}

/// [`run`] on `engine`, which must be able to run `def`.
fn run_on(
    engine: Engine,
    def: &KernelDef,
    options: CompileOptions,
    count: [u32; 3],
    bindings: &mut [BindingData],
    params: &[Scalar],
) -> Result<LaunchOutcome, KernelTrap> {
    let launch = Launch {
        def,
        options,
        params,
        num_workgroups: count,
    };
    let workgroups: Vec<[u32; 3]> = (0..count[2])
        .flat_map(|z| (0..count[1]).flat_map(move |y| (0..count[0]).map(move |x| [x, y, z])))
        .collect();
    if engine == Engine::Batched {
        let group_lanes = def.workgroup_invocations().max(1) as usize;
        let groups_per_batch = (BATCH_LANES / group_lanes).max(1);
        drive(
            &launch,
            bindings,
            &workgroups,
            groups_per_batch,
            0,
            |batch| {
                let lanes: Vec<u32> = (0..batch.lane_count() as u32).collect();
                batch.block(&def.body, &lanes);
                Ok(())
            },
        )
    } else {
        let program = Program::new(def);
        drive(&launch, bindings, &workgroups, 1, program.hidden, |batch| {
            workgroup::run(batch, &program)
        })
    }
}

/// Runs `batch` over the launch's `workgroups`, `groups_per_batch` at a time, each batch with
/// `hidden` slots beyond the kernel's locals; stops at the first batch that traps.
fn drive(
    launch: &Launch,
    bindings: &mut [BindingData],
    workgroups: &[[u32; 3]],
    groups_per_batch: usize,
    hidden: usize,
    mut batch: impl FnMut(&mut Batch) -> Result<(), KernelTrap>,
) -> Result<LaunchOutcome, KernelTrap> {
    let mut outcome = LaunchOutcome::default();
    let mut violation = None;
    let mut first_invocation = 0;
    for groups in workgroups.chunks(groups_per_batch) {
        let mut lanes = Batch::new(
            launch,
            bindings,
            &mut outcome,
            &mut violation,
            groups,
            hidden,
        );
        lanes.first_invocation = first_invocation;
        first_invocation += lanes.lane_count() as u64;
        batch(&mut lanes)?;
        if !launch.options.checked
            && let Some(v) = violation
        {
            return Err(KernelTrap::OutOfBounds {
                array: v.array,
                index: v.index,
            });
        }
    }
    if let Some(v) = violation {
        record_fault(bindings, launch.options.kernel_id, v);
    }
    Ok(outcome)
}

/// Writes `v` to the fault record (the last binding) unless it already holds a fault.
fn record_fault(bindings: &mut [BindingData], kernel_id: u32, v: Violation) {
    let record = bindings
        .last_mut()
        .expect("checked launches carry the fault record as their last binding");
    if record.words[FaultRecord::FLAG] != 0 {
        return;
    }
    for (w, value) in [
        (FaultRecord::FLAG, 1),
        (FaultRecord::KERNEL, kernel_id),
        (FaultRecord::BINDING, FaultRecord::array_word(v.array)),
        (FaultRecord::INDEX, v.index),
    ] {
        record.words[w] = value;
        record.dirty[w] = true;
        record.initialized[w] = true;
    }
}

#[cfg(test)]
mod tests;
