//! The reference semantics of IR operations on scalars. The simulator's interpreter uses these
//! functions directly; the WGSL and CUDA lowerings must agree with them bit for bit, except
//! for the transcendental functions, which must lie within the bounds of
//! [`accuracy`](super::accuracy). Those are computed here in `f64` by `libm` (a portable port
//! of musl's) and rounded once to `f32`, so the simulator gives the same bits on every host.

use super::ir::{AtomicOp, BinOp, CmpOp, ElemType, Scalar, UnaryOp};

/// Applies a binary operation to two values of the same type (the validator guarantees it).
///
/// # Panics
/// If the operands differ in type or a bitwise operation gets floats: the validator rejects
/// such kernels, so reaching this is a bug in the caller.
// Always inlined: the simulator's interpreter applies it to whole columns of one type, and
// inlined at such a call the type match folds away.
#[inline(always)]
pub fn binary(op: BinOp, lhs: Scalar, rhs: Scalar) -> Scalar {
    use Scalar::*;
    match (lhs, rhs) {
        (U32(a), U32(b)) => U32(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b).unwrap_or(a),
            BinOp::Rem => a.checked_rem(b).unwrap_or(a),
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Shl => a.wrapping_shl(b),
            BinOp::Shr => a.wrapping_shr(b),
            BinOp::Pow => panic!("validated kernels apply Pow to f32 only"),
        }),
        (I32(a), I32(b)) => I32(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b).unwrap_or(a),
            BinOp::Rem => a.checked_rem(b).unwrap_or(a),
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Shl => a.wrapping_shl(b as u32),
            BinOp::Shr => a.wrapping_shr(b as u32),
            BinOp::Pow => panic!("validated kernels apply Pow to f32 only"),
        }),
        (F32(a), F32(b)) => F32(match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => a / b,
            BinOp::Rem => a % b,
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::Pow => libm::pow(a as f64, b as f64) as f32,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
                panic!("validated kernels apply {op:?} to integers only")
            }
        }),
        _ => panic!(
            "validated kernels apply {op:?} to operands of one type, got {lhs:?} and {rhs:?}"
        ),
    }
}

/// Compares two values of the same type.
#[inline(always)]
pub fn compare(op: CmpOp, lhs: Scalar, rhs: Scalar) -> bool {
    use Scalar::*;
    let ordering = match (lhs, rhs) {
        (U32(a), U32(b)) => a.partial_cmp(&b),
        (I32(a), I32(b)) => a.partial_cmp(&b),
        (F32(a), F32(b)) => a.partial_cmp(&b),
        _ => panic!("validated kernels compare operands of one type, got {lhs:?} and {rhs:?}"),
    };
    use std::cmp::Ordering::*;
    match (op, ordering) {
        // NaN compares unequal to everything, as in IEEE 754.
        (CmpOp::Ne, None) => true,
        (_, None) => false,
        (CmpOp::Eq, Some(o)) => o == Equal,
        (CmpOp::Ne, Some(o)) => o != Equal,
        (CmpOp::Lt, Some(o)) => o == Less,
        (CmpOp::Le, Some(o)) => o != Greater,
        (CmpOp::Gt, Some(o)) => o == Greater,
        (CmpOp::Ge, Some(o)) => o != Less,
    }
}

/// Arithmetic negation; wraps for `i32`.
#[inline]
pub fn negate(value: Scalar) -> Scalar {
    match value {
        Scalar::I32(v) => Scalar::I32(v.wrapping_neg()),
        Scalar::F32(v) => Scalar::F32(-v),
        Scalar::U32(_) => panic!("validated kernels negate i32 or f32 only"),
    }
}

/// A function of one operand; see [`UnaryOp`] for the types each takes.
///
/// # Panics
/// If a float-only function gets an integer: the validator rejects such kernels.
#[inline(always)]
pub fn unary(op: UnaryOp, value: Scalar) -> Scalar {
    match (op, value) {
        (UnaryOp::Abs, Scalar::U32(v)) => Scalar::U32(v),
        (UnaryOp::Abs, Scalar::I32(v)) => Scalar::I32(v.wrapping_abs()),
        (op, Scalar::F32(v)) => Scalar::F32(float_unary(op, v)),
        _ => panic!("validated kernels apply {op:?} to f32 only, got {value:?}"),
    }
}

/// `op` on an `f32`: the exact functions exactly, the others through `f64`, rounded once.
#[inline]
fn float_unary(op: UnaryOp, v: f32) -> f32 {
    let x = v as f64;
    match op {
        UnaryOp::Abs => v.abs(),
        UnaryOp::Floor => v.floor(),
        UnaryOp::Ceil => v.ceil(),
        UnaryOp::Sqrt => v.sqrt(),
        UnaryOp::InverseSqrt => (1.0 / libm::sqrt(x)) as f32,
        UnaryOp::Exp => libm::exp(x) as f32,
        UnaryOp::Log => libm::log(x) as f32,
        UnaryOp::Tanh => libm::tanh(x) as f32,
        UnaryOp::Sin => libm::sin(x) as f32,
        UnaryOp::Cos => libm::cos(x) as f32,
    }
}

/// `a * b + c`, rounded once (devices may round twice; see the module doc of the IR).
#[inline]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    libm::fmaf(a, b, c)
}

