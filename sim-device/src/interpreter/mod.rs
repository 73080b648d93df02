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
//!   atomics, `while`, `break`, `continue`, `return`) a batch of whole workgroups at a time
//!   too, each lane with a program counter over the flattened kernel (`program.rs`), so lanes
//!   wait at barriers.
//!
//! **Invariant:** both engines run each lane's statements in program order and apply the
//! stores and atomics of one instruction in lane order (local ids x fastest). The batched
//! engine runs every lane through each statement before the next, so its result equals
//! running the invocations one after another in launch order (workgroups x fastest, then local
//! ids) for every kernel in which no invocation reads a word another invocation of the launch
//! writes (on a GPU such a kernel races). The workgroup engine interleaves the lanes of a
//! workgroup as its seed draws, within what barriers allow: its result is an execution the
//! memory model allows (see `lockstep::kernel`), and for a race-free kernel every such
//! execution gives the same memory except for the values atomics return. The fault record takes the first violation (in program order) of the lowest
//! violating invocation, and an unchecked trap reports the same one.
//!
//! **The kernel sanitizer.** The workgroup engine interleaves a workgroup's invocations by a
//! seed drawn from the device's generator, and both engines check every access to a shared
//! array, and to the bindings a kernel writes, against the memory model (`races.rs`); what
//! they find (a race, a barrier in divergent control flow, a read of unwritten shared memory)
//! is described by `findings.rs` and reported by the device as a sanitizer report. One launch
//! is exempt from the check of its bindings, because it cannot race on them: a
//! one-dimensional launch whose kernel indexes every binding it writes by `global_id.x`
//! alone, where each word belongs to one invocation (the explorer's kernels).

mod builtins;
pub(crate) mod column;
mod findings;
mod lanes;
mod program;
mod races;
mod repeated;
mod walk;
mod workgroup;

use std::fmt;

use lockstep::kernel::{
    Access, Array, Axis, BindingId, Builtin, CompileOptions, Expr, FaultRecord, KernelDef, Scalar,
    Stmt,
};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use column::Spares;
pub(crate) use findings::describe;
use lanes::{Batch, Launch};
use program::{Numbers, Program};
use races::{AccessLog, Race};
use repeated::RepeatedLoads;

/// One array's words: a binding's, copied out of device memory for the launch, or a
/// workgroup's shared array.
#[derive(Debug)]
pub(crate) struct BindingData {
    pub words: Vec<u32>,
    /// Per word: whether it holds written data (loads of unwritten words are reported).
    pub initialized: Vec<bool>,
    /// Per word: whether this launch stored to it.
    pub dirty: Vec<bool>,
    /// The launch's accesses, when the race check watches this array.
    log: Option<AccessLog>,
}

impl BindingData {
    /// `words`, of which `initialized` say which hold written data.
    pub fn new(words: Vec<u32>, initialized: Vec<bool>) -> Self {
        let dirty = vec![false; words.len()];
        Self {
            words,
            initialized,
            dirty,
            log: None,
        }
    }

    /// `len` words that nothing wrote (a fresh shared array): zero, and reported when read.
    pub fn unwritten(len: usize) -> Self {
        Self::new(vec![0; len], vec![false; len])
    }

    /// Makes this array what [`unwritten`](Self::unwritten) makes (shared arrays for the next
    /// batch of workgroups), keeping its buffers; a race log starts over.
    fn forget(&mut self) {
        self.words.fill(0);
        self.initialized.fill(false);
        self.dirty.fill(false);
        if let Some(log) = &mut self.log {
            log.forget();
        }
    }

    /// The words, for stores.
    fn stores(&mut self) -> Stores<'_> {
        Stores {
            words: &mut self.words,
            initialized: &mut self.initialized,
            dirty: &mut self.dirty,
        }
    }
}

/// A [`BindingData`]'s words as slices, for a loop of stores (the compiler keeps a slice's
/// address and length in registers, not a vector's).
struct Stores<'a> {
    words: &'a mut [u32],
    initialized: &'a mut [bool],
    dirty: &'a mut [bool],
}

impl Stores<'_> {
    /// Stores `bits` at `index` (in range) for this launch.
    #[inline]
    fn store(&mut self, index: u32, bits: u32) {
        let i = index as usize;
        self.words[i] = bits;
        self.initialized[i] = true;
        self.dirty[i] = true;
    }

    /// [`store`](Self::store)s `bits[k]` at `range.start + k` (in range) for each `k`.
    fn store_range(&mut self, range: std::ops::Range<usize>, bits: &[u32]) {
        self.words[range.clone()].copy_from_slice(&bits[..range.len()]);
        self.initialized[range.clone()].fill(true);
        self.dirty[range].fill(true);
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
    /// Each barrier lanes wait at (its statement number) and the first such lane.
    pub waiting: Vec<(u32, u64)>,
    /// The first lane that finished instead, if any did.
    pub finished: Option<u64>,
}

