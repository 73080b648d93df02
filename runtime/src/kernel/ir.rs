//! The kernel IR: a small typed tree that every device lowers (the simulator interprets it,
//! wgpu emits WGSL, CUDA emits CUDA C).
//!
//! Semantics every lowering must honour, so that one kernel computes the same bits everywhere:
//! - Integer arithmetic wraps. Integer division or remainder by zero yields the left operand
//!   (WGSL's rule), and so does `i32::MIN / -1`.
//! - Shift amounts are taken modulo 32.
//! - A cast from `f32` to an integer saturates and maps NaN to 0 (Rust's `as`).
//! - Every local variable is declared at kernel entry and starts at zero of its type.
//! - Indices into bindings are `u32` element indices. In checked mode an out-of-range access
//!   does not touch memory: a load yields zero, a store or atomic is skipped, and the first
//!   violation of the invocation's stream is written to the fault record (see [`FaultRecord`]).
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingId(pub u32);

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
        binding: BindingId,
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
        binding: BindingId,
        index: Expr,
        value: Expr,
    },
    /// `binding[index] += value`, atomically; integer bindings only.
    AtomicAdd {
        binding: BindingId,
        index: Expr,
        value: Expr,
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
    pub body: Vec<Stmt>,
}

impl KernelDef {
    /// Invocations per workgroup.
    pub fn workgroup_invocations(&self) -> u64 {
        self.workgroup_size.iter().map(|&d| d as u64).product()
    }

    /// The element type of `expr`, an expression of this (validated) kernel; `None` for boolean
    /// expressions. Lowerings use it to pick literal suffixes, helpers and casts.
    pub fn elem_type_of(&self, expr: &Expr) -> Option<ElemType> {
        match expr {
            Expr::Lit(s) => Some(s.elem_type()),
            Expr::Builtin(_) | Expr::Len(_) => Some(ElemType::U32),
            Expr::Param(p) => self.params.get(*p as usize).copied(),
            Expr::Var(v) => self.locals.get(v.0 as usize).copied(),
            Expr::Load { binding, .. } => self.bindings.get(binding.0 as usize).map(|b| b.elem),
            Expr::Binary { lhs, .. } | Expr::Neg(lhs) => self.elem_type_of(lhs),
            Expr::Select { if_true, .. } => self.elem_type_of(if_true),
            Expr::Cast { to, .. } => Some(*to),
            Expr::Bool(_) | Expr::Cmp { .. } | Expr::Logic { .. } | Expr::Not(_) => None,
        }
    }
}
