//! A builder that makes IR readable to write:
//!
//! ```
//! use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
//!
//! let mut k = KernelBuilder::new("scale", [64, 1, 1]);
//! let data = k.binding(ElemType::F32, Access::ReadWrite);
//! let factor = k.param(ElemType::F32);
//! let i = k.global_id(Axis::X);
//! k.if_(i.clone().lt(data.len()), |k| {
//!     k.store(data, i.clone(), data.load(i.clone()) * factor.clone());
//! });
//! let kernel = k.build().expect("a valid kernel");
//! assert_eq!(kernel.name, "scale");
//! ```

use std::ops;

use super::ir::{
    Access, Array, AtomicOp, Axis, BinOp, BindingDecl, BindingId, Builtin, CmpOp, ElemType, Expr,
    KernelDef, LogicOp, Scalar, SharedDecl, SharedId, Stmt, UnaryOp, VarId,
};
use super::validate::{KernelError, validate};

/// A kernel under construction. Statements go into the innermost open block (`if_`,
/// `for_range`, `while_`).
#[derive(Debug)]
pub struct KernelBuilder {
    def: KernelDef,
    /// Open statement blocks; the first is the kernel body. Never empty.
    blocks: Vec<Vec<Stmt>>,
}

/// A binding declared on a [`KernelBuilder`].
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// Index of the binding in the kernel's declarations: launch argument `id.0` binds to it.
    pub id: BindingId,
}

impl Binding {
    /// Reads element `index` (`u32`) of the binding.
    pub fn load(self, index: impl Into<Expr>) -> Expr {
        Expr::Load {
            array: Array::Binding(self.id),
            index: Box::new(index.into()),
        }
    }

    /// Number of elements in the bound buffer.
    pub fn len(self) -> Expr {
        Expr::Len(self.id)
    }
}

impl From<Binding> for Array {
    fn from(b: Binding) -> Self {
        Array::Binding(b.id)
    }
}

/// A workgroup-shared array declared on a [`KernelBuilder`].
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    /// Index of the array in the kernel's shared-array declarations.
    pub id: SharedId,
    len: u32,
}

impl Shared {
    /// Reads element `index` (`u32`) of the array in this workgroup's copy.
    pub fn load(self, index: impl Into<Expr>) -> Expr {
        Expr::Load {
            array: Array::Shared(self.id),
            index: Box::new(index.into()),
        }
    }

    /// Number of elements: a `u32` literal.
    pub fn len(self) -> Expr {
        Expr::from(self.len)
    }
}

impl From<Shared> for Array {
    fn from(s: Shared) -> Self {
        Array::Shared(s.id)
    }
}

/// A local variable declared on a [`KernelBuilder`].
#[derive(Clone, Copy, Debug)]
pub struct Var {
    /// Index of the variable in the kernel's locals.
    pub id: VarId,
}

impl Var {
    /// Reads the variable's current value.
    pub fn get(self) -> Expr {
        Expr::Var(self.id)
    }
}