impl DivergentBarrier {
    /// The lowest invocation it names: one of the workgroup that reached it.
    pub fn first_invocation(&self) -> u64 {
        let waiting = self.waiting.iter().map(|&(_, invocation)| invocation);
        waiting.chain(self.finished).min().unwrap_or(u64::MAX)
    }
}

/// A read of a shared array's word that no invocation of the workgroup had written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UnwrittenRead {
    pub array: Array,
    pub index: u32,
    pub invocation: u64,
    pub statement: u32,
}

/// What a launch observed besides its effects on memory.
#[derive(Debug, Default)]
pub(crate) struct LaunchOutcome {
    /// Bindings that had unwritten words loaded, at most once each.
    pub uninitialized_loads: Vec<BindingId>,
    /// The first read of unwritten shared memory, per shared array.
    pub unwritten_shared: Vec<UnwrittenRead>,
    /// The first race, per array.
    pub races: Vec<Race>,
    /// The launch's first barrier reached in divergent control flow.
    pub divergent_barrier: Option<DivergentBarrier>,
}

/// Most invocations an engine runs together (whole workgroups; a larger workgroup runs
/// alone).
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

/// How a launch guards its accesses: the interpreter's reading of [`CompileOptions`]. Its own
/// type so that the engines' tests can run a kernel unchecked without the `unsafe` that
/// `KernelChecks::unchecked` asks of programs: the interpreter traps every access out of range
/// either way ([`KernelTrap::OutOfBounds`]), so an unchecked launch here reaches nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Guards {
    /// Guard every access and record the first fault (checked mode); else trap on it.
    pub checked: bool,
    /// The kernel's number in fault records.
    pub kernel_id: u32,
}

impl From<CompileOptions> for Guards {
    fn from(options: CompileOptions) -> Self {
        Guards {
            checked: options.checks.is_checked(),
            kernel_id: options.kernel_id,
        }
    }
}

/// Runs `def` over `count` workgroups. `bindings` hold the declared bindings, then (checked
/// mode) the fault record. The workgroup engine draws its interleaving's seed from `rng`; the
/// batched engine draws nothing.
pub(crate) fn run(
    def: &KernelDef,
    guards: Guards,
    count: [u32; 3],
    bindings: &mut [BindingData],
    params: &[Scalar],
    rng: &mut impl RngCore,
) -> Result<LaunchOutcome, KernelTrap> {
    let engine = Engine::for_kernel(def);
    let seed = match engine {
        Engine::Batched => 0,
        Engine::Workgroup => rng.next_u64(),
    };
    run_on(engine, seed, def, guards, count, bindings, params)
}

/// [`run`] on `engine`, which must be able to run `def`, interleaving by `seed`.
fn run_on(
    engine: Engine,
    seed: u64,
    def: &KernelDef,
    guards: Guards,
    count: [u32; 3],
    bindings: &mut [BindingData],
    params: &[Scalar],
) -> Result<LaunchOutcome, KernelTrap> {
    let watch = !owns_its_words(def, count);
    if watch {
        let group_lanes = def.workgroup_invocations().max(1);
        for (data, decl) in bindings.iter_mut().zip(&def.bindings) {
            if decl.access == Access::ReadWrite {
                data.log = Some(AccessLog::new(data.words.len(), group_lanes));
            }
        }
    }
    let launch = Launch {
        def,
        guards,
        params,
        num_workgroups: count,
        numbers: (watch && engine == Engine::Batched).then(|| Numbers::new(def)),
        repeated: RepeatedLoads::new(def),
    };
    let group_lanes = def.workgroup_invocations().max(1) as usize;
    let groups_per_batch = (BATCH_LANES / group_lanes).max(1);
    if engine == Engine::Batched {
        drive(&launch, bindings, count, groups_per_batch, 0, |batch| {
            let lanes: Vec<u32> = (0..batch.lane_count() as u32).collect();
            batch.block(&def.body, &lanes);
            Ok(())
        })
    } else {
        let program = Program::new(def);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut scheduler = workgroup::Scheduler::default();
        let hidden = program.hidden;
        drive(
            &launch,
            bindings,
            count,
            groups_per_batch,
            hidden,
            |batch| workgroup::run(batch, &program, &mut scheduler, &mut rng),
        )
    }
}

