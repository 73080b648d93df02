//! The reference semantics of IR operations on scalars. The simulator's interpreter uses these
//! functions directly; the WGSL and CUDA lowerings must agree with them bit for bit.

use super::ir::{BinOp, CmpOp, ElemType, Scalar};

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
        }),
        (F32(a), F32(b)) => F32(match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            BinOp::Div => a / b,
            BinOp::Rem => a % b,
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
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
    fn nan_is_unordered() {
        let nan = Scalar::F32(f32::NAN);
        assert!(!compare(CmpOp::Eq, nan, nan));
        assert!(compare(CmpOp::Ne, nan, nan));
        assert!(!compare(CmpOp::Lt, nan, Scalar::F32(0.0)));
    }
}
