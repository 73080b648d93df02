//! The kernel IR: a small typed tree that every device lowers (the simulator interprets it,
//! wgpu emits WGSL, CUDA emits CUDA C).
//!
//! Semantics every lowering must honour, so that one kernel computes the same bits everywhere:
//! - Integer arithmetic wraps. Integer division or remainder by zero yields the left operand
//!   (WGSL's rule), and so does `i32::MIN / -1`. `abs(i32::MIN)` is `i32::MIN`.
//! - Shift amounts are taken modulo 32.
//! - A cast from `f32` to an integer saturates and maps NaN to 0 (Rust's `as`).
//! - Every local variable is declared at kernel entry and starts at zero of its type.
//! - Indices into bindings and shared arrays are `u32` element indices. In checked mode an
//!   out-of-range access does not touch memory: a load yields zero, a store or atomic is
//!   skipped (an atomic's old value reads as zero), and the first violation of the
//!   invocation's stream is written to the fault record (see [`FaultRecord`]).
//! - A `while` loop tests its condition before every iteration; `break` and `continue` act on
//!   the innermost `while` or `for`, and `continue` in a `for` still advances its counter.
//!
//! # Floating-point accuracy
//!
//! `+`, `-`, `*`, `min`, `max`, `abs`, `floor`, `ceil`, comparisons and casts are exact (or
//! correctly rounded) on every device: their bits are the reference semantics'. The
//! transcendental functions are not: each device may return any value within the bound the
//! WGSL specification states for it (§ "Floating Point Accuracy", `f32`), which
//! [`accuracy`](crate::kernel::accuracy) computes and the conformance suite checks:
//!
//! | function | bound |
//! |---|---|
//! | `exp(x)` | 3 + 2·\|x\| ULP |
//! | `log(x)` | absolute error < 2⁻²¹ for x in [0.5, 2]; 3 ULP elsewhere (x > 0) |
//! | `inverse_sqrt(x)` | 2 ULP (x > 0) |
//! | `sqrt(x)` | inherited from `1.0 / inverse_sqrt(x)` (x > 0; `sqrt(0)` is 0) |
//! | `pow(x, y)` | inherited from `exp2(y * log2(x))` (x > 0) |
//! | `tanh(x)` | inherited from `sinh(x) / cosh(x)`, themselves from `(exp(x) ∓ exp(-x)) * 0.5` |
//! | `sin(x)`, `cos(x)` | absolute error ≤ 2⁻¹¹ for x in [-π, π]; unbounded outside |
//! | `fma(a, b, c)` | inherited from `a * b + c`: fused or not (one rounding or two) |
//! | `x / y` | 2.5 ULP for \|y\| in [2⁻¹²⁶, 2¹²⁶] |
//!
//! "Inherited" means the error of evaluating that expression with each operation within its
//! own bound. Outside a function's domain (`log` of a negative number, …) the result is
//! unspecified. CUDA's documented bounds are tighter than these, and the simulator rounds the
//! `f64` result of a portable `libm` to `f32` (within 1 ULP, and the same bits on every host),
//! so bit-exact comparison across devices holds only for the exact operations.
//!
//! A kernel built from these inherits their bounds: with `u = 2⁻²⁴`, each `f32` operation
//! above that is correctly rounded adds at most `u` relative error (a fused `fma` only removes
//! a rounding), and the inexact ones add their table's bound. The conformance suite's real
//! kernels (`lockstep_conformance::ops`: softmax, layer norm, matrix products) derive their
//! tolerances this way, each stating its derivation; a kernel of exact operations only (a sum
//! in a fixed order, an argmax) gives the same bits on every device.
//!
//! # Memory model
//!
//! A launch runs workgroups of invocations. Memory is the bindings (global, shared by every
//! invocation of the launch) and the workgroup-shared arrays (one copy per workgroup).
//! - Each invocation performs its own accesses in program order.
//! - `workgroup_barrier` is a control and memory barrier: no invocation of a workgroup passes
//!   it before every invocation of that workgroup has reached it, and every access (shared or
//!   global) an invocation of the workgroup made before it happens before every access an
//!   invocation of the same workgroup makes after it. It must be reached in uniform control
//!   flow: by every invocation of the workgroup, the same number of times. The validator
//!   rejects a barrier whose control flow depends on the invocation id; one that diverges on
//!   data is reported by the simulator.
//! - Nothing orders the invocations of different workgroups of one launch; launches are
//!   ordered by the stream rules (see `Device`).
//! - Atomics (`add`, `min`, `max`, `exchange`, `compare_exchange`, on `u32` and `i32`) are
//!   indivisible read-modify-writes of one word that return its previous value; they are
//!   relaxed: they order no other access.
//! - A **race** is two accesses to the same word by different invocations of one launch, at
//!   least one of them a write (a store or an atomic), not both atomic, and not ordered by a
//!   barrier (different workgroups, or the same workgroup between the same two barriers). A
//!   kernel with a race has no defined result: devices, and runs of one device, may differ.
//! - Shared arrays start undefined in every workgroup (CUDA does not clear them): a read of
//!   a word that no invocation of the workgroup wrote before it (ordered by a barrier, or by
//!   program order for its own writes) yields an unspecified value.
//!
//! [`FaultRecord`]: crate::kernel::FaultRecord