/// Whether each word of every binding `def` writes belongs to one invocation of a launch over
/// `count`: the launch is one-dimensional and every access to such a binding is at
/// `global_id.x`, which no two of its invocations share. Such a launch cannot race on its
/// bindings, and the race check leaves them alone.
fn owns_its_words(def: &KernelDef, count: [u32; 3]) -> bool {
    let one_dimensional = def.workgroup_size[1..] == [1, 1] && count[1..] == [1, 1];
    one_dimensional && own_indices(def, &def.body)
}

/// Whether `array[index]` is an access `owns_its_words` allows.
fn own_access(def: &KernelDef, array: Array, index: &Expr) -> bool {
    let written = matches!(array, Array::Binding(b)
        if def.bindings[b.0 as usize].access == Access::ReadWrite);
    (!written || *index == Expr::Builtin(Builtin::GlobalId(Axis::X))) && own_expr(def, index)
}

fn own_indices(def: &KernelDef, body: &[Stmt]) -> bool {
    body.iter().all(|stmt| match stmt {
        Stmt::Assign { value, .. } => own_expr(def, value),
        Stmt::Store {
            array,
            index,
            value,
        }
        | Stmt::Atomic {
            array,
            index,
            value,
            ..
        } => own_access(def, *array, index) && own_expr(def, value),
        Stmt::CompareExchange {
            array,
            index,
            expected,
            value,
            ..
        } => own_access(def, *array, index) && own_expr(def, expected) && own_expr(def, value),
        Stmt::If {
            cond,
            then_body,
            else_body,
        } => own_expr(def, cond) && own_indices(def, then_body) && own_indices(def, else_body),
        Stmt::For {
            start, end, body, ..
        } => own_expr(def, start) && own_expr(def, end) && own_indices(def, body),
        Stmt::While { cond, body } => own_expr(def, cond) && own_indices(def, body),
        Stmt::Break | Stmt::Continue | Stmt::Barrier | Stmt::Return => true,
    })
}

/// Whether every load in `expr` is one `owns_its_words` allows.
fn own_expr(def: &KernelDef, expr: &Expr) -> bool {
    match expr {
        Expr::Load { array, index } => own_access(def, *array, index),
        Expr::Lit(_)
        | Expr::Bool(_)
        | Expr::Builtin(_)
        | Expr::Param(_)
        | Expr::Var(_)
        | Expr::Len(_) => true,
        Expr::Not(e)
        | Expr::Neg(e)
        | Expr::Unary { value: e, .. }
        | Expr::Cast { value: e, .. }
        | Expr::Bitcast { value: e, .. }
        | Expr::Bits { value: e, .. } => own_expr(def, e),
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => own_expr(def, lhs) && own_expr(def, rhs),
        Expr::Select {
            cond: a,
            if_true: b,
            if_false: c,
        }
        | Expr::Fma { a, b, c } => own_expr(def, a) && own_expr(def, b) && own_expr(def, c),
    }
}

/// Runs `batch` over the launch's `count` workgroups (x fastest), `groups_per_batch` at a time,
/// each batch with `hidden` slots beyond the kernel's locals; stops at the first batch that
/// traps. A batch's workgroup ids are made when it starts, in one buffer reused by the next, so
/// memory stays one batch's however many workgroups the launch has.
fn drive(
    launch: &Launch,
    bindings: &mut [BindingData],
    count: [u32; 3],
    groups_per_batch: usize,
    hidden: usize,
    mut batch: impl FnMut(&mut Batch) -> Result<(), KernelTrap>,
) -> Result<LaunchOutcome, KernelTrap> {
    let mut outcome = LaunchOutcome::default();
    let mut violation = None;
    let mut first_invocation = 0;
    let group_lanes = launch.def.workgroup_invocations() as usize;
    let total = count.iter().map(|&c| u64::from(c)).product::<u64>();
    let groups_max = usize::try_from(total).map_or(groups_per_batch, |t| t.min(groups_per_batch));
    let lanes_max = groups_max * group_lanes;
    let mut spares = Spares::new(lanes_max);
    let mut lanes = Batch::new(
        launch,
        bindings,
        &mut outcome,
        &mut violation,
        &mut spares,
        hidden,
        lanes_max,
    );
    let mut groups = Vec::with_capacity(groups_max);
    let mut next = 0;
    while next < total {
        builtins::batch_ids(&mut groups, count, next, groups_per_batch);
        next += groups.len() as u64;
        lanes.start(&groups, first_invocation);
        first_invocation += lanes.lane_count() as u64;
        batch(&mut lanes)?;
        if !launch.guards.checked
            && let Some(v) = lanes.violation()
        {
            return Err(KernelTrap::OutOfBounds {
                array: v.array,
                index: v.index,
            });
        }
    }
    drop(lanes);
    if let Some(v) = violation {
        record_fault(bindings, launch.guards.kernel_id, v);
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
