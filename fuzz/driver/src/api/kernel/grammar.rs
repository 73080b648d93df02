//! The grammar of drawn kernel bodies: statements and expressions over the declared
//! bindings, parameters, shared arrays and locals. A pick (`u8`) names a declaration modulo
//! their count; where there is none, the lowering substitutes a literal or drops the
//! statement.

use arbitrary::Arbitrary;
use lockstep::kernel::{AtomicOp, Axis, BinOp, CmpOp, ElemType, Scalar, UnaryOp};

/// An element type.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(in crate::api) enum Elem {
    U32,
    I32,
    F32,
    F16,
    BF16,
}

impl Elem {
    pub fn ty(self) -> ElemType {
        match self {
            Elem::U32 => ElemType::U32,
            Elem::I32 => ElemType::I32,
            Elem::F32 => ElemType::F32,
            Elem::F16 => ElemType::F16,
            Elem::BF16 => ElemType::BF16,
        }
    }
}

/// A statement.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum Stmt {
    /// `local = value`, to a local the grammar may assign.
    Assign {
        var: u8,
        value: Expr,
    },
    /// `array[index] = value`, inside `if index < len` when guarded.
    Store {
        array: ArrayPick,
        index: Index,
        value: Expr,
        guarded: bool,
    },
    /// An atomic, its previous value kept in a fresh local when `fetch`.
    Atomic {
        op: AtomicPick,
        array: ArrayPick,
        index: Index,
        value: Expr,
        fetch: bool,
    },
    /// `compare_exchange`, its previous value in a fresh local.
    CompareExchange {
        array: ArrayPick,
        index: Index,
        expected: Expr,
        value: Expr,
    },
    If {
        cond: Cond,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `for i in 0..end` (`i32` when `signed`), `end` at most 4.
    For {
        signed: bool,
        end: LoopEnd,
        body: Vec<Stmt>,
    },
    /// `while cond`, bounded: a hidden counter leaves it after 3 iterations.
    While {
        cond: Cond,
        body: Vec<Stmt>,
    },
    Break,
    Continue,
    Barrier,
    /// `local = value` with a value another builder made: `build` must refuse it.
    Foreign,
}

/// An array: a binding or a shared array, picked modulo their count.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(in crate::api) enum ArrayPick {
    Binding(u8),
    Shared(u8),
}

/// An access's index.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum Index {
    /// `global_id.x`: in range for the invocations a covering grid runs.
    GlobalX,
    /// `local_id.x`.
    LocalX,
    Lit(u8),
    /// Far past any array: out of range.
    Huge,
    /// Any expression, as `u32`.
    Expr(Expr),
}

/// A `for` loop's end.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum LoopEnd {
    /// `n % 5`.
    Lit(u8),
    /// `min(expr, 4)`.
    Expr(Expr),
}

/// A condition.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum Cond {
    Cmp(CmpPick, Expr, Expr),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    Lit(bool),
    /// `local_id.x < n`: differs between the invocations of a workgroup.
    IdBelow(u8),
    /// A number as a condition: a type error, or `value != 0` where the kernel coerces.
    Value(Expr),
}

/// An expression.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum Expr {
    Lit(Lit),
    Builtin(BuiltinPick, AxisPick),
    Param(u8),
    Var(u8),
    Len(u8),
    Load(ArrayPick, Box<Index>),
    Binary(BinPick, Box<Expr>, Box<Expr>),
    Unary(UnaryPick, Box<Expr>),
    Neg(Box<Expr>),
    Cast(Elem, Box<Expr>),
    Select(Box<Cond>, Box<Expr>, Box<Expr>),
    Fma(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// A literal, edge values drawn often.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(in crate::api) enum Lit {
    U32(u32),
    I32(i32),
    F32(u32),
    F16(u16),
    BF16(u16),
    /// Of `elem`: 0, 1, -1, the extremes, NaN, infinity (`which % 7`).
    Edge(Elem, u8),
}

impl Lit {
    pub fn scalar(self) -> Scalar {
        match self {
            Lit::U32(v) => Scalar::U32(v),
            Lit::I32(v) => Scalar::I32(v),
            Lit::F32(bits) => Scalar::F32(f32::from_bits(bits)),
            Lit::F16(bits) => Scalar::F16(lockstep::half::f16::from_bits(bits)),
            Lit::BF16(bits) => Scalar::BF16(lockstep::half::bf16::from_bits(bits)),
            Lit::Edge(elem, which) => edge(elem.ty(), which % 7),
        }
    }
}

/// Edge value `which` of `elem`: 0, 1, all ones (-1), the largest, the smallest, NaN (or the
/// sign bit), infinity (or 2^31).
fn edge(elem: ElemType, which: u8) -> Scalar {
    let f = |v: f32| match elem {
        ElemType::F16 => Scalar::F16(lockstep::half::f16::from_f32(v)),
        ElemType::BF16 => Scalar::BF16(lockstep::half::bf16::from_f32(v)),
        _ => Scalar::F32(v),
    };
    let table_int = [0u32, 1, u32::MAX, i32::MAX as u32, 1 << 31, 31, 32];
    let table_float = [0.0, 1.0, -1.0, f32::MAX, f32::MIN, f32::NAN, f32::INFINITY];
    match elem {
        ElemType::U32 | ElemType::I32 => Scalar::from_bits(elem, table_int[which as usize]),
        _ => f(table_float[which as usize]),
    }
}

macro_rules! picks {
    ($($(#[$doc:meta])* $name:ident => $target:ident [$($variant:ident),*];)*) => {$(
        $(#[$doc])*
        #[derive(Arbitrary, Debug, Clone, Copy)]
        pub(in crate::api) enum $name { $($variant),* }

        impl $name {
            pub fn op(self) -> $target {
                match self { $($name::$variant => $target::$variant),* }
            }
        }
    )*};
}

picks! {
    /// A binary operator.
    BinPick => BinOp [Add, Sub, Mul, Div, Rem, Min, Max, BitAnd, BitOr, BitXor, Shl, Shr, Pow];
    /// A function of one operand.
    UnaryPick => UnaryOp [Abs, Floor, Ceil, Sqrt, InverseSqrt, Exp, Log, Tanh, Sin, Cos];
    /// A comparison.
    CmpPick => CmpOp [Eq, Ne, Lt, Le, Gt, Ge];
    /// An atomic operation.
    AtomicPick => AtomicOp [Add, Min, Max, Exchange];
    /// An axis.
    AxisPick => Axis [X, Y, Z];
}

/// A builtin.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(in crate::api) enum BuiltinPick {
    GlobalId,
    LocalId,
    WorkgroupId,
    NumWorkgroups,
}