impl KernelBuilder {
    /// Starts a kernel named `name` whose workgroups hold `workgroup_size` (`[x, y, z]`)
    /// invocations; [`build`](Self::build) checks the size.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        Self {
            def: KernelDef {
                name: name.into(),
                workgroup_size,
                bindings: Vec::new(),
                params: Vec::new(),
                locals: Vec::new(),
                shared: Vec::new(),
                body: Vec::new(),
            },
            blocks: vec![Vec::new()],
        }
    }

    /// Declares the next buffer argument, an array of `elem` the kernel may write when `access` is
    /// [`Access::ReadWrite`]; bindings are numbered in declaration order, as launches pass them.
    pub fn binding(&mut self, elem: ElemType, access: Access) -> Binding {
        self.def.bindings.push(BindingDecl { elem, access });
        Binding {
            id: BindingId(self.def.bindings.len() as u32 - 1),
        }
    }

    /// Declares a scalar launch parameter and returns the expression that reads it.
    pub fn param(&mut self, elem: ElemType) -> Expr {
        self.def.params.push(elem);
        Expr::Param(self.def.params.len() as u32 - 1)
    }

    /// Declares a workgroup-shared array of `len` elements (undefined until written).
    pub fn shared(&mut self, elem: ElemType, len: u32) -> Shared {
        self.def.shared.push(SharedDecl { elem, len });
        Shared {
            id: SharedId(self.def.shared.len() as u32 - 1),
            len,
        }
    }

    /// Declares a local variable (zero at kernel entry) and assigns `init` to it here.
    pub fn var(&mut self, elem: ElemType, init: impl Into<Expr>) -> Var {
        let var = self.local(elem);
        self.assign(var, init);
        var
    }

    /// Declares a local variable without assigning it.
    fn local(&mut self, elem: ElemType) -> Var {
        self.def.locals.push(elem);
        Var {
            id: VarId(self.def.locals.len() as u32 - 1),
        }
    }

    /// The invocation's index in the whole grid on `axis` (`workgroup_id * workgroup_size +
    /// local_id`).
    pub fn global_id(&self, axis: Axis) -> Expr {
        Expr::Builtin(Builtin::GlobalId(axis))
    }

    /// The invocation's index in its workgroup on `axis`.
    pub fn local_id(&self, axis: Axis) -> Expr {
        Expr::Builtin(Builtin::LocalId(axis))
    }

    /// The workgroup's index in the grid on `axis`.
    pub fn workgroup_id(&self, axis: Axis) -> Expr {
        Expr::Builtin(Builtin::WorkgroupId(axis))
    }

    /// Number of workgroups of the launch on `axis`.
    pub fn num_workgroups(&self, axis: Axis) -> Expr {
        Expr::Builtin(Builtin::NumWorkgroups(axis))
    }

    fn push(&mut self, stmt: Stmt) {
        self.blocks
            .last_mut()
            .expect("the kernel body block is never popped")
            .push(stmt);
    }

    fn block(&mut self, body: impl FnOnce(&mut Self)) -> Vec<Stmt> {
        self.blocks.push(Vec::new());
        body(self);
        self.blocks
            .pop()
            .expect("the block pushed above is still open")
    }

    /// `var = value`.
    pub fn assign(&mut self, var: Var, value: impl Into<Expr>) {
        self.push(Stmt::Assign {
            var: var.id,
            value: value.into(),
        });
    }

    /// `array[index] = value`; `array` must be writable.
    pub fn store(
        &mut self,
        array: impl Into<Array>,
        index: impl Into<Expr>,
        value: impl Into<Expr>,
    ) {
        self.push(Stmt::Store {
            array: array.into(),
            index: index.into(),
            value: value.into(),
        });
    }

    /// `array[index] += value`, atomically, discarding the previous value.
    pub fn atomic_add(
        &mut self,
        array: impl Into<Array>,
        index: impl Into<Expr>,
        value: impl Into<Expr>,
    ) {
        self.atomic(AtomicOp::Add, array, index, value);
    }

    /// `array[index] = op(array[index], value)`, atomically, discarding the previous value.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        array: impl Into<Array>,
        index: impl Into<Expr>,
        value: impl Into<Expr>,
    ) {
        self.push(Stmt::Atomic {
            op,
            array: array.into(),
            index: index.into(),
            value: value.into(),
            old: None,
        });
    }

    /// Like [`atomic`](Self::atomic); returns a fresh variable holding the previous value.
    pub fn fetch_atomic(
        &mut self,
        op: AtomicOp,
        array: impl Into<Array>,
        index: impl Into<Expr>,
        value: impl Into<Expr>,
    ) -> Var {
        let array = array.into();
        let old = self.local(self.elem_or_u32(array));
        self.push(Stmt::Atomic {
            op,
            array,
            index: index.into(),
            value: value.into(),
            old: Some(old.id),
        });
        old
    }

    /// Atomically replaces `array[index]` by `value` if it equals `expected`; returns a fresh
    /// variable holding the previous value (equal to `expected` exactly when it replaced).
    pub fn compare_exchange(
        &mut self,
        array: impl Into<Array>,
        index: impl Into<Expr>,
        expected: impl Into<Expr>,
        value: impl Into<Expr>,
    ) -> Var {
        let array = array.into();
        let old = self.local(self.elem_or_u32(array));
        self.push(Stmt::CompareExchange {
            array,
            index: index.into(),
            expected: expected.into(),
            value: value.into(),
            old: old.id,
        });
        old
    }

    /// The element type of `array`; `u32` for an undeclared one, which `build` rejects.
    fn elem_or_u32(&self, array: Array) -> ElemType {
        self.def.elem_of(array).unwrap_or(ElemType::U32)
    }

    /// `workgroup_barrier`: see the memory model in the IR's module doc.
    pub fn workgroup_barrier(&mut self) {
        self.push(Stmt::Barrier);
    }

    /// `while cond { body }`.
    pub fn while_(&mut self, cond: Expr, body: impl FnOnce(&mut Self)) {
        let body = self.block(body);
        self.push(Stmt::While { cond, body });
    }

    /// Leaves the innermost loop.
    pub fn break_(&mut self) {
        self.push(Stmt::Break);
    }

    /// Ends the innermost loop's iteration.
    pub fn continue_(&mut self) {
        self.push(Stmt::Continue);
    }

    /// `if cond { then_body }`.
    pub fn if_(&mut self, cond: Expr, then_body: impl FnOnce(&mut Self)) {
        self.if_else(cond, then_body, |_| {});
    }

    /// `if cond { then_body } else { else_body }`.
    pub fn if_else(
        &mut self,
        cond: Expr,
        then_body: impl FnOnce(&mut Self),
        else_body: impl FnOnce(&mut Self),
    ) {
        let then_body = self.block(then_body);
        let else_body = self.block(else_body);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
    }

    /// `for i in start..end { body(i) }` with a fresh loop variable of type `elem`.
    pub fn for_range(
        &mut self,
        elem: ElemType,
        start: impl Into<Expr>,
        end: impl Into<Expr>,
        body: impl FnOnce(&mut Self, Expr),
    ) {
        self.def.locals.push(elem);
        let var = VarId(self.def.locals.len() as u32 - 1);
        let body = self.block(|k| body(k, Expr::Var(var)));
        self.push(Stmt::For {
            var,
            start: start.into(),
            end: end.into(),
            body,
        });
    }

    /// Validates and returns the kernel.
    pub fn build(mut self) -> Result<KernelDef, KernelError> {
        debug_assert_eq!(self.blocks.len(), 1, "closures close every nested block");
        self.def.body = self.blocks.pop().unwrap_or_default();
        validate(&self.def)?;
        Ok(self.def)
    }
}

