//! The kernel IR: a small typed tree that every device lowers (the simulator interprets it,
//! wgpu emits WGSL, CUDA emits CUDA C).
//!
//! Semantics every lowering must honour, so that one kernel computes the same bits everywhere:
//! - Integer arithmetic wraps. As in WGSL, integer division by zero yields the left operand,
//!   and so does `i32::MIN / -1`; the remainder of either is 0. `abs(i32::MIN)` is `i32::MIN`.
//! - Shift amounts are taken modulo 32.
//! - A cast from `f32` to an integer saturates and maps NaN to 0 (Rust's `as`).
//! - Every local variable and every element of a local array is declared at kernel entry and
//!   starts at zero of its type.
//! - Indices into bindings, shared and local arrays are `u32` element indices. In checked mode an
//!   out-of-range access does not touch memory: a load yields zero, a store or atomic is
//!   skipped (an atomic's old value reads as zero), and the first violation of the
//!   invocation's stream is written to the fault record (see [`FaultRecord`]).
//! - A `while` loop tests its condition before every iteration; `break` and `continue` act on
//!   the innermost `while` or `for`, and `continue` in a `for` still advances its counter.
//!
//! # Half floats
//!
//! `f16` (IEEE 754 binary16) and `bf16` (bfloat16: `f32`'s exponent, 8 significant bits) are
//! storage and arithmetic types on devices that declare them ([`Features::f16`],
//! [`Features::bf16`]; a kernel that uses one is refused on a device without it,
//! [`KernelError::UnsupportedType`]). Their elements are 2 bytes in device memory (two
//! elements of one 4-byte word are distinct locations for the memory model below); they take
//! every float operation and function, but not atomics or loop counters.
//! - Every operation computes in `f32` and rounds the result once to the type, to nearest even
//!   (`half::f16::from_f32`, `half::bf16::from_f32`). For `+`, `-`, `*`, `/` and `min`/`max`
//!   that is the correctly rounded result of the operation in the type itself: `f32` carries
//!   more than twice their precision (24 bits against 11 and 8), so rounding twice cannot
//!   differ from rounding once. Comparisons compare the exact values; `-x` and `abs` change the
//!   sign bit only.
//! - A cast from a half float to another type goes through its exact `f32` value (to integers:
//!   saturating, NaN to 0, as from `f32`); a cast to a half float rounds the `f32` value, so an
//!   integer converts through `f32` (rounding twice; for `f16` the same as once, since integers
//!   that `f32` rounds lie beyond `f16`'s range).
//! - The transcendental functions are bounded as the table below states, in units of the
//!   half type's ULP (WGSL's bounds for `f16`); a device may compute them in `f32` and round.
//! - A NaN result is a NaN, but its sign and payload bits may differ across devices (a NaN an
//!   operation computes: loads, stores and `Bitcast` keep every bit).
//! - The bit functions ([`BitFn`]) are WGSL's, exact: `countLeadingZeros(0)` and
//!   `countTrailingZeros(0)` are 32, `firstTrailingBit(0)` and `firstLeadingBit(0)` all ones.
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
//! | `tan(x)` | inherited from `sin(x) / cos(x)` |
//! | `sinh(x)`, `cosh(x)` | inherited from `(exp(x) ∓ exp(-x)) * 0.5` |
//! | `atan(x)`, `atan2(y, x)` | 4096 ULP (`atan2(0, 0)` unbounded) |
//! | `asin(x)`, `acos(x)` | inherited from `atan2(x, sqrt(1 - x * x))`, `atan2(sqrt(1 - x * x), x)` |
//! | `asinh(x)`, `acosh(x)` | inherited from `log(x ± sqrt(x * x ± 1))` |
//! | `atanh(x)` | inherited from `log((1 + x) / (1 - x)) * 0.5` |
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
//! kernels (`lockstep_kernels::ops`: softmax, layer norm, matrix products) derive their
//! tolerances this way, each stating its derivation; a kernel of exact operations only (a sum
//! in a fixed order, an argmax) gives the same bits on every device.
//!
//! # Memory model
//!
//! A launch runs workgroups of invocations. Memory is the bindings (global, shared by every
//! invocation of the launch), the workgroup-shared arrays (one copy per workgroup) and the
//! local arrays (one copy per invocation, which only it accesses: they take part in no race).
//! - Each invocation performs its own accesses in program order.
//! - `workgroup_barrier` is a control and memory barrier: no invocation of a workgroup passes
//!   it before every invocation of that workgroup has reached it, and every access (shared or
//!   global) an invocation of the workgroup made before it happens before every access an
//!   invocation of the same workgroup makes after it. It must be reached in uniform control
//!   flow: by every invocation of the workgroup, the same number of times. The validator
//!   rejects a barrier whose control flow depends on the invocation id; one that diverges on
//!   data is reported by the simulator. An invocation that ended early (`Stmt::Return`)
//!   counts as arrived at every barrier the others reach after it, so a `return` under any
//!   condition leaves later barriers uniform among the invocations still running (CUDA's rule
//!   for exited threads); one that reached the end of the kernel does not.
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
//! [`Features::f16`]: crate::Features::f16
//! [`Features::bf16`]: crate::Features::bf16
//! [`KernelError::UnsupportedType`]: crate::kernel::KernelError::UnsupportedType

