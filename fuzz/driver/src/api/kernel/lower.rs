//! Lowers a drawn kernel onto a [`KernelBuilder`], typing every expression as validation
//! will (`lockstep::kernel::validate`'s rules, restated): operands of the wrong type are cast
//! when the kernel coerces, and noted as faults when it does not. Loops always end: `for`
//! loops run at most 4 iterations and `while` loops at most 3, so a drawn kernel never trips
//! the simulator's watchdog.

use std::cell::{Cell, RefCell};

use lockstep::kernel::{
    Access, Array, Axis, BinOp, Binding, ElemType, KernelBuilder, Scalar, Shared, Ty, UnaryOp,
    Value, Var,
};

use super::grammar::{ArrayPick, BuiltinPick, Cond, Expr, Index, LoopEnd, Stmt};
use super::{Declared, KernelSpec, Verdict};

/// Statements at each level of a body.
const BLOCK_STMTS: usize = 6;
/// Statements of a whole kernel.
const KERNEL_STMTS: u32 = 16;
/// Nesting of blocks, and of expressions.
const MAX_DEPTH: u32 = 3;

/// A lowered expression: its value, its type, and whether it mentions an invocation id
/// (`global_id`, `local_id`), which makes it differ between a workgroup's invocations.
#[derive(Clone, Copy)]
struct Typed {
    value: Value,
    ty: Ty,
    ids: bool,
}

/// Where a statement sits.
#[derive(Clone, Copy, Default)]
struct Place {
    depth: u32,
    loops: u32,
    /// Inside an `if` or a loop at all.
    controlled: bool,
    /// Inside an `if` or a loop whose condition or bounds mention an invocation id.
    divergent: bool,
}

impl Place {
    fn inside(self, ids: bool, is_loop: bool) -> Place {
        Place {
            depth: self.depth + 1,
            loops: self.loops + u32::from(is_loop),
            controlled: true,
            divergent: self.divergent || ids,
        }
    }
}

/// The lowering of one kernel: its declarations and what it learnt.
pub(super) struct Lower {
    bindings: Vec<(Binding, ElemType, Access)>,
    params: Vec<(Value, ElemType)>,
    shared: Vec<(Shared, ElemType, u32)>,
    /// Locals the grammar assigns (declared, and atomics' previous values).
    locals: RefCell<Vec<(Var, ElemType)>>,
    /// Loop variables: read, never assigned.
    loop_vars: RefCell<Vec<(Value, ElemType)>>,
    coerce: bool,
    budget: Cell<u32>,
    verdict: RefCell<Verdict>,
}

impl Lower {
    /// Declares `spec`'s bindings, parameters, shared arrays and locals on `k`.
    pub fn declare(k: &mut KernelBuilder, spec: &KernelSpec) -> Lower {
        let mut verdict = Verdict::default();
        let mut note = |elem: ElemType| verdict.uses_half |= elem.is_half();
        let bindings = (spec.bindings.iter().take(4))
            .map(|&(elem, writable)| {
                let access = if writable {
                    Access::ReadWrite
                } else {
                    Access::Read
                };
                note(elem.ty());
                (k.binding(elem.ty(), access), elem.ty(), access)
            })
            .collect();
        let params = (spec.params.iter().take(2))
            .map(|&elem| {
                note(elem.ty());
                (k.param(elem.ty()), elem.ty())
            })
            .collect();
        let shared = (spec.shared.iter().take(2))
            .map(|&(elem, len)| {
                note(elem.ty());
                (k.shared(elem.ty(), len.len()), elem.ty(), len.len())
            })
            .collect();
        let locals = (spec.locals.iter().take(3))
            .map(|&elem| {
                note(elem.ty());
                let zero = zero(elem.ty());
                (k.var(elem.ty(), zero), elem.ty())
            })
            .collect();
        Lower {
            bindings,
            params,
            shared,
            locals: RefCell::new(locals),
            loop_vars: RefCell::new(Vec::new()),
            coerce: spec.loose >= 32,
            budget: Cell::new(KERNEL_STMTS),
            verdict: RefCell::new(verdict),
        }
    }

