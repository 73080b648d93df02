//! Executes kernel IR on the host, with the semantics of `lockstep::kernel::semantics` and the
//! checked-mode rules of `lockstep::kernel::FaultRecord`.
//!
//! Invocations run in batches of whole workgroups (up to [`BATCH_LANES`] invocations, "lanes"),
//! one statement at a time across the batch: each expression is evaluated for every active lane
//! before the next, so the IR tree is walked once per batch rather than once per invocation
//! (the explorer spends most of its time here). `if` splits the lanes, `for` keeps each lane's
//! own trip count, `&&`/`||` evaluate their right side only on the lanes that need it.
//!
//! **Invariant:** the result equals running the invocations one after another in launch order
//! (workgroups x fastest, then each workgroup's local ids x fastest), for every kernel in which
//! no invocation reads a word another invocation of the launch writes (on a GPU such a kernel
//! races): each lane runs its statements in program order; the stores and atomics of one
//! statement apply in lane order; the fault record takes the first violation (in program
//! order) of the lowest violating invocation, and an unchecked trap reports the same one. Only
//! the rounding of several `f32` atomic adds to one word may differ (their order is
//! unspecified on a GPU too).

use lockstep::kernel::{
    BinOp, BindingId, Builtin, CmpOp, CompileOptions, ElemType, Expr, FaultRecord, KernelDef,
    LogicOp, Scalar, Stmt, VarId, semantics,
};

/// One binding's words, copied out of device memory for the launch.
#[derive(Debug)]
pub(crate) struct BindingData {
    pub words: Vec<u32>,
    /// Per word: whether it holds written data (loads of unwritten words are reported).
    pub initialized: Vec<bool>,
    /// Per word: whether this launch stored to it.
    pub dirty: Vec<bool>,
}

/// What went wrong while running a kernel.
#[derive(Debug, PartialEq)]
pub(crate) enum KernelTrap {
    /// Unchecked mode: an access outside its binding, which real hardware reports as an illegal
    /// address.
    OutOfBounds { binding: u32, index: u32 },
}

/// What a launch observed besides its effects on memory.
#[derive(Debug, Default)]
pub(crate) struct LaunchOutcome {
    /// Bindings that had unwritten words loaded, at most once each.
    pub uninitialized_loads: Vec<u32>,
}

/// Most invocations run together (whole workgroups; a larger workgroup runs alone).
const BATCH_LANES: usize = 1024;

/// One expression's value on every lane of a batch (inactive lanes hold leftovers): scalars as
/// the bits of their type (the IR is typed, so a column has one), or booleans.
enum Column {
    Words(ElemType, Vec<u32>),
    Bools(Vec<bool>),
}

impl Column {
    fn words(self) -> (ElemType, Vec<u32>) {
        match self {
            Column::Words(elem, bits) => (elem, bits),
            Column::Bools(_) => panic!("validated kernels use booleans only as conditions"),
        }
    }

    fn bools(self) -> Vec<bool> {
        match self {
            Column::Bools(v) => v,
            Column::Words(..) => panic!("validated kernels use only booleans as conditions"),
        }
    }

    /// A column of indices: `u32`.
    fn indices(self) -> Vec<u32> {
        let (elem, bits) = self.words();
        assert_eq!(elem, ElemType::U32, "validated kernels index with u32");
        bits
    }
}

/// `f` over every lane's scalars, the type matched once for the column: `lift` is a
/// constructor of one type, so once `f` is inlined the per-lane work is the operation itself.
fn typed<T>(
    elem: ElemType,
    lanes: &[u32],
    fill: T,
    f: impl Fn(&dyn Fn(u32) -> Scalar, usize) -> T,
) -> Vec<T>
where
    T: Clone,
{
    match elem {
        ElemType::U32 => Batch::map(lanes, fill, |l| f(&Scalar::U32, l)),
        ElemType::I32 => Batch::map(lanes, fill, |l| f(&|b| Scalar::I32(b as i32), l)),
        ElemType::F32 => Batch::map(lanes, fill, |l| f(&|b| Scalar::F32(f32::from_bits(b)), l)),
    }
}

/// A bounds violation: the invocation (launch order), the binding and the index.
#[derive(Clone, Copy)]
struct Violation {
    invocation: u64,
    binding: u32,
    index: u32,
}

/// What stays the same for every batch of a launch.
struct Launch<'a> {
    def: &'a KernelDef,
    options: CompileOptions,
    params: &'a [Scalar],
    num_workgroups: [u32; 3],
}

