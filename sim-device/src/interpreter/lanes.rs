//! A batch of lanes (invocations) and what both engines do to them: evaluate an expression over
//! every active lane, one node at a time, and apply the statements without control flow.

mod access;
mod eval;

use lockstep::kernel::{Array, AtomicOp, ElemType, KernelDef, Scalar, Stmt, VarId, semantics};

use super::builtins::Builtins;
use super::column::{self, Spares};
use super::program::Numbers;
use super::races::{AccessKind, AccessLog};
use super::repeated::RepeatedLoads;
use super::{BindingData, Guards, LaunchOutcome, Violation};

/// What stays the same for every batch of a launch.
pub(super) struct Launch<'a> {
    pub def: &'a KernelDef,
    pub guards: Guards,
    pub params: &'a [Scalar],
    pub num_workgroups: [u32; 3],
    /// The kernel's statement numbers, when the race check watches global memory (the
    /// workgroup engine numbers its instructions itself).
    pub numbers: Option<Numbers>,
    /// The loads that repeat in their statement, evaluated once per execution of it.
    pub repeated: RepeatedLoads,
}

/// A batch of lanes in flight: whole workgroups, with their shared arrays when the kernel has
/// any.
pub(super) struct Batch<'a, 'l> {
    pub launch: &'l Launch<'a>,
    bindings: &'l mut [BindingData],
    /// Per shared array of the kernel (none for kernels without any), a copy for each
    /// workgroup the batch can hold, one after another: word `i` of workgroup `w` of the
    /// batch is at `w * len + i`. Always watched by the race check, so every access to them
    /// takes the per-lane paths, which place each lane's words.
    shared: Vec<BindingData>,
    /// Per local array of the kernel, a copy for each lane the batch can hold: word `i` of lane
    /// `l` is at `l * len + i`. Zero at the start of every batch, written by nothing else, and
    /// never watched (no other invocation reaches them); accesses take the per-lane paths.
    local_arrays: Vec<BindingData>,
    /// Invocations per workgroup (at least 1).
    group_lanes: u32,
    pub outcome: &'l mut LaunchOutcome,
    /// The first violation of the launch so far: checked faults, or unchecked traps.
    violation: &'l mut Option<Violation>,
    /// Launch index of lane 0.
    pub first_invocation: u64,
    builtins: Builtins,
    /// Per local variable (then per hidden slot of the workgroup engine), its value's bits on
    /// every lane.
    pub locals: Vec<Vec<u32>>,
    /// Buffers for the columns expressions evaluate to, the launch's: whoever is done with a
    /// column gives its buffer back here.
    pub spares: &'l mut Spares,
    /// Lanes that trapped (unchecked mode): they run no further statement.
    pub trapped: Vec<bool>,
    pub any_trapped: bool,
    /// Barriers each workgroup of the batch that still has a lane running has passed (the
    /// workgroup engine's, see `workgroup.rs`; the batched engine runs no barrier).
    pub epoch: u32,
    /// The number of the statement running now, for the race check's reports.
    pub statement: u32,
    /// Statements without control flow run so far: the number of the one running now.
    effects: u64,
    /// Per slot of [`Launch::repeated`], the value its loads had in the statement that last
    /// evaluated one: that statement's number in `effects`, the type and the column (on that
    /// statement's lanes). Stale once another statement runs.
    repeated: Vec<Option<(u64, ElemType, Vec<u32>)>>,
}

impl<'a, 'l> Batch<'a, 'l> {
    /// A batch of up to `lanes_max` lanes, with `hidden` slots beyond the kernel's locals;
    /// [`start`](Self::start) gives it its workgroups.
    pub fn new(
        launch: &'l Launch<'a>,
        bindings: &'l mut [BindingData],
        outcome: &'l mut LaunchOutcome,
        violation: &'l mut Option<Violation>,
        spares: &'l mut Spares,
        hidden: usize,
        lanes_max: usize,
    ) -> Self {
        let def = launch.def;
        let builtins = Builtins::new(def.workgroup_size, launch.num_workgroups);
        // Validated workgroups hold at most 1024 invocations.
        let group_lanes = def.workgroup_invocations().max(1) as u32;
        let groups_max = lanes_max.div_ceil(group_lanes as usize);
        // Each workgroup's shared arrays, watched by the race check (no two workgroups share a
        // word, so one log per array serves them all).
        let shared = def
            .shared
            .iter()
            .map(|s| {
                let words = s.len as usize * groups_max;
                let mut data = BindingData::unwritten(words);
                data.log = Some(AccessLog::new(words, group_lanes as u64));
                data
            })
            .collect();
        // Zero is written data: a local array starts at zero, as a local variable does.
        let local_arrays = def
            .local_arrays
            .iter()
            .map(|l| {
                let words = l.len as usize * lanes_max;
                BindingData::new(vec![0; words], vec![true; words])
            })
            .collect();
        Batch {
            launch,
            bindings,
            shared,
            local_arrays,
            group_lanes,
            outcome,
            violation,
            first_invocation: 0,
            locals: vec![vec![0; lanes_max]; def.locals.len() + hidden],
            spares,
            trapped: vec![false; lanes_max],
            any_trapped: false,
            epoch: 0,
            statement: 0,
            builtins,
            effects: 0,
            repeated: (0..launch.repeated.slots()).map(|_| None).collect(),
        }
    }