impl From<u32> for Expr {
    fn from(v: u32) -> Self {
        Expr::Lit(Scalar::U32(v))
    }
}

impl From<i32> for Expr {
    fn from(v: i32) -> Self {
        Expr::Lit(Scalar::I32(v))
    }
}

impl From<f32> for Expr {
    fn from(v: f32) -> Self {
        Expr::Lit(Scalar::F32(v))
    }
}

impl From<bool> for Expr {
    fn from(v: bool) -> Self {
        Expr::Bool(v)
    }
}

impl From<Var> for Expr {
    fn from(v: Var) -> Self {
        v.get()
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: impl Into<Expr>) -> Expr {
    Expr::Binary {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs.into()),
    }
}

fn cmp(op: CmpOp, lhs: Expr, rhs: impl Into<Expr>) -> Expr {
    Expr::Cmp {
        op,
        lhs: Box::new(lhs),
        rhs: Box::new(rhs.into()),
    }
}

macro_rules! arith_ops {
    ($($trait:ident $method:ident $op:ident),*) => {$(
        impl<R: Into<Expr>> ops::$trait<R> for Expr {
            type Output = Expr;
            fn $method(self, rhs: R) -> Expr {
                binary(BinOp::$op, self, rhs)
            }
        }
    )*};
}

fn unary(op: UnaryOp, value: Expr) -> Expr {
    Expr::Unary {
        op,
        value: Box::new(value),
    }
}