use std::fmt;

/// Element type of a binding, a parameter or an expression.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// 32-bit unsigned integer.
    U32,
    /// 32-bit two's-complement signed integer.
    I32,
    /// 32-bit IEEE 754 float.
    F32,
    /// 16-bit IEEE 754 float (binary16), where the device declares
    /// [`Features::f16`](crate::Features::f16); see "Half floats" in the module doc.
    F16,
    /// bfloat16 (`f32`'s sign and exponent, 7 stored fraction bits), where the device declares
    /// [`Features::bf16`](crate::Features::bf16); see "Half floats" in the module doc.
    BF16,
}

impl ElemType {
    /// Every element type, in declaration order.
    pub const ALL: [ElemType; 5] = [
        ElemType::U32,
        ElemType::I32,
        ElemType::F32,
        ElemType::F16,
        ElemType::BF16,
    ];

    /// Size of one element in device memory, in bytes: 4, or 2 for the half floats.
    pub const fn size_bytes(self) -> usize {
        match self {
            ElemType::U32 | ElemType::I32 | ElemType::F32 => 4,
            ElemType::F16 | ElemType::BF16 => 2,
        }
    }

    /// Whether the type is a float (`f32`, `f16`, `bf16`).
    pub const fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F16 | ElemType::BF16)
    }

    /// Whether the type is a 16-bit float (`f16`, `bf16`), which a device supports only when
    /// its [`Features`](crate::Features) say so.
    pub const fn is_half(self) -> bool {
        matches!(self, ElemType::F16 | ElemType::BF16)
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElemType::U32 => "u32",
            ElemType::I32 => "i32",
            ElemType::F32 => "f32",
            ElemType::F16 => "f16",
            ElemType::BF16 => "bf16",
        })
    }
}

/// Type of an IR expression: an element type or a boolean (conditions only).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum Ty {
    /// A numeric element type.
    Elem(ElemType),
    /// A boolean: the type of comparisons and logic, usable only as a condition (never stored).
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
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub enum Scalar {
    /// A `u32` value.
    U32(u32),
    /// An `i32` value.
    I32(i32),
    /// An `f32` value.
    F32(f32),
    /// An `f16` value.
    F16(half::f16),
    /// A `bf16` value.
    BF16(half::bf16),
}

impl Scalar {
    /// The element type the value belongs to.
    pub fn elem_type(self) -> ElemType {
        match self {
            Scalar::U32(_) => ElemType::U32,
            Scalar::I32(_) => ElemType::I32,
            Scalar::F32(_) => ElemType::F32,
            Scalar::F16(_) => ElemType::F16,
            Scalar::BF16(_) => ElemType::BF16,
        }
    }

    /// The value's bit pattern as stored in device memory (little endian); a half float's 16
    /// bits are the low half.
    pub fn to_bits(self) -> u32 {
        match self {
            Scalar::U32(v) => v,
            Scalar::I32(v) => v as u32,
            Scalar::F32(v) => v.to_bits(),
            Scalar::F16(v) => v.to_bits() as u32,
            Scalar::BF16(v) => v.to_bits() as u32,
        }
    }