/// A batch of lanes in flight.
struct Batch<'a, 'l> {
    launch: &'l Launch<'a>,
    bindings: &'l mut [BindingData],
    outcome: &'l mut LaunchOutcome,
    /// The first violation of the launch so far: checked faults, or unchecked traps.
    violation: &'l mut Option<Violation>,
    /// Launch index of lane 0.
    first_invocation: u64,
    local_id: Vec<[u32; 3]>,
    workgroup_id: Vec<[u32; 3]>,
    /// Per local variable, its value's bits on every lane.
    locals: Vec<Vec<u32>>,
    /// Lanes that trapped (unchecked mode): they run no further statement.
    trapped: Vec<bool>,
    any_trapped: bool,
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
    let launch = Launch {
        def,
        options,
        params,
        num_workgroups: count,
    };
    let mut outcome = LaunchOutcome::default();
    let mut violation = None;
    let group_lanes = def.workgroup_invocations().max(1) as usize;
    let groups_per_batch = (BATCH_LANES / group_lanes).max(1);
    let workgroups: Vec<[u32; 3]> = (0..count[2])
        .flat_map(|z| (0..count[1]).flat_map(move |y| (0..count[0]).map(move |x| [x, y, z])))
        .collect();
    let mut first_invocation = 0;
    for groups in workgroups.chunks(groups_per_batch) {
        let mut batch = Batch::new(&launch, bindings, &mut outcome, &mut violation, groups);
        batch.first_invocation = first_invocation;
        let lanes: Vec<u32> = (0..batch.local_id.len() as u32).collect();
        batch.block(&def.body, &lanes);
        first_invocation += lanes.len() as u64;
        if !options.checked
            && let Some(v) = violation
        {
            return Err(KernelTrap::OutOfBounds {
                binding: v.binding,
                index: v.index,
            });
        }
    }
    if let Some(v) = violation {
        record_fault(bindings, options.kernel_id, v);
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
        (FaultRecord::BINDING, v.binding),
        (FaultRecord::INDEX, v.index),
    ] {
        record.words[w] = value;
        record.dirty[w] = true;
        record.initialized[w] = true;
    }
}

impl<'a, 'l> Batch<'a, 'l> {
    fn new(
        launch: &'l Launch<'a>,
        bindings: &'l mut [BindingData],
        outcome: &'l mut LaunchOutcome,
        violation: &'l mut Option<Violation>,
        groups: &[[u32; 3]],
    ) -> Self {
        let [wx, wy, wz] = launch.def.workgroup_size;
        let (mut local_id, mut workgroup_id) = (Vec::new(), Vec::new());
        for &group in groups {
            for lz in 0..wz {
                for ly in 0..wy {
                    for lx in 0..wx {
                        local_id.push([lx, ly, lz]);
                        workgroup_id.push(group);
                    }
                }
            }
        }
        let lanes = local_id.len();
        Batch {
            launch,
            bindings,
            outcome,
            violation,
            first_invocation: 0,
            // Zero of every type is all-zero bits.
            locals: vec![vec![0; lanes]; launch.def.locals.len()],
            trapped: vec![false; lanes],
            any_trapped: false,
            local_id,
            workgroup_id,
        }
    }

    fn block(&mut self, body: &[Stmt], lanes: &[u32]) {
        for stmt in body {
            if self.any_trapped {
                let live: Vec<u32> = lanes
                    .iter()
                    .copied()
                    .filter(|&l| !self.trapped[l as usize])
                    .collect();
                self.stmt(stmt, &live);
            } else {
                self.stmt(stmt, lanes);
            }
        }
    }