macro_rules! unary_fns {
    ($($(#[$doc:meta])* $method:ident $op:ident),*) => {
        impl Expr {$(
            $(#[$doc])*
            pub fn $method(self) -> Expr {
                unary(UnaryOp::$op, self)
            }
        )*}
    };
}

unary_fns!(
    /// `|self|` (any numeric type; `abs(i32::MIN)` is `i32::MIN`).
    abs Abs,
    /// The largest integer not greater than `self` (`f32`).
    floor Floor,
    /// The smallest integer not less than `self` (`f32`).
    ceil Ceil,
    /// The square root (`f32`).
    sqrt Sqrt,
    /// `1 / sqrt(self)`.
    rsqrt InverseSqrt,
    /// `e` to the power `self` (`f32`).
    exp Exp,
    /// The natural logarithm.
    log Log,
    /// The hyperbolic tangent (`f32`).
    tanh Tanh,
    /// The sine, in radians (`f32`).
    sin Sin,
    /// The cosine, in radians (`f32`).
    cos Cos
);

arith_ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Rem,
    BitAnd bitand BitAnd, BitOr bitor BitOr, BitXor bitxor BitXor, Shl shl Shl, Shr shr Shr);

impl ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::Neg(Box::new(self))
    }
}

impl ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::Not(Box::new(self))
    }
}

impl Expr {
    /// `self < rhs` (signed for `i32`).
    pub fn lt(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Lt, self, rhs)
    }
    /// `self <= rhs`.
    pub fn le(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Le, self, rhs)
    }
    /// `self > rhs`.
    pub fn gt(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Gt, self, rhs)
    }
    /// `self >= rhs`.
    pub fn ge(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Ge, self, rhs)
    }
    /// `self == rhs` (false for NaN).
    pub fn equals(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Eq, self, rhs)
    }
    /// `self != rhs` (true for NaN).
    pub fn not_equals(self, rhs: impl Into<Expr>) -> Expr {
        cmp(CmpOp::Ne, self, rhs)
    }
    /// The smaller of `self` and `rhs`; for `f32`, a NaN yields the other operand.
    pub fn min(self, rhs: impl Into<Expr>) -> Expr {
        binary(BinOp::Min, self, rhs)
    }
    /// The larger of `self` and `rhs`; for `f32`, a NaN yields the other operand.
    pub fn max(self, rhs: impl Into<Expr>) -> Expr {
        binary(BinOp::Max, self, rhs)
    }
    /// `self` to the power `rhs` (`f32`).
    pub fn pow(self, rhs: impl Into<Expr>) -> Expr {
        binary(BinOp::Pow, self, rhs)
    }
    /// `self * b + c` (`f32`), rounded once or twice.
    pub fn fma(self, b: impl Into<Expr>, c: impl Into<Expr>) -> Expr {
        Expr::Fma {
            a: Box::new(self),
            b: Box::new(b.into()),
            c: Box::new(c.into()),
        }
    }
    /// `self && rhs`, short-circuiting: `rhs` is evaluated only where `self` holds.
    pub fn and(self, rhs: impl Into<Expr>) -> Expr {
        Expr::Logic {
            op: LogicOp::And,
            lhs: Box::new(self),
            rhs: Box::new(rhs.into()),
        }
    }
    /// `self || rhs`, short-circuiting: `rhs` is evaluated only where `self` does not hold.
    pub fn or(self, rhs: impl Into<Expr>) -> Expr {
        Expr::Logic {
            op: LogicOp::Or,
            lhs: Box::new(self),
            rhs: Box::new(rhs.into()),
        }
    }
    /// Converts `self` to `to` (float to integer saturates, NaN gives 0; see [`Expr::Cast`]).
    pub fn cast(self, to: ElemType) -> Expr {
        Expr::Cast {
            to,
            value: Box::new(self),
        }
    }
    /// `if self { if_true } else { if_false }` as an expression; both sides are evaluated.
    pub fn select(self, if_true: impl Into<Expr>, if_false: impl Into<Expr>) -> Expr {
        Expr::Select {
            cond: Box::new(self),
            if_true: Box::new(if_true.into()),
            if_false: Box::new(if_false.into()),
        }
    }
}
