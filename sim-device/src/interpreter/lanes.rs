//! A batch of lanes (invocations) and what both engines do to them: evaluate an expression over
//! every active lane, one node at a time, and apply the statements without control flow.

use lockstep::kernel::{
    Array, Builtin, CompileOptions, ElemType, Expr, KernelDef, LogicOp, Scalar, Stmt, VarId,
    semantics,
};

use super::program::Numbers;
use super::races::{Access, AccessKind, AccessLog, Race};
use super::{BindingData, LaunchOutcome, UnwrittenRead, Violation};

/// One expression's value on every lane of a batch (inactive lanes hold leftovers): scalars as
/// the bits of their type (the IR is typed, so a column has one), or booleans.
pub(super) enum Column {
    Words(ElemType, Vec<u32>),
    Bools(Vec<bool>),
}

impl Column {
    pub(super) fn words(self) -> (ElemType, Vec<u32>) {
        match self {
            Column::Words(elem, bits) => (elem, bits),
            Column::Bools(_) => panic!("validated kernels use booleans only as conditions"),
        }
    }

    pub(super) fn bools(self) -> Vec<bool> {
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
        ElemType::U32 => map(lanes, fill, |l| f(&Scalar::U32, l)),
        ElemType::I32 => map(lanes, fill, |l| f(&|b| Scalar::I32(b as i32), l)),
        ElemType::F32 => map(lanes, fill, |l| f(&|b| Scalar::F32(f32::from_bits(b)), l)),
    }
}

/// `f` applied to each active lane's operands. Lanes are ascending; when they are all the
/// lanes up to the last (the common case: no branch has split them), a plain loop serves.
pub(super) fn map<T: Clone>(lanes: &[u32], fill: T, mut f: impl FnMut(usize) -> T) -> Vec<T> {
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

/// What stays the same for every batch of a launch.
pub(super) struct Launch<'a> {
    pub def: &'a KernelDef,
    pub options: CompileOptions,
    pub params: &'a [Scalar],
    pub num_workgroups: [u32; 3],
    /// The kernel's statement numbers, when the race check watches global memory (the
    /// workgroup engine numbers its instructions itself).
    pub numbers: Option<Numbers>,
}

/// A batch of lanes in flight: whole workgroups, with the shared arrays of one workgroup when
/// the kernel has any (the workgroup engine runs one workgroup per batch).
pub(super) struct Batch<'a, 'l> {
    pub launch: &'l Launch<'a>,
    bindings: &'l mut [BindingData],
    /// The current workgroup's shared arrays (empty for kernels without any).
    shared: Vec<BindingData>,
    pub outcome: &'l mut LaunchOutcome,
    /// The first violation of the launch so far: checked faults, or unchecked traps.
    violation: &'l mut Option<Violation>,
    /// Launch index of lane 0.
    pub first_invocation: u64,
    local_id: Vec<[u32; 3]>,
    workgroup_id: Vec<[u32; 3]>,
    /// Per local variable (then per hidden slot of the workgroup engine), its value's bits on
    /// every lane.
    pub locals: Vec<Vec<u32>>,
    /// Lanes that trapped (unchecked mode): they run no further statement.
    pub trapped: Vec<bool>,
    pub any_trapped: bool,
    /// Barriers the batch's workgroup has passed (the workgroup engine's; the batched engine
    /// runs no barrier).
    pub epoch: u32,
    /// The number of the statement running now, for the race check's reports.
    pub statement: u32,
}

impl<'a, 'l> Batch<'a, 'l> {
    /// The lanes of `groups`, with `hidden` slots beyond the kernel's locals and fresh shared
    /// arrays (one workgroup at a time when the kernel has any).
    pub fn new(
        launch: &'l Launch<'a>,
        bindings: &'l mut [BindingData],
        outcome: &'l mut LaunchOutcome,
        violation: &'l mut Option<Violation>,
        groups: &[[u32; 3]],
        hidden: usize,
    ) -> Self {
        let def = launch.def;
        debug_assert!(def.shared.is_empty() || groups.len() == 1);
        let [wx, wy, wz] = def.workgroup_size;
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
        // Each workgroup's shared arrays, with their own race logs.
        let shared = def
            .shared
            .iter()
            .map(|s| {
                let mut data = BindingData::unwritten(s.len as usize);
                data.log = Some(AccessLog::new(s.len as usize, lanes as u64));
                data
            })
            .collect();
        Batch {
            launch,
            bindings,
            shared,
            outcome,
            violation,
            first_invocation: 0,
            // Zero of every type is all-zero bits.
            locals: vec![vec![0; lanes]; def.locals.len() + hidden],
            trapped: vec![false; lanes],
            any_trapped: false,
            epoch: 0,
            statement: 0,
            local_id,
            workgroup_id,
        }
    }