    /// What the kernel declares, and the verdict.
    pub fn finish(self) -> (Declared, Verdict) {
        let declared = Declared {
            bindings: self.bindings.iter().map(|&(_, e, a)| (e, a)).collect(),
            params: self.params.iter().map(|&(_, e)| e).collect(),
            shared: self.shared.iter().map(|&(_, e, n)| (e, n)).collect(),
        };
        (declared, self.verdict.into_inner())
    }

    pub fn body(&self, k: &mut KernelBuilder, body: &[Stmt]) {
        self.block(k, body, Place::default());
    }

    fn fault(&self, what: &'static str) {
        self.verdict.borrow_mut().faults.push(what);
    }

    fn note_elem(&self, elem: ElemType) {
        self.verdict.borrow_mut().uses_half |= elem.is_half();
    }

    fn block(&self, k: &mut KernelBuilder, body: &[Stmt], at: Place) {
        if at.depth > MAX_DEPTH {
            return;
        }
        for stmt in body.iter().take(BLOCK_STMTS) {
            if self.budget.get() == 0 {
                return;
            }
            self.budget.set(self.budget.get() - 1);
            self.stmt(k, stmt, at);
        }
    }

    fn stmt(&self, k: &mut KernelBuilder, stmt: &Stmt, at: Place) {
        match stmt {
            Stmt::Assign { var, value } => {
                let local = pick(&self.locals.borrow(), *var).copied();
                if let Some((var, elem)) = local {
                    let value = self.expr_as(k, value, elem, 0);
                    k.assign(var, value.value);
                }
            }
            Stmt::Store {
                array,
                index,
                value,
                guarded,
            } => self.store(k, *array, index, value, *guarded),
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                fetch,
            } => {
                let Some((array, elem)) = self.written(*array, true) else {
                    return;
                };
                let index = self.index(k, index);
                let value = self.expr_as(k, value, elem, 0).value;
                if *fetch {
                    let old = k.fetch_atomic(op.op(), array, index.value, value);
                    self.locals.borrow_mut().push((old, elem));
                } else {
                    k.atomic(op.op(), array, index.value, value);
                }
            }
            Stmt::CompareExchange {
                array,
                index,
                expected,
                value,
            } => {
                let Some((array, elem)) = self.written(*array, true) else {
                    return;
                };
                let index = self.index(k, index).value;
                let expected = self.expr_as(k, expected, elem, 0).value;
                let value = self.expr_as(k, value, elem, 0).value;
                let old = k.compare_exchange(array, index, expected, value);
                self.locals.borrow_mut().push((old, elem));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let cond = self.cond(k, cond, 0);
                let inner = at.inside(cond.ids, false);
                k.if_else(
                    cond.value,
                    |k| self.block(k, then, inner),
                    |k| self.block(k, otherwise, inner),
                );
            }
            Stmt::For { signed, end, body } => self.for_loop(k, *signed, end, body, at),
            Stmt::While { cond, body } => self.while_loop(k, cond, body, at),
            Stmt::Break | Stmt::Continue => {
                if at.loops == 0 {
                    self.fault("a break or continue outside a loop");
                }
                if matches!(stmt, Stmt::Break) {
                    k.break_();
                } else {
                    k.continue_();
                }
            }
            Stmt::Foreign => {
                let mut other = KernelBuilder::new("other", [1, 1, 1]);
                let value = other.param(ElemType::U32) + 1u32;
                drop(other);
                self.fault("a value of another builder");
                let guard = k.var(ElemType::U32, 0u32);
                k.assign(guard, value);
            }
            Stmt::Barrier => {
                if at.divergent {
                    self.fault("a barrier under id-dependent control flow");
                }
                if at.controlled {
                    self.verdict.borrow_mut().unsure = true;
                }
                k.workgroup_barrier();
            }
        }
    }

    fn store(
        &self,
        k: &mut KernelBuilder,
        array: ArrayPick,
        index: &Index,
        value: &Expr,
        guarded: bool,
    ) {
        let Some((target, elem)) = self.written(array, false) else {
            return;
        };
        let index = self.index(k, index).value;
        let value = self.expr_as(k, value, elem, 0).value;
        if guarded {
            let len = self.len_of(array);
            k.if_(index.lt(len), |k| k.store(target, index, value));
        } else {
            k.store(target, index, value);
        }
    }

    /// The array `pick` names for a write, and its element type; a read-only binding or (for an
    /// atomic) a float array is a fault. `None` when there is no array at all.
    fn written(&self, pick: ArrayPick, atomic: bool) -> Option<(Array, ElemType)> {
        let target = self.resolve(pick)?;
        if !target.writable() {
            self.fault("a write to a read-only binding");
        }
        if atomic && target.elem().is_float() {
            self.fault("an atomic on a float array");
        }
        Some((target.array(), target.elem()))
    }

    /// The array `pick` names: a binding, else a shared array (or the other way round), or
    /// `None` when the kernel declares neither.
    fn resolve(&self, pick: ArrayPick) -> Option<Target> {
        let binding = |n| self::pick(&self.bindings, n).map(|&(b, e, a)| Target::Binding(b, e, a));
        let shared = |n| self::pick(&self.shared, n).map(|&(s, e, _)| Target::Shared(s, e));
        match pick {
            ArrayPick::Binding(n) => binding(n).or_else(|| shared(n)),
            ArrayPick::Shared(n) => shared(n).or_else(|| binding(n)),
        }
    }

    fn len_of(&self, pick: ArrayPick) -> Value {
        match self.resolve(pick) {
            Some(Target::Binding(b, ..)) => b.len(),
            Some(Target::Shared(s, _)) => s.len(),
            None => Value::from(0u32),
        }
    }

    fn for_loop(
        &self,
        k: &mut KernelBuilder,
        signed: bool,
        end: &LoopEnd,
        body: &[Stmt],
        at: Place,
    ) {
        let elem = if signed { ElemType::I32 } else { ElemType::U32 };
        let end = match end {
            LoopEnd::Lit(n) => self.lit(Scalar::from_bits(elem, u32::from(n % 5))),
            LoopEnd::Expr(e) => {
                let e = self.expr_as(k, e, elem, 0);
                let four = Scalar::from_bits(elem, 4);
                Typed {
                    value: e.value.min(four),
                    ..e
                }
            }
        };
        let inner = at.inside(end.ids, true);
        k.for_range(elem, zero(elem), end.value, |k, i| {
            self.loop_vars.borrow_mut().push((i, elem));
            self.block(k, body, inner);
        });
    }

    /// `while cond && guard < 3 { guard += 1; body }`: at most 3 iterations, whatever the body
    /// does (a `continue` re-tests the condition after the increment).
    fn while_loop(&self, k: &mut KernelBuilder, cond: &Cond, body: &[Stmt], at: Place) {
        let guard = k.var(ElemType::U32, 0u32);
        let cond = self.cond(k, cond, 0);
        let inner = at.inside(cond.ids, true);
        k.while_(cond.value.and(guard.get().lt(3u32)), |k| {
            k.assign(guard, guard.get() + 1u32);
            self.block(k, body, inner);
        });
    }

    fn lit(&self, scalar: Scalar) -> Typed {
        self.note_elem(scalar.elem_type());
        Typed {
            value: scalar.into(),
            ty: Ty::Elem(scalar.elem_type()),
            ids: false,
        }
    }

    fn cast(&self, t: Typed, to: ElemType) -> Typed {
        self.note_elem(to);
        Typed {
            value: t.value.cast(to),
            ty: Ty::Elem(to),
            ids: t.ids,
        }
    }

    /// `t` as `want`: cast when the kernel coerces, else a fault if the types differ.
    fn coerced(&self, t: Typed, want: ElemType, what: &'static str) -> Typed {
        if t.ty == Ty::Elem(want) {
            t
        } else if self.coerce {
            self.cast(t, want)
        } else {
            self.fault(what);
            t
        }
    }

    fn expr_as(&self, k: &mut KernelBuilder, e: &Expr, want: ElemType, depth: u32) -> Typed {
        let t = self.expr(k, e, depth);
        self.coerced(t, want, "an operand of the wrong type")
    }

    fn index(&self, k: &mut KernelBuilder, index: &Index) -> Typed {
        self.index_at(k, index, 0)
    }

    fn index_at(&self, k: &mut KernelBuilder, index: &Index, depth: u32) -> Typed {
        let id = |value| Typed {
            value,
            ty: Ty::Elem(ElemType::U32),
            ids: true,
        };
        match index {
            Index::GlobalX => id(k.global_id(Axis::X)),
            Index::LocalX => id(k.local_id(Axis::X)),
            Index::Lit(n) => self.lit(Scalar::U32(u32::from(*n))),
            Index::Huge => self.lit(Scalar::U32(1 << 30)),
            Index::Expr(e) => self.expr_as(k, e, ElemType::U32, depth),
        }
    }

    fn expr(&self, k: &mut KernelBuilder, e: &Expr, depth: u32) -> Typed {
        if depth > MAX_DEPTH {
            return self.lit(Scalar::U32(1));
        }
        let d = depth + 1;
        match e {
            Expr::Lit(lit) => self.lit(lit.scalar()),
            Expr::Builtin(builtin, axis) => builtin_of(k, *builtin, axis.op()),
            Expr::Param(p) => match pick(&self.params, *p) {
                Some(&(value, elem)) => plain(value, elem),
                None => self.lit(Scalar::U32(0)),
            },
            Expr::Var(v) => self.var(*v),
            Expr::Len(b) => match pick(&self.bindings, *b) {
                Some((binding, ..)) => plain(binding.len(), ElemType::U32),
                None => self.lit(Scalar::U32(0)),
            },
            Expr::Load(array, index) => match self.resolve(*array) {
                Some(target) => {
                    let index = self.index_at(k, index, d);
                    Typed {
                        value: target.load(index.value),
                        ty: Ty::Elem(target.elem()),
                        ids: index.ids,
                    }
                }
                None => self.lit(Scalar::U32(0)),
            },
            Expr::Binary(op, l, r) => self.binary(k, op.op(), (l, r), d),
            Expr::Unary(op, v) => {
                let v = self.expr(k, v, d);
                let v = if op.op() == UnaryOp::Abs {
                    v
                } else {
                    self.float(v)
                };
                Typed {
                    value: v.value.unary(op.op()),
                    ..v
                }
            }
            Expr::Neg(v) => {
                let v = self.expr(k, v, d);
                let v = match v.ty {
                    Ty::Elem(e) if e == ElemType::I32 || e.is_float() => v,
                    _ => self.coerced(v, ElemType::I32, "a negated u32"),
                };
                Typed {
                    value: -v.value,
                    ..v
                }
            }
            Expr::Cast(to, v) => {
                let v = self.expr(k, v, d);
                self.cast(v, to.ty())
            }
            Expr::Select(c, t, f) => {
                let c = self.cond(k, c, d);
                let t = self.expr(k, t, d);
                let f = self.expr_as(k, f, elem_of(t), d);
                Typed {
                    value: c.value.select(t.value, f.value),
                    ty: t.ty,
                    ids: c.ids || t.ids || f.ids,
                }
            }
            Expr::Fma(a, b, c) => {
                let a = self.expr(k, a, d);
                let a = self.float(a);
                let b = self.expr_as(k, b, elem_of(a), d);
                let c = self.expr_as(k, c, elem_of(a), d);
                Typed {
                    value: a.value.fma(b.value, c.value),
                    ty: a.ty,
                    ids: a.ids || b.ids || c.ids,
                }
            }
        }
    }

    /// A local or a loop variable, picked modulo their count.
    fn var(&self, v: u8) -> Typed {
        let (locals, loops) = (self.locals.borrow(), self.loop_vars.borrow());
        let count = locals.len() + loops.len();
        if count == 0 {
            drop((locals, loops));
            return self.lit(Scalar::U32(0));
        }
        let at = v as usize % count;
        match locals.get(at) {
            Some(&(var, elem)) => plain(var.get(), elem),
            None => {
                let (value, elem) = loops[at - locals.len()];
                plain(value, elem)
            }
        }
    }

    /// `t` where a float is needed: cast to `f32` when the kernel coerces, else a fault.
    fn float(&self, t: Typed) -> Typed {
        if matches!(t.ty, Ty::Elem(e) if e.is_float()) {
            t
        } else {
            self.coerced(t, ElemType::F32, "a float-only function of an integer")
        }
    }

    /// `l op r`: both of one element type, an integer one for the bitwise operators, a float
    /// for `pow`.
    fn binary(&self, k: &mut KernelBuilder, op: BinOp, (l, r): (&Expr, &Expr), d: u32) -> Typed {
        let mut l = self.expr(k, l, d);
        let integer_only = matches!(
            op,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        );
        if integer_only && elem_of(l).is_float() {
            l = self.coerced(l, ElemType::U32, "a bitwise operator on a float");
        }
        if op == BinOp::Pow && !elem_of(l).is_float() {
            l = self.coerced(l, ElemType::F32, "pow of an integer");
        }
        let r = self.expr_as(k, r, elem_of(l), d);
        Typed {
            value: l.value.binary(op, r.value),
            ty: l.ty,
            ids: l.ids || r.ids,
        }
    }

    fn cond(&self, k: &mut KernelBuilder, c: &Cond, depth: u32) -> Typed {
        let boolean = |value, ids| Typed {
            value,
            ty: Ty::Bool,
            ids,
        };
        if depth > MAX_DEPTH {
            return boolean(Value::from(true), false);
        }
        let d = depth + 1;
        match c {
            Cond::Cmp(op, l, r) => {
                let l = self.expr(k, l, d);
                let r = self.expr_as(k, r, elem_of(l), d);
                boolean(l.value.compare(op.op(), r.value), l.ids || r.ids)
            }
            Cond::And(a, b) | Cond::Or(a, b) => {
                let (a, b) = (self.cond(k, a, d), self.cond(k, b, d));
                let value = if matches!(c, Cond::And(..)) {
                    a.value.and(b.value)
                } else {
                    a.value.or(b.value)
                };
                boolean(value, a.ids || b.ids)
            }
            Cond::Not(a) => {
                let a = self.cond(k, a, d);
                boolean(!a.value, a.ids)
            }
            Cond::Lit(b) => boolean(Value::from(*b), false),
            Cond::IdBelow(n) => boolean(k.local_id(Axis::X).lt(u32::from(n % 8)), true),
            Cond::Value(e) => {
                let t = self.expr(k, e, d);
                if !self.coerce {
                    self.fault("a number as a condition");
                    return t;
                }
                let zero = self.lit(Scalar::from_bits(elem_of(t), 0));
                boolean(t.value.not_equals(zero.value), t.ids)
            }
        }
    }
}