    /// Reinterprets a stored bit pattern as a value of `elem` (a half float takes the low 16
    /// bits).
    pub fn from_bits(elem: ElemType, bits: u32) -> Self {
        match elem {
            ElemType::U32 => Scalar::U32(bits),
            ElemType::I32 => Scalar::I32(bits as i32),
            ElemType::F32 => Scalar::F32(f32::from_bits(bits)),
            ElemType::F16 => Scalar::F16(half::f16::from_bits(bits as u16)),
            ElemType::BF16 => Scalar::BF16(half::bf16::from_bits(bits as u16)),
        }
    }

    /// The value's little-endian bytes as stored in device memory
    /// ([`ElemType::size_bytes`] of them).
    pub fn to_le_bytes(self) -> Vec<u8> {
        let bytes = self.to_bits().to_le_bytes();
        bytes[..self.elem_type().size_bytes()].to_vec()
    }
}

/// Whether a kernel may write a binding.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum Access {
    /// The kernel only reads the binding; the validator refuses a store or an atomic on it.
    Read,
    /// The kernel may read and write the binding (stores and atomics allowed).
    ReadWrite,
}

/// One buffer argument of a kernel: an array of `elem`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub struct BindingDecl {
    /// Type of every element of the array.
    pub elem: ElemType,
    /// Whether the kernel may write the array.
    pub access: Access,
}

/// Index of a binding in [`KernelDef::bindings`].
#[derive(
    Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub struct BindingId(pub u32);

/// Index of a workgroup-shared array in [`KernelDef::shared`].
#[derive(
    Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub struct SharedId(pub u32);

/// A workgroup-shared array: `len` elements of `elem`, one copy per workgroup, undefined at
/// the start of every workgroup (see the memory model in the module doc).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub struct SharedDecl {
    /// Type of every element.
    pub elem: ElemType,
    /// Number of elements (at least 1), fixed when the kernel is built.
    pub len: u32,
}

/// Index of a per-invocation array in [`KernelDef::local_arrays`].
#[derive(
    Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub struct LocalArrayId(pub u32);

/// A per-invocation array: `len` elements of `elem`, one copy per invocation, every element
/// zero at kernel entry (as WGSL's function-scope arrays). No other invocation can reach it,
/// so it takes no atomics and cannot race.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub struct LocalArrayDecl {
    /// Type of every element.
    pub elem: ElemType,
    /// Number of elements, 1 to [`MAX_LOCAL_ARRAY_LEN`](crate::kernel::MAX_LOCAL_ARRAY_LEN),
    /// fixed when the kernel is built.
    pub len: u32,
}

/// An array a kernel indexes: one of its bindings, shared arrays or local arrays.
#[derive(
    Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub enum Array {
    /// A buffer passed at launch.
    Binding(BindingId),
    /// A workgroup-shared array declared by the kernel.
    Shared(SharedId),
    /// A per-invocation array declared by the kernel.
    Local(LocalArrayId),
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Array::Binding(b) => write!(f, "binding {}", b.0),
            Array::Shared(s) => write!(f, "shared array {}", s.0),
            Array::Local(l) => write!(f, "local array {}", l.0),
        }
    }
}

/// Index of a local variable in [`KernelDef::locals`].
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub struct VarId(pub u32);

/// A dimension of the launch grid or of a workgroup.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum Axis {
    /// The first dimension.
    X,
    /// The second dimension.
    Y,
    /// The third dimension.
    Z,
}

impl Axis {
    /// Position of the axis in a `[x, y, z]` array: 0, 1 or 2.
    pub const fn index(self) -> usize {
        match self {
            Axis::X => 0,
            Axis::Y => 1,
            Axis::Z => 2,
        }
    }
}

/// Values that identify the running invocation. All are `u32`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `workgroup_id * workgroup_size + local_id`.
    GlobalId(Axis),
    /// Position of the invocation inside its workgroup, below `workgroup_size` on this axis.
    LocalId(Axis),
    /// Position of the invocation's workgroup in the grid, below `NumWorkgroups` on this axis.
    WorkgroupId(Axis),
    /// Number of workgroups the launch runs on this axis (its `CubeCount`).
    NumWorkgroups(Axis),
}