    fn stmt(&mut self, stmt: &Stmt, lanes: &[u32]) {
        if lanes.is_empty() {
            return;
        }
        match stmt {
            Stmt::Assign { var, value } => {
                let (_, v) = self.eval(value, lanes).words();
                let local = &mut self.locals[var.0 as usize];
                for &l in lanes {
                    local[l as usize] = v[l as usize];
                }
            }
            Stmt::Store {
                binding,
                index: at,
                value,
            } => {
                let at = self.eval(at, lanes).indices();
                let (_, value) = self.eval(value, lanes).words();
                for &l in lanes {
                    let i = at[l as usize];
                    if self.in_bounds(l, *binding, i) {
                        self.store_word(*binding, i, value[l as usize]);
                    }
                }
            }
            Stmt::AtomicAdd {
                binding,
                index: at,
                value,
            } => {
                let at = self.eval(at, lanes).indices();
                let (elem, value) = self.eval(value, lanes).words();
                for &l in lanes {
                    let i = at[l as usize];
                    if self.in_bounds(l, *binding, i) {
                        let old = Scalar::from_bits(elem, self.load_word(*binding, i));
                        let add = Scalar::from_bits(elem, value[l as usize]);
                        let sum = semantics::binary(BinOp::Add, old, add);
                        self.store_word(*binding, i, sum.to_bits());
                    }
                }
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.eval(cond, lanes).bools();
                let (then_lanes, else_lanes): (Vec<u32>, Vec<u32>) =
                    lanes.iter().partition(|&&l| cond[l as usize]);
                self.block(then_body, &then_lanes);
                self.block(else_body, &else_lanes);
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(*var, start, end, body, lanes),
        }
    }

    /// Each lane loops from its `start` to its `end`; the counter is the lane's own, so the
    /// body's assignments to `var` do not change the trip count.
    fn for_loop(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt], lanes: &[u32]) {
        let (elem, mut counter) = self.eval(start, lanes).words();
        let (_, end) = self.eval(end, lanes).words();
        let scalar = |bits: u32| Scalar::from_bits(elem, bits);
        let below = |counter: &[u32], l: u32| {
            semantics::compare(
                CmpOp::Lt,
                scalar(counter[l as usize]),
                scalar(end[l as usize]),
            )
        };
        let one = match elem {
            ElemType::I32 => Scalar::I32(1),
            _ => Scalar::U32(1),
        };
        let mut active: Vec<u32> = lanes
            .iter()
            .copied()
            .filter(|&l| below(&counter, l))
            .collect();
        while !active.is_empty() {
            for &l in &active {
                self.locals[var.0 as usize][l as usize] = counter[l as usize];
            }
            self.block(body, &active);
            for &l in &active {
                let i = scalar(counter[l as usize]);
                counter[l as usize] = semantics::binary(BinOp::Add, i, one).to_bits();
            }
            active.retain(|&l| !self.trapped[l as usize] && below(&counter, l));
        }
    }

    /// `f` applied to each active lane's operands. Lanes are ascending; when they are all the
    /// lanes up to the last (the common case: no branch has split them), a plain loop serves.
    fn map<T: Clone>(lanes: &[u32], fill: T, mut f: impl FnMut(usize) -> T) -> Vec<T> {
        let len = lanes.last().map_or(0, |&l| l as usize + 1);
        if lanes.len() == len {
            return (0..len).map(f).collect();
        }
        let mut out = vec![fill; len];
        for &l in lanes {
            out[l as usize] = f(l as usize);
        }
        out
    }

    fn eval(&mut self, expr: &Expr, lanes: &[u32]) -> Column {
        match expr {
            Expr::Lit(s) => self.constant(s.elem_type(), s.to_bits(), lanes),
            Expr::Bool(b) => Column::Bools(Self::map(lanes, false, |_| *b)),
            Expr::Builtin(b) => {
                Column::Words(ElemType::U32, Self::map(lanes, 0, |l| self.builtin(*b, l)))
            }
            Expr::Param(p) => {
                let v = self.launch.params[*p as usize];
                self.constant(v.elem_type(), v.to_bits(), lanes)
            }
            Expr::Var(v) => {
                let local = &self.locals[v.0 as usize];
                let elem = self.launch.def.locals[v.0 as usize];
                Column::Words(elem, Self::map(lanes, 0, |l| local[l]))
            }
            Expr::Len(b) => self.constant(ElemType::U32, self.len(*b), lanes),
            Expr::Load { binding, index } => {
                let at = self.eval(index, lanes).indices();
                let elem = self.launch.def.bindings[binding.0 as usize].elem;
                // Out of range yields zero, whose bits are zero in every type.
                let bits = Self::map(lanes, 0, |l| {
                    let i = at[l];
                    if self.in_bounds(l as u32, *binding, i) {
                        self.load_word(*binding, i)
                    } else {
                        0
                    }
                });
                Column::Words(elem, bits)
            }
            Expr::Binary { op, lhs, rhs } => {
                let (elem, l) = self.eval(lhs, lanes).words();
                let (_, r) = self.eval(rhs, lanes).words();
                let bits = typed(elem, lanes, 0, |lift, i| {
                    semantics::binary(*op, lift(l[i]), lift(r[i])).to_bits()
                });
                Column::Words(elem, bits)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let (elem, l) = self.eval(lhs, lanes).words();
                let (_, r) = self.eval(rhs, lanes).words();
                Column::Bools(typed(elem, lanes, false, |lift, i| {
                    semantics::compare(*op, lift(l[i]), lift(r[i]))
                }))
            }
            Expr::Logic { op, lhs, rhs } => self.logic(*op, lhs, rhs, lanes),
            Expr::Not(e) => {
                let v = self.eval(e, lanes).bools();
                Column::Bools(Self::map(lanes, false, |l| !v[l]))
            }
            Expr::Neg(e) => {
                let (elem, v) = self.eval(e, lanes).words();
                let bits = typed(elem, lanes, 0, |lift, l| {
                    semantics::negate(lift(v[l])).to_bits()
                });
                Column::Words(elem, bits)
            }
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => self.select(cond, if_true, if_false, lanes),
            Expr::Cast { to, value } => {
                let (elem, v) = self.eval(value, lanes).words();
                let bits = typed(elem, lanes, 0, |lift, l| {
                    semantics::cast(lift(v[l]), *to).to_bits()
                });
                Column::Words(*to, bits)
            }
        }
    }