    pub fn lane_count(&self) -> usize {
        self.local_id.len()
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
        match stmt {
            Stmt::Assign { var, value } => {
                let (_, v) = self.eval(value, lanes).words();
                self.set_local(*var, &v, lanes);
            }
            Stmt::Store {
                array,
                index,
                value,
            } => {
                let at = self.eval(index, lanes).indices();
                let (_, value) = self.eval(value, lanes).words();
                let (len, watched) = (self.len(*array), self.watched(*array));
                for &l in lanes {
                    let i = at[l as usize];
                    if self.in_bounds(l, *array, i, len) {
                        if watched {
                            self.watch(l, *array, i, AccessKind::Write);
                        }
                        self.store_word(*array, i, value[l as usize]);
                    }
                }
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
                self.read_modify_write(*array, &at, *old, lanes, |l, prev| {
                    let new = semantics::atomic(
                        *op,
                        Scalar::from_bits(elem, prev),
                        Scalar::from_bits(elem, operand[l]),
                    );
                    Some(new.to_bits())
                });
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
                self.read_modify_write(*array, &at, Some(*old), lanes, |l, prev| {
                    (prev == expected[l]).then_some(value[l])
                });
            }
            Stmt::If { .. }
            | Stmt::For { .. }
            | Stmt::While { .. }
            | Stmt::Break
            | Stmt::Continue
            | Stmt::Barrier => panic!("{stmt:?} is control flow, which each engine runs itself"),
        }
    }

    /// An atomic on every lane, in lane order: `new(lane, previous)` is the word's new value
    /// (`None` leaves it), and the previous value goes to `old` (zero when out of range).
    fn read_modify_write(
        &mut self,
        array: Array,
        at: &[u32],
        old: Option<VarId>,
        lanes: &[u32],
        new: impl Fn(usize, u32) -> Option<u32>,
    ) {
        let mut previous = map(lanes, 0, |_| 0);
        let len = self.len(array);
        for &l in lanes {
            let i = at[l as usize];
            if self.in_bounds(l, array, i, len) {
                self.watch(l, array, i, AccessKind::Atomic);
                let prev = self.peek_word(l, array, i);
                if let Some(word) = new(l as usize, prev) {
                    self.store_word(array, i, word);
                }
                previous[l as usize] = prev;
            }
        }
        if let Some(old) = old {
            self.set_local(old, &previous, lanes);
        }
    }

    pub fn set_local(&mut self, var: VarId, bits: &[u32], lanes: &[u32]) {
        self.set_slot(var.0 as usize, bits, lanes);
    }

    /// Sets local (or hidden) slot `slot` on `lanes` from a column.
    pub fn set_slot(&mut self, slot: usize, bits: &[u32], lanes: &[u32]) {
        let local = &mut self.locals[slot];
        for &l in lanes {
            local[l as usize] = bits[l as usize];
        }
    }