use std::fmt;

/// Element type of a binding, a parameter or an expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    U32,
    I32,
    F32,
}

impl ElemType {
    /// Size of one element in device memory.
    pub const fn size_bytes(self) -> usize {
        4
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElemType::U32 => "u32",
            ElemType::I32 => "i32",
            ElemType::F32 => "f32",
        })
    }
}

/// Type of an IR expression: an element type or a boolean (conditions only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Elem(ElemType),
    Bool,
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Elem(e) => e.fmt(f),
            Ty::Bool => f.write_str("bool"),
        }
    }
}

/// A scalar value: a literal, a launch parameter, or an interpreted value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    U32(u32),
    I32(i32),
    F32(f32),
}

impl Scalar {
    pub fn elem_type(self) -> ElemType {
        match self {
            Scalar::U32(_) => ElemType::U32,
            Scalar::I32(_) => ElemType::I32,
            Scalar::F32(_) => ElemType::F32,
        }
    }

    /// The value's bit pattern as stored in device memory (little endian).
    pub fn to_bits(self) -> u32 {
        match self {
            Scalar::U32(v) => v,
            Scalar::I32(v) => v as u32,
            Scalar::F32(v) => v.to_bits(),
        }
    }

    /// Reinterprets a stored bit pattern as a value of `elem`.
    pub fn from_bits(elem: ElemType, bits: u32) -> Self {
        match elem {
            ElemType::U32 => Scalar::U32(bits),
            ElemType::I32 => Scalar::I32(bits as i32),
            ElemType::F32 => Scalar::F32(f32::from_bits(bits)),
        }
    }
}

/// Whether a kernel may write a binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    ReadWrite,
}

/// One buffer argument of a kernel: an array of `elem`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingDecl {
    pub elem: ElemType,
    pub access: Access,
}

/// Index of a binding in [`KernelDef::bindings`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindingId(pub u32);

/// Index of a workgroup-shared array in [`KernelDef::shared`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedId(pub u32);

/// A workgroup-shared array: `len` elements of `elem`, one copy per workgroup, undefined at
/// the start of every workgroup (see the memory model in the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SharedDecl {
    pub elem: ElemType,
    pub len: u32,
}

/// An array a kernel indexes: one of its bindings or one of its shared arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Array {
    Binding(BindingId),
    Shared(SharedId),
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Array::Binding(b) => write!(f, "binding {}", b.0),
            Array::Shared(s) => write!(f, "shared array {}", s.0),
        }
    }
}

/// Index of a local variable in [`KernelDef::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    X,
    Y,
    Z,
}

impl Axis {
    pub const fn index(self) -> usize {
        match self {
            Axis::X => 0,
            Axis::Y => 1,
            Axis::Z => 2,
        }
    }
}

/// Values that identify the running invocation. All are `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `workgroup_id * workgroup_size + local_id`.
    GlobalId(Axis),
    LocalId(Axis),
    WorkgroupId(Axis),
    NumWorkgroups(Axis),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    /// Integers only.
    BitAnd,
    /// Integers only.
    BitOr,
    /// Integers only.
    BitXor,
    /// Integers only; the amount is taken modulo 32.
    Shl,
    /// Integers only; arithmetic for `i32`; the amount is taken modulo 32.
    Shr,
    /// `f32` only: `lhs` to the power `rhs` (see the accuracy table in the module doc).
    Pow,
}

/// A function of one operand. `Abs` takes any numeric type; the others take `f32` and are
/// accurate as the module doc's table states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Abs,
    Floor,
    Ceil,
    Sqrt,
    InverseSqrt,
    Exp,
    Log,
    Tanh,
    Sin,
    Cos,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 10] = [
        UnaryOp::Abs,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Sqrt,
        UnaryOp::InverseSqrt,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Sin,
        UnaryOp::Cos,
    ];

    /// The function's name, as WGSL spells it.
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Abs => "abs",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::InverseSqrt => "inverseSqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
        }
    }
}

/// A read-modify-write an atomic statement applies; see the memory model in the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AtomicOp {
    /// Wrapping addition.
    Add,
    Min,
    Max,
    /// Stores the operand.
    Exchange,
}