    /// The same value on every lane.
    fn constant(&self, elem: ElemType, bits: u32, lanes: &[u32]) -> Column {
        Column::Words(elem, Self::map(lanes, 0, |_| bits))
    }

    /// Short-circuits, as WGSL's `&&`/`||` and C's do: the right side runs only on the lanes
    /// whose left side does not decide, so a guarded load never runs.
    fn logic(&mut self, op: LogicOp, lhs: &Expr, rhs: &Expr, lanes: &[u32]) -> Column {
        let mut out = self.eval(lhs, lanes).bools();
        let undecided: Vec<u32> = lanes
            .iter()
            .copied()
            .filter(|&l| out[l as usize] == matches!(op, LogicOp::And))
            .collect();
        if !undecided.is_empty() {
            let right = self.eval(rhs, &undecided).bools();
            for &l in &undecided {
                out[l as usize] = right[l as usize];
            }
        }
        Column::Bools(out)
    }

    /// Both sides are evaluated on every lane (their loads included), then one is picked.
    fn select(&mut self, cond: &Expr, t: &Expr, f: &Expr, lanes: &[u32]) -> Column {
        let c = self.eval(cond, lanes).bools();
        match (self.eval(t, lanes), self.eval(f, lanes)) {
            (Column::Words(elem, t), Column::Words(_, f)) => Column::Words(
                elem,
                Self::map(lanes, 0, |l| if c[l] { t[l] } else { f[l] }),
            ),
            (Column::Bools(t), Column::Bools(f)) => {
                Column::Bools(Self::map(lanes, false, |l| if c[l] { t[l] } else { f[l] }))
            }
            _ => panic!("validated kernels select between values of one type"),
        }
    }

    fn builtin(&self, b: Builtin, lane: usize) -> u32 {
        let (local, group) = (self.local_id[lane], self.workgroup_id[lane]);
        match b {
            Builtin::GlobalId(a) => {
                let i = a.index();
                group[i]
                    .wrapping_mul(self.launch.def.workgroup_size[i])
                    .wrapping_add(local[i])
            }
            Builtin::LocalId(a) => local[a.index()],
            Builtin::WorkgroupId(a) => group[a.index()],
            Builtin::NumWorkgroups(a) => self.launch.num_workgroups[a.index()],
        }
    }

    fn len(&self, binding: BindingId) -> u32 {
        self.bindings[binding.0 as usize].words.len() as u32
    }

    /// Whether `index` is inside `binding` for `lane`. A violation is kept if it is the
    /// launch's first (lowest invocation; a lane's own violations come in program order, so
    /// its first is kept); in unchecked mode the lane also stops (it trapped).
    #[inline]
    fn in_bounds(&mut self, lane: u32, binding: BindingId, index: u32) -> bool {
        if index < self.len(binding) {
            return true;
        }
        let invocation = self.first_invocation + lane as u64;
        if self.violation.is_none_or(|v| invocation < v.invocation) {
            *self.violation = Some(Violation {
                invocation,
                binding: binding.0,
                index,
            });
        }
        if !self.launch.options.checked {
            self.trapped[lane as usize] = true;
            self.any_trapped = true;
        }
        false
    }