    /// Makes this the batch of `groups` (whole workgroups, no more lanes than the batch was
    /// made for), whose lane 0 is invocation `first_invocation`: locals and local arrays zero,
    /// fresh shared arrays, no lane trapped. The buffers of the previous batch are reused.
    pub fn start(&mut self, groups: &[[u32; 3]], first_invocation: u64) {
        self.builtins.start(groups);
        let lanes = self.lane_count();
        assert!(
            lanes <= self.trapped.len(),
            "a batch of {lanes} lanes in one made for {}",
            self.trapped.len()
        );
        for shared in &mut self.shared {
            shared.forget();
        }
        for local in &mut self.local_arrays {
            let words = local.words.len() / self.trapped.len() * lanes;
            local.words[..words].fill(0);
        }
        // Zero of every type is all-zero bits.
        for local in &mut self.locals {
            local[..lanes].fill(0);
        }
        self.trapped[..lanes].fill(false);
        self.any_trapped = false;
        self.first_invocation = first_invocation;
        self.epoch = 0;
        self.statement = 0;
    }

    /// The launch's first violation so far.
    pub fn violation(&self) -> Option<Violation> {
        *self.violation
    }

    pub fn lane_count(&self) -> usize {
        self.builtins.lane_count()
    }

    /// Invocations per workgroup: lane `l` belongs to the batch's workgroup `l / group_lanes`.
    pub fn group_lanes(&self) -> u32 {
        self.group_lanes
    }

    /// The lanes of `lanes` that have not trapped.
    pub fn live(&self, lanes: &[u32]) -> Vec<u32> {
        lanes
            .iter()
            .copied()
            .filter(|&l| !self.trapped[l as usize])
            .collect()
    }

    /// Applies a statement without control flow (assignment, store, atomic) on `lanes`.
    ///
    /// # Panics
    /// On a control-flow statement: each engine runs those itself.
    pub fn effect(&mut self, stmt: &Stmt, lanes: &[u32]) {
        self.effects += 1;
        match stmt {
            Stmt::Assign { var, value } => {
                let (_, v) = self.eval(value, lanes).words();
                self.set_local(*var, &v, lanes);
                self.spares.give(v);
            }
            Stmt::Store {
                array,
                index,
                value,
            } => {
                let at = self.eval(index, lanes).indices();
                let (_, value) = self.eval(value, lanes).words();
                self.scatter(*array, &at, &value, lanes);
                self.spares.give(at);
                self.spares.give(value);
            }
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                old,
            } => {
                let at = self.eval(index, lanes).indices();
                let (elem, operand) = self.eval(value, lanes).words();
                // An exchange whose old value is dropped is an atomic store: it reads nothing.
                let reads = old.is_some() || *op != AtomicOp::Exchange;
                self.read_modify_write(*array, &at, (*old, reads), lanes, |l, prev| {
                    let new = semantics::atomic(
                        *op,
                        Scalar::from_bits(elem, prev),
                        Scalar::from_bits(elem, operand[l]),
                    );
                    Some(new.to_bits())
                });
                self.spares.give(at);
                self.spares.give(operand);
            }
            Stmt::CompareExchange {
                array,
                index,
                expected,
                value,
                old,
            } => {
                let at = self.eval(index, lanes).indices();
                let (_, expected) = self.eval(expected, lanes).words();
                let (_, value) = self.eval(value, lanes).words();
                self.read_modify_write(*array, &at, (Some(*old), true), lanes, |l, prev| {
                    (prev == expected[l]).then_some(value[l])
                });
                self.spares.give(at);
                self.spares.give(expected);
                self.spares.give(value);
            }
            Stmt::If { .. }
            | Stmt::For { .. }
            | Stmt::While { .. }
            | Stmt::Break
            | Stmt::Continue
            | Stmt::Barrier
            | Stmt::Return => panic!("{stmt:?} is control flow, which each engine runs itself"),
        }
    }

    /// An atomic on every lane, in lane order: `new(lane, previous)` is the word's new value
    /// (`None` leaves it), and the previous value goes to `old` (zero when out of range).
    /// `reads` says whether the atomic reads the word (all but a plain store do): a read of an
    /// unwritten word is reported, and a non-reading atomic's `new` is given zero.
    fn read_modify_write(
        &mut self,
        array: Array,
        at: &[u32],
        (old, reads): (Option<VarId>, bool),
        lanes: &[u32],
        new: impl Fn(usize, u32) -> Option<u32>,
    ) {
        let mut previous = self.spares.take();
        column::fill(&mut previous, 0, lanes);
        let len = self.len(array);
        for &l in lanes {
            let i = at[l as usize];
            if self.in_bounds(l, array, i, len) {
                self.watch(l, array, i, AccessKind::Atomic);
                let prev = if reads {
                    self.peek_word(l, array, i)
                } else {
                    0
                };
                if let Some(word) = new(l as usize, prev) {
                    self.store_word(l, array, i, word);
                }
                previous[l as usize] = prev;
            }
        }
        if let Some(old) = old {
            self.set_local(old, &previous, lanes);
        }
        self.spares.give(previous);
    }

    pub fn set_local(&mut self, var: VarId, bits: &[u32], lanes: &[u32]) {
        self.set_slot(var.0 as usize, bits, lanes);
    }

    /// Sets local (or hidden) slot `slot` on `lanes` from a column.
    pub fn set_slot(&mut self, slot: usize, bits: &[u32], lanes: &[u32]) {
        column::copy(&mut self.locals[slot], bits, lanes);
    }
}