/// An operator of two numeric operands of the same element type, returning that type.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// Addition (wrapping for integers).
    Add,
    /// Subtraction (wrapping for integers).
    Sub,
    /// Multiplication (wrapping for integers).
    Mul,
    /// Division: truncating for integers, where a zero divisor (and `i32::MIN / -1`) yields the
    /// left operand; IEEE for floats, within the accuracy bound of the module doc.
    Div,
    /// Remainder with the sign of the left operand (truncated division); for integers, a zero
    /// divisor (and `i32::MIN % -1`) yields 0, as in WGSL.
    Rem,
    /// The smaller operand; for floats, a NaN operand yields the other one.
    Min,
    /// The larger operand; for floats, a NaN operand yields the other one.
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
    /// Floats only: `lhs` to the power `rhs` (see the accuracy table in the module doc).
    Pow,
    /// Floats only: the angle of the point (`rhs`, `lhs`), WGSL's `atan2(y = lhs, x = rhs)`,
    /// in radians in [-π, π] (see the accuracy table in the module doc).
    Atan2,
}

/// A function of one operand. `Abs` takes any numeric type; the others take floats and are
/// accurate as the module doc's table states.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// Absolute value; `abs(i32::MIN)` is `i32::MIN`.
    Abs,
    /// Largest integer not greater than the operand (exact).
    Floor,
    /// Smallest integer not less than the operand (exact).
    Ceil,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    InverseSqrt,
    /// `e` to the power of the operand.
    Exp,
    /// Natural logarithm.
    Log,
    /// Hyperbolic tangent.
    Tanh,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
    /// The integer part, toward zero (exact).
    Trunc,
    /// The nearest integer, halves to even (exact; WGSL's `round`).
    Round,
    /// The tangent, in radians.
    Tan,
    /// The hyperbolic sine.
    Sinh,
    /// The hyperbolic cosine.
    Cosh,
    /// The arcsine, in radians.
    Asin,
    /// The arccosine, in radians.
    Acos,
    /// The arctangent, in radians.
    Atan,
    /// The inverse hyperbolic sine.
    Asinh,
    /// The inverse hyperbolic cosine.
    Acosh,
    /// The inverse hyperbolic tangent.
    Atanh,
}

impl UnaryOp {
    /// Every unary function, in declaration order (for tests and generators that cover them all).
    pub const ALL: [UnaryOp; 21] = [
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
        UnaryOp::Trunc,
        UnaryOp::Round,
        UnaryOp::Tan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
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
            UnaryOp::Trunc => "trunc",
            UnaryOp::Round => "round",
            UnaryOp::Tan => "tan",
            UnaryOp::Sinh => "sinh",
            UnaryOp::Cosh => "cosh",
            UnaryOp::Asin => "asin",
            UnaryOp::Acos => "acos",
            UnaryOp::Atan => "atan",
            UnaryOp::Asinh => "asinh",
            UnaryOp::Acosh => "acosh",
            UnaryOp::Atanh => "atanh",
        }
    }
}

/// A function of the bits of one integer (`u32` or `i32`), of the operand's type, exact on
/// every device (WGSL's bit functions).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum BitFn {
    /// How many bits are 1.
    CountOneBits,
    /// How many zero bits lie above the highest 1 (32 for zero).
    CountLeadingZeros,
    /// How many zero bits lie below the lowest 1 (32 for zero).
    CountTrailingZeros,
    /// The index of the lowest 1 bit; all ones (`-1` for `i32`) for zero.
    FirstTrailingBit,
    /// For `u32`, the index of the highest 1 bit (all ones for zero); for `i32`, of the highest
    /// bit that differs from the sign bit (`-1` for `0` and `-1`).
    FirstLeadingBit,
    /// The 32 bits in reverse order.
    ReverseBits,
}

impl BitFn {
    /// Every bit function, in declaration order.
    pub const ALL: [BitFn; 6] = [
        BitFn::CountOneBits,
        BitFn::CountLeadingZeros,
        BitFn::CountTrailingZeros,
        BitFn::FirstTrailingBit,
        BitFn::FirstLeadingBit,
        BitFn::ReverseBits,
    ];

    /// The function's name, as WGSL spells it.
    pub const fn name(self) -> &'static str {
        match self {
            BitFn::CountOneBits => "countOneBits",
            BitFn::CountLeadingZeros => "countLeadingZeros",
            BitFn::CountTrailingZeros => "countTrailingZeros",
            BitFn::FirstTrailingBit => "firstTrailingBit",
            BitFn::FirstLeadingBit => "firstLeadingBit",
            BitFn::ReverseBits => "reverseBits",
        }
    }
}

