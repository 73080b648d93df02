//! Expressions over the lanes of a batch: each node evaluated for every active lane before the
//! next, into buffers of the launch's [`Spares`](super::super::column::Spares) — an operation
//! writes its result over its first operand's column, whose buffer it takes.

use lockstep::kernel::{Array, BinOp, CmpOp, ElemType, Expr, LogicOp, Scalar};

use super::super::column::{self, Column};
use super::Batch;

impl Batch<'_, '_> {
    /// The value of `expr` on `lanes` (ascending). Give its buffer back to
    /// [`Batch::spares`] once done with it.
    pub fn eval(&mut self, expr: &Expr, lanes: &[u32]) -> Column {
        match expr {
            Expr::Lit(_) | Expr::Param(_) | Expr::Len(_) => {
                let (elem, bits) = self.uniform_leaf(expr).expect("a uniform leaf");
                Column::Words(elem, self.uniform(bits, lanes))
            }
            Expr::Bool(b) => Column::Bools(self.uniform(*b as u32, lanes)),
            Expr::Builtin(b) => {
                let mut out = self.spares.take();
                column::copy(&mut out, self.builtins.column(*b), lanes);
                Column::Words(ElemType::U32, out)
            }
            Expr::Var(v) => {
                let mut out = self.spares.take();
                column::copy(&mut out, &self.locals[v.0 as usize], lanes);
                Column::Words(self.launch.def.locals[v.0 as usize], out)
            }
            Expr::Load { array, index } => match self.launch.repeated.slot(expr) {
                Some(slot) if !self.watched(*array) => {
                    self.load_once(slot as usize, *array, index, lanes)
                }
                _ => self.load(*array, index, lanes),
            },
            Expr::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, lanes),
            Expr::Cmp { op, lhs, rhs } => self.compare(*op, lhs, rhs, lanes),
            Expr::Logic { op, lhs, rhs } => self.logic(*op, lhs, rhs, lanes),
            Expr::Not(e) => {
                let mut v = self.eval(e, lanes).bools();
                column::not(&mut v, lanes);
                Column::Bools(v)
            }
            Expr::Neg(e) => {
                let (elem, mut v) = self.eval(e, lanes).words();
                column::negate(elem, &mut v, lanes);
                Column::Words(elem, v)
            }
            Expr::Unary { op, value } => {
                let (elem, mut v) = self.eval(value, lanes).words();
                column::unary(*op, elem, &mut v, lanes);
                Column::Words(elem, v)
            }
            Expr::Fma { a, b, c } => {
                let (elem, mut a) = self.eval(a, lanes).words();
                let (_, b) = self.eval(b, lanes).words();
                let (_, c) = self.eval(c, lanes).words();
                column::fma(elem, &mut a, &b, &c, lanes);
                self.spares.give(b);
                self.spares.give(c);
                Column::Words(elem, a)
            }
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => self.select(cond, if_true, if_false, lanes),
            Expr::Cast { to, value } => {
                let (elem, mut v) = self.eval(value, lanes).words();
                column::cast(elem, *to, &mut v, lanes);
                Column::Words(*to, v)
            }
            // A column holds each value's bits (a half float's 16 in a word): only the type
            // changes.
            Expr::Bitcast { to, value } => Column::Words(*to, self.eval(value, lanes).words().1),
            Expr::Bits { op, value } => {
                let (elem, mut v) = self.eval(value, lanes).words();
                column::bits(*op, elem, &mut v, lanes);
                Column::Words(elem, v)
            }
        }
    }

    /// `lhs op rhs` over the lanes, into `lhs`'s column; a uniform `rhs` is taken as its bits.
    fn binary(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr, lanes: &[u32]) -> Column {
        let (elem, mut l) = self.eval(lhs, lanes).words();
        if let Some((_, r)) = self.uniform_leaf(rhs) {
            column::binary_by(op, elem, &mut l, r, lanes);
        } else {
            let (_, r) = self.eval(rhs, lanes).words();
            column::binary(op, elem, &mut l, &r, lanes);
            self.spares.give(r);
        }
        Column::Words(elem, l)
    }

    /// `lhs op rhs` compared over the lanes, into `lhs`'s column as booleans; a uniform `rhs`
    /// is taken as its bits.
    fn compare(&mut self, op: CmpOp, lhs: &Expr, rhs: &Expr, lanes: &[u32]) -> Column {
        let (elem, mut l) = self.eval(lhs, lanes).words();
        if let Some((_, r)) = self.uniform_leaf(rhs) {
            column::compare_by(op, elem, &mut l, r, lanes);
        } else {
            let (_, r) = self.eval(rhs, lanes).words();
            column::compare(op, elem, &mut l, &r, lanes);
            self.spares.give(r);
        }
        Column::Bools(l)
    }

    /// The bits of `expr` when it is a leaf with the same value on every lane (a literal, a
    /// parameter or a length), so that an operation can take it without a column; evaluating
    /// such a leaf has no effect beyond its value.
    fn uniform_leaf(&self, expr: &Expr) -> Option<(ElemType, u32)> {
        let value = match expr {
            Expr::Lit(s) => *s,
            Expr::Param(p) => self.launch.params[*p as usize],
            Expr::Len(b) => Scalar::U32(self.bindings[b.0 as usize].words.len() as u32),
            _ => return None,
        };
        Some((value.elem_type(), value.to_bits()))
    }

    /// The same bits on every lane.
    fn uniform(&mut self, bits: u32, lanes: &[u32]) -> Vec<u32> {
        let mut out = self.spares.take();
        column::fill(&mut out, bits, lanes);
        out
    }

    /// `array[index]` on every lane (see [`Batch::gather`]): the index column becomes the
    /// result.
    fn load(&mut self, array: Array, index: &Expr, lanes: &[u32]) -> Column {
        let mut at = self.eval(index, lanes).indices();
        let elem = self
            .launch
            .def
            .elem_of(array)
            .expect("validated kernels declare what they load");
        self.gather(array, &mut at, lanes);
        Column::Words(elem, at)
    }

    /// [`load`](Self::load) of a load that repeats in its statement, of an array the race
    /// check does not watch: evaluated by the first of its repeats to run in this execution of
    /// the statement, a copy of that column for the others (see `interpreter::repeated`).
    fn load_once(&mut self, slot: usize, array: Array, index: &Expr, lanes: &[u32]) -> Column {
        if let Some((effect, elem, kept)) = &self.repeated[slot]
            && *effect == self.effects
        {
            let mut out = self.spares.take();
            column::copy(&mut out, kept, lanes);
            return Column::Words(*elem, out);
        }
        let (elem, words) = self.load(array, index, lanes).words();
        let mut kept = match self.repeated[slot].take() {
            Some((_, _, stale)) => stale,
            None => self.spares.take(),
        };
        column::copy(&mut kept, &words, lanes);
        self.repeated[slot] = Some((self.effects, elem, kept));
        Column::Words(elem, words)
    }

    /// Short-circuits, as WGSL's `&&`/`||` and C's do: the right side runs only on the lanes
    /// whose left side does not decide, so a guarded load never runs.
    fn logic(&mut self, op: LogicOp, lhs: &Expr, rhs: &Expr, lanes: &[u32]) -> Column {
        let mut out = self.eval(lhs, lanes).bools();
        let undecided_when = matches!(op, LogicOp::And) as u32;
        let undecided: Vec<u32> = lanes
            .iter()
            .copied()
            .filter(|&l| out[l as usize] == undecided_when)
            .collect();
        if !undecided.is_empty() {
            let right = self.eval(rhs, &undecided).bools();
            column::copy(&mut out, &right, &undecided);
            self.spares.give(right);
        }
        Column::Bools(out)
    }

    /// Both sides are evaluated on every lane (their loads included), then one is picked.
    fn select(&mut self, cond: &Expr, t: &Expr, f: &Expr, lanes: &[u32]) -> Column {
        let c = self.eval(cond, lanes).bools();
        let picked = match (self.eval(t, lanes), self.eval(f, lanes)) {
            (Column::Words(elem, mut t), Column::Words(_, f)) => {
                column::select(&c, &mut t, &f, lanes);
                self.spares.give(f);
                Column::Words(elem, t)
            }
            (Column::Bools(mut t), Column::Bools(f)) => {
                column::select(&c, &mut t, &f, lanes);
                self.spares.give(f);
                Column::Bools(t)
            }
            _ => panic!("validated kernels select between values of one type"),
        };
        self.spares.give(c);
        picked
    }
}
