//! [`Value`]: the `Copy` handle kernels are written with, and its operators.

use std::marker::PhantomData;
use std::ops;

use super::arena::{BuilderId, Node, record};
use crate::kernel::ir::{Array, BinOp, BitFn, Builtin, CmpOp, ElemType, LogicOp, Scalar, UnaryOp};

/// An expression of a kernel under construction: a `Copy` handle, so a value is used as often
/// as the maths uses it, with no `.clone()`.
///
/// Literals and builtins are values of every kernel; any other value is a node recorded by
/// one [`KernelBuilder`](super::KernelBuilder) and may be used only in that builder's
/// kernel: elsewhere, [`build`](super::KernelBuilder::build) fails with
/// [`KernelError::ForeignValue`](crate::kernel::KernelError::ForeignValue). Operators and
/// methods only record a node; types are checked when the kernel is built. Not `Send`: a
/// value lives on its builder's thread.
///
/// ```
/// use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
///
/// let mut k = KernelBuilder::new("axpy", [64, 1, 1]);
/// let x = k.binding(ElemType::F32, Access::Read);
/// let y = k.binding(ElemType::F32, Access::ReadWrite);
/// let a = k.param(ElemType::F32);
/// let i = k.global_id(Axis::X);
/// k.if_(i.lt(y.len()), |k| k.store(y, i, a * x.load(i) + y.load(i)));
/// assert!(k.build().is_ok());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Value {
    repr: Repr,
    _thread: PhantomData<*const ()>,
}

/// What a [`Value`] holds.
#[derive(Clone, Copy, Debug)]
pub(super) enum Repr {
    Lit(Scalar),
    Bool(bool),
    Builtin(Builtin),
    /// Node `index` of builder `owner`'s arena.
    Node {
        owner: BuilderId,
        index: u32,
    },
    /// An operation made while its builder (`None`: any builder) was not open: no kernel
    /// takes it.
    Stray(Option<BuilderId>),
}

impl Value {
    pub(super) fn new(repr: Repr) -> Self {
        Self {
            repr,
            _thread: PhantomData,
        }
    }

    pub(super) fn repr(self) -> Repr {
        self.repr
    }

    pub(super) fn builtin(builtin: Builtin) -> Self {
        Self::new(Repr::Builtin(builtin))
    }

    /// The builder whose arena holds this value, if any.
    fn home(self) -> Option<BuilderId> {
        match self.repr {
            Repr::Node { owner, .. } | Repr::Stray(Some(owner)) => Some(owner),
            Repr::Lit(_) | Repr::Bool(_) | Repr::Builtin(_) | Repr::Stray(None) => None,
        }
    }

    /// Records `node` over `operands` in their builder's arena.
    fn node(node: Node, operands: &[Value]) -> Value {
        record(node, operands.iter().find_map(|v| v.home()))
    }

    /// `self op rhs` for any arithmetic or bitwise operator, for generators that pick `op`.
    pub fn binary(self, op: BinOp, rhs: impl Into<Value>) -> Value {
        let rhs = rhs.into();
        Self::node(Node::Binary(op, self, rhs), &[self, rhs])
    }

    /// `self op rhs` for any comparison, for generators that pick `op`.
    pub fn compare(self, op: CmpOp, rhs: impl Into<Value>) -> Value {
        let rhs = rhs.into();
        Self::node(Node::Cmp(op, self, rhs), &[self, rhs])
    }

    /// `op(self)` for any function of one operand, for generators that pick `op`.
    pub fn unary(self, op: UnaryOp) -> Value {
        Self::node(Node::Unary(op, self), &[self])
    }

    fn logic(self, op: LogicOp, rhs: impl Into<Value>) -> Value {
        let rhs = rhs.into();
        Self::node(Node::Logic(op, self, rhs), &[self, rhs])
    }

    /// `array[index]`, recorded in the builder `owner` of the array.
    pub(super) fn load(owner: BuilderId, array: Array, index: Value) -> Value {
        record(Node::Load(array, index), Some(owner))
    }

    /// A leaf node (parameter, variable, length) of builder `owner`.
    pub(super) fn leaf(owner: BuilderId, node: Node) -> Value {
        record(node, Some(owner))
    }