impl AtomicOp {
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::Exchange => "exchange",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogicOp {
    And,
    Or,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Lit(Scalar),
    Bool(bool),
    Builtin(Builtin),
    /// A launch parameter, by index into [`KernelDef::params`].
    Param(u32),
    Var(VarId),
    /// Number of elements in a binding (`u32`).
    Len(BindingId),
    Load {
        array: Array,
        index: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Cmp {
        op: CmpOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Logic {
        op: LogicOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Not(Box<Expr>),
    /// Arithmetic negation (`i32`, `f32`; wraps for `i32`).
    Neg(Box<Expr>),
    Unary {
        op: UnaryOp,
        value: Box<Expr>,
    },
    /// `a * b + c` on `f32`, rounded once or twice (see the module doc).
    Fma {
        a: Box<Expr>,
        b: Box<Expr>,
        c: Box<Expr>,
    },
    Select {
        cond: Box<Expr>,
        if_true: Box<Expr>,
        if_false: Box<Expr>,
    },
    Cast {
        to: ElemType,
        value: Box<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    Assign {
        var: VarId,
        value: Expr,
    },
    Store {
        array: Array,
        index: Expr,
        value: Expr,
    },
    /// `array[index] = op(array[index], value)`, atomically, on a `u32` or `i32` array; the
    /// previous value goes to `old` when given.
    Atomic {
        op: AtomicOp,
        array: Array,
        index: Expr,
        value: Expr,
        old: Option<VarId>,
    },
    /// Atomically: `old = array[index]; if old == expected { array[index] = value }`, on a
    /// `u32` or `i32` array (a strong compare-and-swap: it never fails spuriously).
    CompareExchange {
        array: Array,
        index: Expr,
        expected: Expr,
        value: Expr,
        old: VarId,
    },
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
    },
    /// `for var in start..end` (step 1); `var` is an integer local, `start`/`end` are evaluated
    /// once, before the first iteration.
    For {
        var: VarId,
        start: Expr,
        end: Expr,
        body: Vec<Stmt>,
    },
    /// Runs `body` while `cond` holds, testing it before every iteration.
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// Leaves the innermost loop.
    Break,
    /// Ends the innermost loop's iteration (a `for` then advances its counter).
    Continue,
    /// `workgroup_barrier`: see the memory model in the module doc.
    Barrier,
}

/// A complete kernel. Build one with [`KernelBuilder`](crate::kernel::KernelBuilder), which
/// validates it; a `KernelDef` obtained that way always passes [`validate`](crate::kernel::validate).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelDef {
    pub name: String,
    pub workgroup_size: [u32; 3],
    pub bindings: Vec<BindingDecl>,
    pub params: Vec<ElemType>,
    /// Types of the local variables; all start at zero.
    pub locals: Vec<ElemType>,
    /// Workgroup-shared arrays.
    pub shared: Vec<SharedDecl>,
    pub body: Vec<Stmt>,
}

impl KernelDef {
    /// Invocations per workgroup.
    pub fn workgroup_invocations(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| d as u64).product()
    }

    /// Bytes of workgroup-shared memory one workgroup uses.
    pub fn shared_bytes(&self) -> u64 {
        self.shared
            .iter()
            .map(|s| s.len as u64 * s.elem.size_bytes() as u64)
            .sum()
    }

    /// The element type of `array`, if it is declared.
    pub fn elem_of(&self, array: Array) -> Option<ElemType> {
        match array {
            Array::Binding(b) => self.bindings.get(b.0 as usize).map(|d| d.elem),
            Array::Shared(s) => self.shared.get(s.0 as usize).map(|d| d.elem),
        }
    }

    /// The element type of `expr`, an expression of this (validated) kernel; `None` for boolean
    /// expressions. Lowerings use it to pick literal suffixes, helpers and casts.
    pub fn elem_type_of(&self, expr: &Expr) -> Option<ElemType> {
        match expr {
            Expr::Lit(s) => Some(s.elem_type()),
            Expr::Builtin(_) | Expr::Len(_) => Some(ElemType::U32),
            Expr::Param(p) => self.params.get(*p as usize).copied(),
            Expr::Var(v) => self.locals.get(v.0 as usize).copied(),
            Expr::Load { array, .. } => self.elem_of(*array),
            Expr::Binary { lhs, .. }
            | Expr::Neg(lhs)
            | Expr::Unary { value: lhs, .. }
            | Expr::Fma { a: lhs, .. } => self.elem_type_of(lhs),
            Expr::Select { if_true, .. } => self.elem_type_of(if_true),
            Expr::Cast { to, .. } => Some(*to),
            Expr::Bool(_) | Expr::Cmp { .. } | Expr::Logic { .. } | Expr::Not(_) => None,
        }
    }
}