/// A read-modify-write an atomic statement applies; see the memory model in the module doc.
#[derive(
    Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub enum AtomicOp {
    /// Wrapping addition.
    Add,
    /// Stores the smaller of the old value and the operand (signed for `i32`).
    Min,
    /// Stores the larger of the old value and the operand (signed for `i32`).
    Max,
    /// Stores the operand.
    Exchange,
    /// Stores the bitwise and of the old value and the operand.
    And,
    /// Stores the bitwise or of the old value and the operand.
    Or,
    /// Stores the bitwise exclusive or of the old value and the operand.
    Xor,
}

impl AtomicOp {
    /// The operation's name, as WGSL's `atomicAdd`-style functions spell it after `atomic`.
    pub const fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
            AtomicOp::Min => "min",
            AtomicOp::Max => "max",
            AtomicOp::Exchange => "exchange",
            AtomicOp::And => "and",
            AtomicOp::Or => "or",
            AtomicOp::Xor => "xor",
        }
    }
}

/// A comparison of two operands of the same element type, yielding a boolean. Every comparison with
/// a NaN is false except `Ne`, which is true (IEEE 754).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// Equal.
    Eq,
    /// Not equal.
    Ne,
    /// Less than (signed for `i32`).
    Lt,
    /// Less than or equal.
    Le,
    /// Greater than.
    Gt,
    /// Greater than or equal.
    Ge,
}

/// A connective of two booleans. Both short-circuit, as WGSL's `&&`/`||` do: the right side is
/// evaluated only when the left does not decide, so it may guard a load.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize, PartialEq, Eq, Hash)]
pub enum LogicOp {
    /// True when both sides are.
    And,
    /// True when either side is.
    Or,
}

/// An expression: a tree evaluated by each invocation, free of side effects except that an
/// out-of-range checked load records a fault (see the module doc).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub enum Expr {
    /// A literal.
    Lit(Scalar),
    /// A boolean literal.
    Bool(bool),
    /// A value identifying the running invocation.
    Builtin(Builtin),
    /// A launch parameter, by index into [`KernelDef::params`].
    Param(u32),
    /// The current value of a local variable.
    Var(VarId),
    /// Number of elements in a binding (`u32`).
    Len(BindingId),
    /// Reads `array[index]`, an element index (`u32`).
    Load {
        /// The binding or shared array read.
        array: Array,
        /// Element index (`u32`); out of range in checked mode, the load yields zero.
        index: Box<Expr>,
    },
    /// An arithmetic or bitwise operator applied to two operands of one element type.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand, of the same element type.
        rhs: Box<Expr>,
    },
    /// A comparison of two operands of one element type (a boolean).
    Cmp {
        /// The comparison.
        op: CmpOp,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand, of the same element type.
        rhs: Box<Expr>,
    },
    /// A boolean connective.
    Logic {
        /// The connective.
        op: LogicOp,
        /// Left condition, evaluated first.
        lhs: Box<Expr>,
        /// Right condition, evaluated only when the left does not decide.
        rhs: Box<Expr>,
    },
    /// Boolean negation.
    Not(Box<Expr>),
    /// Arithmetic negation (`i32` and the floats; wraps for `i32`).
    Neg(Box<Expr>),
    /// A function of one operand.
    Unary {
        /// The function.
        op: UnaryOp,
        /// The operand.
        value: Box<Expr>,
    },
    /// `a * b + c` on one float type, rounded once or twice (see the module doc).
    Fma {
        /// First factor.
        a: Box<Expr>,
        /// Second factor.
        b: Box<Expr>,
        /// Addend.
        c: Box<Expr>,
    },
    /// `if_true` when `cond` holds, else `if_false`; both sides are evaluated (loads included).
    Select {
        /// The boolean condition.
        cond: Box<Expr>,
        /// Value when `cond` holds.
        if_true: Box<Expr>,
        /// Value otherwise, of the same type as `if_true`.
        if_false: Box<Expr>,
    },
    /// Converts `value` to `to`: float to integer saturates and maps NaN to zero, integer to
    /// integer reinterprets the bits, integer to float rounds to nearest.
    Cast {
        /// The target type.
        to: ElemType,
        /// The value converted.
        value: Box<Expr>,
    },
    /// Reinterprets the bits of `value` as `to`, a type of the same size (`u32`, `i32` and
    /// `f32` among themselves, `f16` and `bf16` between themselves): every bit kept, a NaN's
    /// payload included (WGSL's `bitcast`).
    Bitcast {
        /// The target type.
        to: ElemType,
        /// The value whose bits are taken.
        value: Box<Expr>,
    },
    /// A function of an integer's bits (`u32` or `i32`), of the operand's type.
    Bits {
        /// The function.
        op: BitFn,
        /// The integer.
        value: Box<Expr>,
    },
}