/// The value an atomic leaves in its word: `op` applied to the word's `old` value and the
/// `operand` (of the same integer type).
#[inline]
pub fn atomic(op: AtomicOp, old: Scalar, operand: Scalar) -> Scalar {
    match op {
        AtomicOp::Add => binary(BinOp::Add, old, operand),
        AtomicOp::Min => binary(BinOp::Min, old, operand),
        AtomicOp::Max => binary(BinOp::Max, old, operand),
        AtomicOp::Exchange => operand,
    }
}

/// Numeric conversion; float to integer saturates and maps NaN to zero, integer to integer
/// reinterprets the bits.
#[inline]
pub fn cast(value: Scalar, to: ElemType) -> Scalar {
    use Scalar::*;
    match (value, to) {
        (U32(v), ElemType::U32) => U32(v),
        (U32(v), ElemType::I32) => I32(v as i32),
        (U32(v), ElemType::F32) => F32(v as f32),
        (I32(v), ElemType::U32) => U32(v as u32),
        (I32(v), ElemType::I32) => I32(v),
        (I32(v), ElemType::F32) => F32(v as f32),
        (F32(v), ElemType::U32) => U32(v as u32),
        (F32(v), ElemType::I32) => I32(v as i32),
        (F32(v), ElemType::F32) => F32(v),
    }
}

/// Zero of a type: the initial value of every local.
#[inline]
pub fn zero(elem: ElemType) -> Scalar {
    Scalar::from_bits(elem, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_by_zero_yields_the_dividend() {
        assert_eq!(
            binary(BinOp::Div, Scalar::U32(7), Scalar::U32(0)),
            Scalar::U32(7)
        );
        assert_eq!(
            binary(BinOp::Rem, Scalar::I32(-7), Scalar::I32(0)),
            Scalar::I32(-7)
        );
        assert_eq!(
            binary(BinOp::Div, Scalar::I32(i32::MIN), Scalar::I32(-1)),
            Scalar::I32(i32::MIN)
        );
    }

    #[test]
    fn shifts_take_the_amount_modulo_32() {
        assert_eq!(
            binary(BinOp::Shl, Scalar::U32(1), Scalar::U32(33)),
            Scalar::U32(2)
        );
        assert_eq!(
            binary(BinOp::Shr, Scalar::I32(-8), Scalar::I32(1)),
            Scalar::I32(-4)
        );
    }

    #[test]
    fn float_to_int_casts_saturate() {
        assert_eq!(cast(Scalar::F32(-3.0), ElemType::U32), Scalar::U32(0));
        assert_eq!(cast(Scalar::F32(f32::NAN), ElemType::I32), Scalar::I32(0));
        assert_eq!(
            cast(Scalar::F32(1e20), ElemType::I32),
            Scalar::I32(i32::MAX)
        );
    }

    #[test]
    fn abs_wraps_and_atomics_apply_their_operation() {
        assert_eq!(
            unary(UnaryOp::Abs, Scalar::I32(i32::MIN)),
            Scalar::I32(i32::MIN)
        );
        assert_eq!(unary(UnaryOp::Abs, Scalar::I32(-5)), Scalar::I32(5));
        assert_eq!(
            unary(UnaryOp::Abs, Scalar::F32(-0.0)).to_bits(),
            0.0f32.to_bits()
        );
        let (old, x) = (Scalar::I32(-3), Scalar::I32(2));
        assert_eq!(atomic(AtomicOp::Add, old, x), Scalar::I32(-1));
        assert_eq!(atomic(AtomicOp::Min, old, x), Scalar::I32(-3));
        assert_eq!(atomic(AtomicOp::Max, old, x), Scalar::I32(2));
        assert_eq!(atomic(AtomicOp::Exchange, old, x), Scalar::I32(2));
        assert_eq!(
            atomic(AtomicOp::Add, Scalar::U32(u32::MAX), Scalar::U32(2)),
            Scalar::U32(1)
        );
    }

    #[test]
    fn math_rounds_the_f64_result_once() {
        assert_eq!(
            fma(1.0 + f32::EPSILON, 1.0 - f32::EPSILON, -1.0),
            -f32::EPSILON * f32::EPSILON
        );
        assert_eq!(unary(UnaryOp::Exp, Scalar::F32(0.0)), Scalar::F32(1.0));
        assert_eq!(unary(UnaryOp::Log, Scalar::F32(1.0)), Scalar::F32(0.0));
        assert_eq!(
            unary(UnaryOp::InverseSqrt, Scalar::F32(4.0)),
            Scalar::F32(0.5)
        );
        assert_eq!(unary(UnaryOp::Floor, Scalar::F32(-1.5)), Scalar::F32(-2.0));
        assert_eq!(unary(UnaryOp::Ceil, Scalar::F32(-1.5)), Scalar::F32(-1.0));
        assert_eq!(
            binary(BinOp::Pow, Scalar::F32(2.0), Scalar::F32(10.0)),
            Scalar::F32(1024.0)
        );
        // exp(1) is e, rounded once to the nearest f32.
        assert_eq!(
            unary(UnaryOp::Exp, Scalar::F32(1.0)),
            Scalar::F32(std::f32::consts::E)
        );
    }

    #[test]
    fn nan_is_unordered() {
        let nan = Scalar::F32(f32::NAN);
        assert!(!compare(CmpOp::Eq, nan, nan));
        assert!(compare(CmpOp::Ne, nan, nan));
        assert!(!compare(CmpOp::Lt, nan, Scalar::F32(0.0)));
    }
}