    pub fn eval(&mut self, expr: &Expr, lanes: &[u32]) -> Column {
        match expr {
            Expr::Lit(s) => self.constant(s.elem_type(), s.to_bits(), lanes),
            Expr::Bool(b) => Column::Bools(map(lanes, false, |_| *b)),
            Expr::Builtin(b) => {
                Column::Words(ElemType::U32, map(lanes, 0, |l| self.builtin(*b, l)))
            }
            Expr::Param(p) => {
                let v = self.launch.params[*p as usize];
                self.constant(v.elem_type(), v.to_bits(), lanes)
            }
            Expr::Var(v) => {
                let local = &self.locals[v.0 as usize];
                let elem = self.launch.def.locals[v.0 as usize];
                Column::Words(elem, map(lanes, 0, |l| local[l]))
            }
            Expr::Len(b) => {
                let len = self.bindings[b.0 as usize].words.len() as u32;
                self.constant(ElemType::U32, len, lanes)
            }
            Expr::Load { array, index } => {
                let at = self.eval(index, lanes).indices();
                let elem = self
                    .launch
                    .def
                    .elem_of(*array)
                    .expect("validated kernels declare what they load");
                // Out of range yields zero, whose bits are zero in every type.
                let (len, watched) = (self.len(*array), self.watched(*array));
                let bits = map(lanes, 0, |l| {
                    let i = at[l];
                    if self.in_bounds(l as u32, *array, i, len) {
                        if watched {
                            self.watch(l as u32, *array, i, AccessKind::Read);
                        }
                        self.peek_word(l as u32, *array, i)
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
                Column::Bools(map(lanes, false, |l| !v[l]))
            }
            Expr::Neg(e) => {
                let (elem, v) = self.eval(e, lanes).words();
                let bits = typed(elem, lanes, 0, |lift, l| {
                    semantics::negate(lift(v[l])).to_bits()
                });
                Column::Words(elem, bits)
            }
            Expr::Unary { op, value } => {
                let (elem, v) = self.eval(value, lanes).words();
                let bits = typed(elem, lanes, 0, |lift, l| {
                    semantics::unary(*op, lift(v[l])).to_bits()
                });
                Column::Words(elem, bits)
            }
            Expr::Fma { a, b, c } => {
                let (_, a) = self.eval(a, lanes).words();
                let (_, b) = self.eval(b, lanes).words();
                let (_, c) = self.eval(c, lanes).words();
                let f = f32::from_bits;
                let bits = map(lanes, 0, |l| {
                    semantics::fma(f(a[l]), f(b[l]), f(c[l])).to_bits()
                });
                Column::Words(ElemType::F32, bits)
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
        Column::Words(elem, map(lanes, 0, |_| bits))
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
            (Column::Words(elem, t), Column::Words(_, f)) => {
                Column::Words(elem, map(lanes, 0, |l| if c[l] { t[l] } else { f[l] }))
            }
            (Column::Bools(t), Column::Bools(f)) => {
                Column::Bools(map(lanes, false, |l| if c[l] { t[l] } else { f[l] }))
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

    fn data(&self, array: Array) -> &BindingData {
        match array {
            Array::Binding(b) => &self.bindings[b.0 as usize],
            Array::Shared(s) => &self.shared[s.0 as usize],
        }
    }

    fn data_mut(&mut self, array: Array) -> &mut BindingData {
        match array {
            Array::Binding(b) => &mut self.bindings[b.0 as usize],
            Array::Shared(s) => &mut self.shared[s.0 as usize],
        }
    }

    /// Whether `index` is inside `array` for `lane`. A violation is kept if it is the
    /// launch's first (lowest invocation; a lane's own violations come in program order, so
    /// its first is kept); in unchecked mode the lane also stops (it trapped).
    ///
    /// `len` is the array's length, which callers read once per statement.
    #[inline]
    fn in_bounds(&mut self, lane: u32, array: Array, index: u32, len: u32) -> bool {
        index < len || self.out_of_bounds(lane, array, index)
    }

    /// Records an access outside its array; returns false.
    #[cold]
    fn out_of_bounds(&mut self, lane: u32, array: Array, index: u32) -> bool {
        let invocation = self.first_invocation + lane as u64;
        if self.violation.is_none_or(|v| invocation < v.invocation) {
            *self.violation = Some(Violation {
                invocation,
                array,
                index,
            });
        }
        if !self.launch.options.checked {
            self.trapped[lane as usize] = true;
            self.any_trapped = true;
        }
        false
    }

    /// The word at `index`, read by `lane`; a word nothing wrote is reported (a binding
    /// once per launch, a shared array once per launch with where it was read).
    #[inline]
    fn peek_word(&mut self, lane: u32, array: Array, index: u32) -> u32 {
        let data = self.data(array);
        let word = data.words[index as usize];
        if !data.initialized[index as usize] {
            self.unwritten(lane, array, index);
        }
        word
    }

    #[cold]
    fn unwritten(&mut self, lane: u32, array: Array, index: u32) {
        let outcome = &mut *self.outcome;
        match array {
            Array::Binding(b) if !outcome.uninitialized_loads.contains(&b) => {
                outcome.uninitialized_loads.push(b);
            }
            Array::Shared(_) if !outcome.unwritten_shared.iter().any(|r| r.array == array) => {
                outcome.unwritten_shared.push(UnwrittenRead {
                    array,
                    index,
                    invocation: self.first_invocation + lane as u64,
                    statement: self.statement,
                });
            }
            _ => {}
        }
    }

    /// Elements in `array`.
    fn len(&self, array: Array) -> u32 {
        self.data(array).words.len() as u32
    }

    /// Whether the race check watches `array` (checked once per statement, not per lane).
    fn watched(&self, array: Array) -> bool {
        self.data(array).log.is_some()
    }

    /// Shows `lane`'s access to `array[index]` to the race check, if it watches the array;
    /// the launch's first race on each array is kept.
    fn watch(&mut self, lane: u32, array: Array, index: u32, kind: AccessKind) {
        let access = Access {
            invocation: self.first_invocation + lane as u64,
            epoch: self.epoch,
            statement: self.statement,
            kind,
        };
        let Some(log) = &mut self.data_mut(array).log else {
            return;
        };
        if let Some(first) = log.record(index, access)
            && !self.outcome.races.iter().any(|r| r.array == array)
        {
            self.outcome.races.push(Race {
                array,
                index,
                first,
                second: access,
            });
        }
    }

    #[inline]
    fn store_word(&mut self, array: Array, index: u32, bits: u32) {
        let data = self.data_mut(array);
        data.words[index as usize] = bits;
        data.initialized[index as usize] = true;
        data.dirty[index as usize] = true;
    }
}