impl Expr {
    /// The expression's direct operands, left to right (none for a leaf). Walkers recurse
    /// through it and match only the variants they treat specially.
    pub fn operands(&self) -> impl Iterator<Item = &Expr> {
        let (first, second, third): (Option<&Expr>, Option<&Expr>, Option<&Expr>) = match self {
            Expr::Lit(_)
            | Expr::Bool(_)
            | Expr::Builtin(_)
            | Expr::Param(_)
            | Expr::Var(_)
            | Expr::Len(_) => (None, None, None),
            Expr::Load { index: e, .. }
            | Expr::Not(e)
            | Expr::Neg(e)
            | Expr::Unary { value: e, .. }
            | Expr::Cast { value: e, .. }
            | Expr::Bitcast { value: e, .. }
            | Expr::Bits { value: e, .. } => (Some(e), None, None),
            Expr::Binary { lhs, rhs, .. }
            | Expr::Cmp { lhs, rhs, .. }
            | Expr::Logic { lhs, rhs, .. } => (Some(lhs), Some(rhs), None),
            Expr::Fma { a, b, c } => (Some(a), Some(b), Some(c)),
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => (Some(cond), Some(if_true), Some(if_false)),
        };
        first.into_iter().chain(second).chain(third)
    }
}

impl From<Scalar> for Expr {
    fn from(v: Scalar) -> Self {
        Expr::Lit(v)
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

impl From<half::f16> for Expr {
    fn from(v: half::f16) -> Self {
        Expr::Lit(Scalar::F16(v))
    }
}

impl From<half::bf16> for Expr {
    fn from(v: half::bf16) -> Self {
        Expr::Lit(Scalar::BF16(v))
    }
}

impl From<bool> for Expr {
    fn from(v: bool) -> Self {
        Expr::Bool(v)
    }
}

/// A statement of a kernel body, run by every invocation in program order.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub enum Stmt {
    /// `var = value`; the value's type is the variable's.
    Assign {
        /// The local assigned.
        var: VarId,
        /// The new value.
        value: Expr,
    },
    /// `array[index] = value`; the array must be writable (`Access::ReadWrite`, shared or
    /// local).
    Store {
        /// The binding, shared or local array written.
        array: Array,
        /// Element index (`u32`); out of range in checked mode, the store is skipped.
        index: Expr,
        /// The value stored, of the array's element type.
        value: Expr,
    },
    /// `array[index] = op(array[index], value)`, atomically, on a `u32` or `i32` binding or
    /// shared array; the previous value goes to `old` when given.
    Atomic {
        /// The read-modify-write applied.
        op: AtomicOp,
        /// The `u32` or `i32` array updated.
        array: Array,
        /// Element index (`u32`); out of range in checked mode, nothing is updated and `old` reads
        /// 0.
        index: Expr,
        /// The operand, of the array's element type.
        value: Expr,
        /// Local that receives the previous value, if any.
        old: Option<VarId>,
    },
    /// Atomically: `old = array[index]; if old == expected { array[index] = value }`, on a
    /// `u32` or `i32` binding or shared array (a strong compare-and-swap: it never fails
    /// spuriously).
    CompareExchange {
        /// The `u32` or `i32` array updated.
        array: Array,
        /// Element index (`u32`); out of range in checked mode, nothing is updated and `old` reads
        /// 0.
        index: Expr,
        /// The value compared with the element.
        expected: Expr,
        /// The value stored when the comparison succeeds.
        value: Expr,
        /// Local that receives the previous value (equal to `expected` when the swap happened).
        old: VarId,
    },
    /// Runs `then_body` when `cond` holds, else `else_body`.
    If {
        /// The boolean condition.
        cond: Expr,
        /// Statements run when `cond` holds.
        then_body: Vec<Stmt>,
        /// Statements run otherwise (may be empty).
        else_body: Vec<Stmt>,
    },
    /// `for var in start..end` (step 1); `var` is an integer local, `start`/`end` are evaluated
    /// once, before the first iteration.
    For {
        /// The integer loop counter, assigned `start`, `start + 1`, ... below `end`.
        var: VarId,
        /// First value of the counter.
        start: Expr,
        /// Bound, exclusive: no iteration runs when `start >= end`.
        end: Expr,
        /// Statements run per iteration.
        body: Vec<Stmt>,
    },
    /// Runs `body` while `cond` holds, testing it before every iteration.
    While {
        /// The boolean condition, tested before each iteration.
        cond: Expr,
        /// Statements run per iteration.
        body: Vec<Stmt>,
    },
    /// Leaves the innermost loop.
    Break,
    /// Ends the innermost loop's iteration (a `for` then advances its counter).
    Continue,
    /// `workgroup_barrier`: see the memory model in the module doc.
    Barrier,
    /// Ends the invocation here (WGSL's `return` in an entry point); it counts as arrived at
    /// every later barrier of its workgroup (see the memory model in the module doc).
    Return,
}

/// A complete kernel. Write one with [`KernelBuilder`](crate::kernel::KernelBuilder), whose
/// `build` validates it into a [`Kernel`](crate::Kernel) ([`Kernel::def`](crate::Kernel::def)
/// reads it back); a hand-made one is validated by [`Kernel::new`](crate::Kernel::new).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct KernelDef {
    /// The kernel's name, shown in errors, profiles and sanitizer reports; part of the content
    /// hash, so two kernels that differ only in name compile separately.
    pub name: String,
    /// Invocations of one workgroup per axis, `[x, y, z]`: each at least 1, their product at
    /// most [`MAX_WORKGROUP_INVOCATIONS`](crate::kernel::MAX_WORKGROUP_INVOCATIONS).
    pub workgroup_size: [u32; 3],
    /// The buffers a launch binds, in order: launch argument `i` binds to `bindings[i]`.
    pub bindings: Vec<BindingDecl>,
    /// Types of the scalar launch parameters, in order ([`Expr::Param`] indexes them).
    pub params: Vec<ElemType>,
    /// Types of the local variables; all start at zero.
    pub locals: Vec<ElemType>,
    /// Workgroup-shared arrays.
    pub shared: Vec<SharedDecl>,
    /// Per-invocation arrays ([`Array::Local`]).
    pub local_arrays: Vec<LocalArrayDecl>,
    /// The statements each invocation runs.
    pub body: Vec<Stmt>,
}