    /// `self < rhs` (signed for `i32`).
    pub fn lt(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Lt, rhs)
    }
    /// `self <= rhs`.
    pub fn le(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Le, rhs)
    }
    /// `self > rhs`.
    pub fn gt(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Gt, rhs)
    }
    /// `self >= rhs`.
    pub fn ge(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Ge, rhs)
    }
    /// `self == rhs` (false for NaN).
    pub fn equals(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Eq, rhs)
    }
    /// `self != rhs` (true for NaN).
    pub fn not_equals(self, rhs: impl Into<Value>) -> Value {
        self.compare(CmpOp::Ne, rhs)
    }
    /// The smaller of `self` and `rhs`; for `f32`, a NaN yields the other operand.
    pub fn min(self, rhs: impl Into<Value>) -> Value {
        self.binary(BinOp::Min, rhs)
    }
    /// The larger of `self` and `rhs`; for `f32`, a NaN yields the other operand.
    pub fn max(self, rhs: impl Into<Value>) -> Value {
        self.binary(BinOp::Max, rhs)
    }
    /// `self` to the power `rhs` (`f32`).
    pub fn pow(self, rhs: impl Into<Value>) -> Value {
        self.binary(BinOp::Pow, rhs)
    }
    /// The angle of the point (`x`, `self`) in radians, WGSL's `atan2(self, x)` (`f32`).
    pub fn atan2(self, x: impl Into<Value>) -> Value {
        self.binary(BinOp::Atan2, x)
    }
    /// `self * b + c` (`f32`), rounded once or twice.
    pub fn fma(self, b: impl Into<Value>, c: impl Into<Value>) -> Value {
        let (b, c) = (b.into(), c.into());
        Self::node(Node::Fma(self, b, c), &[self, b, c])
    }
    /// `self && rhs`, short-circuiting: `rhs` is evaluated only where `self` holds.
    pub fn and(self, rhs: impl Into<Value>) -> Value {
        self.logic(LogicOp::And, rhs)
    }
    /// `self || rhs`, short-circuiting: `rhs` is evaluated only where `self` does not hold.
    pub fn or(self, rhs: impl Into<Value>) -> Value {
        self.logic(LogicOp::Or, rhs)
    }
    /// Converts `self` to `to` (float to integer saturates, NaN gives 0; see
    /// [`Expr::Cast`](crate::kernel::Expr::Cast)).
    pub fn cast(self, to: ElemType) -> Value {
        Self::node(Node::Cast(to, self), &[self])
    }
    /// `self`'s bits as `to`, a type of the same size (see
    /// [`Expr::Bitcast`](crate::kernel::Expr::Bitcast)).
    pub fn bitcast(self, to: ElemType) -> Value {
        Self::node(Node::Bitcast(to, self), &[self])
    }
    /// `op` of `self`'s bits (`u32` or `i32`; see [`BitFn`](crate::kernel::BitFn)).
    pub fn bits(self, op: BitFn) -> Value {
        Self::node(Node::Bits(op, self), &[self])
    }
    /// `if self { if_true } else { if_false }` as an expression; both sides are evaluated.
    pub fn select(self, if_true: impl Into<Value>, if_false: impl Into<Value>) -> Value {
        let (t, f) = (if_true.into(), if_false.into());
        Self::node(Node::Select(self, t, f), &[self, t, f])
    }
}

macro_rules! unary_fns {
    ($($(#[$doc:meta])* $method:ident $op:ident),*) => {
        impl Value {$(
            $(#[$doc])*
            pub fn $method(self) -> Value {
                self.unary(UnaryOp::$op)
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
    cos Cos,
    /// The integer part, toward zero (`f32`).
    trunc Trunc,
    /// The nearest integer, halves to even (`f32`).
    round Round,
    /// The tangent, in radians (`f32`).
    tan Tan,
    /// The hyperbolic sine (`f32`).
    sinh Sinh,
    /// The hyperbolic cosine (`f32`).
    cosh Cosh,
    /// The arcsine, in radians (`f32`).
    asin Asin,
    /// The arccosine, in radians (`f32`).
    acos Acos,
    /// The arctangent, in radians (`f32`).
    atan Atan,
    /// The inverse hyperbolic sine (`f32`).
    asinh Asinh,
    /// The inverse hyperbolic cosine (`f32`).
    acosh Acosh,
    /// The inverse hyperbolic tangent (`f32`).
    atanh Atanh
);

/// `value op rhs` for a value, and `literal op value` for the literal types in `$lit`.
macro_rules! binary_ops {
    ($($trait:ident $method:ident $op:ident [$($lit:ty),*]),* $(,)?) => {$(
        impl<R: Into<Value>> ops::$trait<R> for Value {
            type Output = Value;
            fn $method(self, rhs: R) -> Value {
                self.binary(BinOp::$op, rhs)
            }
        }
        $(
            impl ops::$trait<Value> for $lit {
                type Output = Value;
                fn $method(self, rhs: Value) -> Value {
                    Value::from(self).binary(BinOp::$op, rhs)
                }
            }
        )*
    )*};
}

binary_ops!(
    Add add Add [u32, i32, f32],
    Sub sub Sub [u32, i32, f32],
    Mul mul Mul [u32, i32, f32],
    Div div Div [u32, i32, f32],
    Rem rem Rem [u32, i32, f32],
    BitAnd bitand BitAnd [u32, i32],
    BitOr bitor BitOr [u32, i32],
    BitXor bitxor BitXor [u32, i32],
    Shl shl Shl [u32, i32],
    Shr shr Shr [u32, i32],
);

impl ops::Neg for Value {
    type Output = Value;
    fn neg(self) -> Value {
        Self::node(Node::Neg(self), &[self])
    }
}

impl ops::Not for Value {
    type Output = Value;
    fn not(self) -> Value {
        Self::node(Node::Not(self), &[self])
    }
}

impl From<Scalar> for Value {
    fn from(v: Scalar) -> Self {
        Value::new(Repr::Lit(v))
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Scalar::U32(v).into()
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Scalar::I32(v).into()
    }
}

impl From<f32> for Value {
    fn from(v: f32) -> Self {
        Scalar::F32(v).into()
    }
}

impl From<half::f16> for Value {
    fn from(v: half::f16) -> Self {
        Scalar::F16(v).into()
    }
}

impl From<half::bf16> for Value {
    fn from(v: half::bf16) -> Self {
        Scalar::BF16(v).into()
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::new(Repr::Bool(v))
    }
}