    #[inline]
    fn load_word(&mut self, binding: BindingId, index: u32) -> u32 {
        let data = &self.bindings[binding.0 as usize];
        if !data.initialized[index as usize]
            && !self.outcome.uninitialized_loads.contains(&binding.0)
        {
            self.outcome.uninitialized_loads.push(binding.0);
        }
        data.words[index as usize]
    }

    fn store_word(&mut self, binding: BindingId, index: u32, bits: u32) {
        let data = &mut self.bindings[binding.0 as usize];
        data.words[index as usize] = bits;
        data.initialized[index as usize] = true;
        data.dirty[index as usize] = true;
    }
}

#[cfg(test)]
mod tests {
    use lockstep::kernel::{Access, Axis, KernelBuilder};

    use super::*;

    fn binding(words: Vec<u32>) -> BindingData {
        let n = words.len();
        BindingData {
            words,
            initialized: vec![true; n],
            dirty: vec![false; n],
        }
    }

    fn record() -> BindingData {
        binding(vec![0; FaultRecord::WORDS])
    }

    /// Workgroups of 4; invocation `i` stores `i` at `i`, except that invocation 6 first stores
    /// out of range at 100 + i (statement 1) and invocation 2 only later (statement 2, at
    /// 200 + i): the lowest violating invocation is 2, although 6 violates first in statement
    /// order.
    fn two_faulting_statements() -> KernelDef {
        let mut k = KernelBuilder::new("two", [4, 1, 1]);
        let out = k.binding(ElemType::U32, Access::ReadWrite);
        let i = k.global_id(Axis::X);
        k.if_(i.clone().equals(6u32), |k| {
            k.store(out, i.clone() + 100u32, 1u32)
        });
        k.if_(i.clone().lt(out.len()), |k| {
            k.store(out, i.clone(), i.clone())
        });
        k.if_(i.clone().equals(2u32), |k| {
            k.store(out, i.clone() + 200u32, 1u32)
        });
        k.build().unwrap()
    }

    #[test]
    fn the_fault_record_takes_the_lowest_invocations_first_violation() {
        let def = two_faulting_statements();
        let options = CompileOptions {
            checked: true,
            kernel_id: 9,
        };
        let mut data = vec![binding(vec![0; 8]), record()];
        run(&def, options, [2, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[0].words, (0..8).collect::<Vec<u32>>());
        assert_eq!(data[1].words, vec![1, 9, 0, 202]);
        // A record that already holds a fault keeps it.
        let mut data = vec![binding(vec![0; 8]), binding(vec![1, 3, 0, 7])];
        run(&def, options, [2, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[1].words, vec![1, 3, 0, 7]);
    }

    #[test]
    fn an_unchecked_trap_names_the_lowest_invocations_first_violation() {
        let def = two_faulting_statements();
        let options = CompileOptions {
            checked: false,
            kernel_id: 0,
        };
        let mut data = vec![binding(vec![0; 8])];
        let trap = run(&def, options, [2, 1, 1], &mut data, &[]).unwrap_err();
        assert_eq!(
            trap,
            KernelTrap::OutOfBounds {
                binding: 0,
                index: 202
            }
        );
    }

    #[test]
    fn loops_keep_each_lanes_trip_count_and_guards_short_circuit() {
        // out[i] = sum of 0..i, and a load guarded by `i < len(src) &&` never runs past src.
        let mut k = KernelBuilder::new("lanes", [8, 1, 1]);
        let out = k.binding(ElemType::U32, Access::ReadWrite);
        let src = k.binding(ElemType::U32, Access::Read);
        let i = k.global_id(Axis::X);
        let sum = k.var(ElemType::U32, 0u32);
        k.for_range(ElemType::U32, 0u32, i.clone(), |k, j| {
            k.assign(sum, sum.get() + j)
        });
        let guarded = i.clone().lt(src.len()).and(src.load(i.clone()).gt(0u32));
        k.if_(guarded, |k| k.assign(sum, sum.get() + 1000u32));
        k.store(out, i.clone(), sum.get());
        let def = k.build().unwrap();
        let options = CompileOptions {
            checked: true,
            kernel_id: 1,
        };
        let mut data = vec![binding(vec![0; 8]), binding(vec![1, 0, 1]), record()];
        run(&def, options, [1, 1, 1], &mut data, &[]).unwrap();
        assert_eq!(data[0].words, vec![1000, 0, 1001, 3, 6, 10, 15, 21]);
        assert_eq!(
            data[2].words,
            vec![0; 4],
            "the guarded load never ran out of range"
        );
    }
}