std::thread_local! {
    /// On this thread, [`KernelDef::workgroup_invocations`] wraps its product (see
    /// [`plant_wrapping_workgroup_product`]).
    static WRAPPING_PRODUCT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Self-test hook: on this thread, `workgroup_invocations` wraps the product of the workgroup
/// sizes, as it once did in release builds, so that validation accepts a size whose product
/// overflows. Only the fuzzer's self-test turns it on, to prove the fuzzer refinds that bug.
#[doc(hidden)]
pub fn plant_wrapping_workgroup_product(on: bool) {
    WRAPPING_PRODUCT.set(on);
}

impl KernelDef {
    /// Invocations per workgroup; `u64::MAX` where the product of the three sizes overflows
    /// (validation refuses such a kernel: it is far above
    /// [`MAX_WORKGROUP_INVOCATIONS`](crate::kernel::MAX_WORKGROUP_INVOCATIONS)).
    pub fn workgroup_invocations(&self) -> u64 {
        if WRAPPING_PRODUCT.get() {
            return (self.workgroup_size.iter()).fold(1u64, |p, &d| p.wrapping_mul(u64::from(d)));
        }
        self.workgroup_size
            .iter()
            .fold(1u64, |product, &d| product.saturating_mul(u64::from(d)))
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
            Array::Local(l) => self.local_arrays.get(l.0 as usize).map(|d| d.elem),
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
            | Expr::Bits { value: lhs, .. }
            | Expr::Fma { a: lhs, .. } => self.elem_type_of(lhs),
            Expr::Select { if_true, .. } => self.elem_type_of(if_true),
            Expr::Cast { to, .. } | Expr::Bitcast { to, .. } => Some(*to),
            Expr::Bool(_) | Expr::Cmp { .. } | Expr::Logic { .. } | Expr::Not(_) => None,
        }
    }
}