/// An array a statement or an expression names.
#[derive(Clone, Copy)]
enum Target {
    Binding(Binding, ElemType, Access),
    Shared(Shared, ElemType),
}

impl Target {
    fn array(self) -> Array {
        match self {
            Target::Binding(b, ..) => b.into(),
            Target::Shared(s, _) => s.into(),
        }
    }

    fn elem(self) -> ElemType {
        match self {
            Target::Binding(_, e, _) | Target::Shared(_, e) => e,
        }
    }

    fn writable(self) -> bool {
        !matches!(self, Target::Binding(_, _, Access::Read))
    }

    fn load(self, index: Value) -> Value {
        match self {
            Target::Binding(b, ..) => b.load(index),
            Target::Shared(s, _) => s.load(index),
        }
    }
}

/// A value with no invocation id in it.
fn plain(value: Value, elem: ElemType) -> Typed {
    Typed {
        value,
        ty: Ty::Elem(elem),
        ids: false,
    }
}

/// The element type of `t` (expressions of the grammar are never booleans, but for a fault
/// that left a condition where a number goes: then `u32`).
fn elem_of(t: Typed) -> ElemType {
    match t.ty {
        Ty::Elem(e) => e,
        Ty::Bool => ElemType::U32,
    }
}

fn builtin_of(k: &KernelBuilder, builtin: BuiltinPick, axis: Axis) -> Typed {
    let (value, ids) = match builtin {
        BuiltinPick::GlobalId => (k.global_id(axis), true),
        BuiltinPick::LocalId => (k.local_id(axis), true),
        BuiltinPick::WorkgroupId => (k.workgroup_id(axis), false),
        BuiltinPick::NumWorkgroups => (k.num_workgroups(axis), false),
    };
    Typed {
        value,
        ty: Ty::Elem(ElemType::U32),
        ids,
    }
}

/// Element `pick` of `items`, modulo their count.
fn pick<T>(items: &[T], pick: u8) -> Option<&T> {
    (!items.is_empty()).then(|| &items[pick as usize % items.len()])
}

/// The zero of `elem`.
fn zero(elem: ElemType) -> Value {
    Scalar::from_bits(elem, 0).into()
}
