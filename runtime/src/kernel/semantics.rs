//! The reference semantics of IR operations on scalars. The simulator's interpreter uses these
//! functions directly; the WGSL and CUDA lowerings must agree with them bit for bit, except
//! for the transcendental functions, which must lie within the bounds of
//! [`accuracy`](super::accuracy). Those are computed here in `f64` by `libm` (a portable port
//! of musl's) and rounded once to `f32`, so the simulator gives the same bits on every host.
//!
//! The half floats (`f16`, `bf16`) compute every operation on their exact `f32` values, with
//! the `f32` rules below, and round the result once to their type, to nearest even
//! (`half`'s conversions); see "Half floats" in the IR's module doc.

use half::{bf16, f16};

use super::ir::{AtomicOp, BinOp, BitFn, CmpOp, ElemType, Scalar, UnaryOp};

/// A half float's exact `f32` value, or `None` for the other types.
#[inline]
fn half_value(value: Scalar) -> Option<f32> {
    match value {
        Scalar::F16(v) => Some(v.to_f32()),
        Scalar::BF16(v) => Some(v.to_f32()),
        _ => None,
    }
}

/// `value` rounded to the half float type `elem` (to nearest even).
#[inline]
fn round_to(elem: ElemType, value: f32) -> Scalar {
    match elem {
        ElemType::F16 => Scalar::F16(f16::from_f32(value)),
        ElemType::BF16 => Scalar::BF16(bf16::from_f32(value)),
        _ => Scalar::F32(value),
    }
}

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
            BinOp::Rem => a.checked_rem(b).unwrap_or(0),
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Shl => a.wrapping_shl(b),
            BinOp::Shr => a.wrapping_shr(b),
            BinOp::Pow | BinOp::Atan2 => panic!("validated kernels apply {op:?} to floats only"),
        }),
        (I32(a), I32(b)) => I32(match op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b).unwrap_or(a),
            BinOp::Rem => a.checked_rem(b).unwrap_or(0),
            BinOp::Min => a.min(b),
            BinOp::Max => a.max(b),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Shl => a.wrapping_shl(b as u32),
            BinOp::Shr => a.wrapping_shr(b as u32),
            BinOp::Pow | BinOp::Atan2 => panic!("validated kernels apply {op:?} to floats only"),
        }),
        (F32(a), F32(b)) => F32(float_binary(op, a, b)),
        (F16(_), F16(_)) | (BF16(_), BF16(_)) => {
            let (a, b) = (half_value(lhs), half_value(rhs));
            let (Some(a), Some(b)) = (a, b) else {
                unreachable!("both operands are half floats")
            };
            round_to(lhs.elem_type(), float_binary(op, a, b))
        }
        _ => panic!(
            "validated kernels apply {op:?} to operands of one type, got {lhs:?} and {rhs:?}"
        ),
    }
}

/// `op` on two `f32`s.
#[inline(always)]
fn float_binary(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Rem => a % b,
        BinOp::Min => a.min(b),
        BinOp::Max => a.max(b),
        BinOp::Pow => libm::pow(a as f64, b as f64) as f32,
        BinOp::Atan2 => libm::atan2(a as f64, b as f64) as f32,
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
            panic!("validated kernels apply {op:?} to integers only")
        }
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
        (F16(a), F16(b)) => a.partial_cmp(&b),
        (BF16(a), BF16(b)) => a.partial_cmp(&b),
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

/// Arithmetic negation; wraps for `i32`, flips the sign bit of a float.
#[inline]
pub fn negate(value: Scalar) -> Scalar {
    match value {
        Scalar::I32(v) => Scalar::I32(v.wrapping_neg()),
        Scalar::F32(v) => Scalar::F32(-v),
        Scalar::F16(v) => Scalar::F16(-v),
        Scalar::BF16(v) => Scalar::BF16(-v),
        Scalar::U32(_) => panic!("validated kernels negate i32 or floats only"),
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
        // The sign bit only, as for `-x`.
        (UnaryOp::Abs, Scalar::F16(v)) => Scalar::F16(f16::from_bits(v.to_bits() & 0x7fff)),
        (UnaryOp::Abs, Scalar::BF16(v)) => Scalar::BF16(bf16::from_bits(v.to_bits() & 0x7fff)),
        (op, Scalar::F16(_) | Scalar::BF16(_)) => {
            let v = half_value(value).unwrap_or_default();
            round_to(value.elem_type(), float_unary(op, v))
        }
        _ => panic!("validated kernels apply {op:?} to floats only, got {value:?}"),
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
        UnaryOp::Trunc => v.trunc(),
        UnaryOp::Round => v.round_ties_even(),
        UnaryOp::Sqrt => v.sqrt(),
        UnaryOp::InverseSqrt => (1.0 / libm::sqrt(x)) as f32,
        UnaryOp::Exp => libm::exp(x) as f32,
        UnaryOp::Log => libm::log(x) as f32,
        UnaryOp::Tanh => libm::tanh(x) as f32,
        UnaryOp::Sin => libm::sin(x) as f32,
        UnaryOp::Cos => libm::cos(x) as f32,
        UnaryOp::Tan => libm::tan(x) as f32,
        UnaryOp::Sinh => libm::sinh(x) as f32,
        UnaryOp::Cosh => libm::cosh(x) as f32,
        UnaryOp::Asin => libm::asin(x) as f32,
        UnaryOp::Acos => libm::acos(x) as f32,
        UnaryOp::Atan => libm::atan(x) as f32,
        UnaryOp::Asinh => libm::asinh(x) as f32,
        UnaryOp::Acosh => libm::acosh(x) as f32,
        UnaryOp::Atanh => libm::atanh(x) as f32,
    }
}

/// `a * b + c`, rounded once (devices may round twice; see the module doc of the IR).
#[inline]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    libm::fmaf(a, b, c)
}

/// `a * b + c` on three floats of one type: [`fma`] on their `f32` values, rounded to the type.
///
/// # Panics
/// If the operands are not floats of one type: the validator rejects such kernels.
#[inline]
pub fn fma_scalar(a: Scalar, b: Scalar, c: Scalar) -> Scalar {
    let f32_of = |s: Scalar| match s {
        Scalar::F32(v) => v,
        _ => half_value(s).unwrap_or_else(|| panic!("validated kernels fma floats, got {s:?}")),
    };
    assert!(
        a.elem_type() == b.elem_type() && b.elem_type() == c.elem_type(),
        "validated kernels fma operands of one type, got {a:?}, {b:?}, {c:?}"
    );
    round_to(a.elem_type(), fma(f32_of(a), f32_of(b), f32_of(c)))
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
        AtomicOp::And => binary(BinOp::BitAnd, old, operand),
        AtomicOp::Or => binary(BinOp::BitOr, old, operand),
        AtomicOp::Xor => binary(BinOp::BitXor, old, operand),
    }
}

/// Numeric conversion; float to integer saturates and maps NaN to zero, integer to integer
/// reinterprets the bits. A half float converts through its exact `f32` value; a conversion to
/// a half float rounds the `f32` value (see the IR's module doc).
#[inline]
pub fn cast(value: Scalar, to: ElemType) -> Scalar {
    use Scalar::*;
    if let Some(v) = half_value(value) {
        return cast(F32(v), to);
    }
    if to.is_half() {
        let F32(v) = cast(value, ElemType::F32) else {
            unreachable!("a cast to f32 yields an f32")
        };
        return round_to(to, v);
    }
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
        (F16(_) | BF16(_), _) | (_, ElemType::F16 | ElemType::BF16) => {
            unreachable!("half floats convert through f32 above")
        }
    }
}

/// `value`'s bits as `to`, of the same size ([`Expr::Bitcast`](crate::kernel::Expr::Bitcast)).
#[inline]
pub fn bitcast(value: Scalar, to: ElemType) -> Scalar {
    debug_assert_eq!(value.elem_type().size_bytes(), to.size_bytes());
    Scalar::from_bits(to, value.to_bits())
}

/// `op` of an integer's bits ([`BitFn`]): WGSL's definitions, exact.
///
/// # Panics
/// If `value` is not a `u32` or `i32`: the validator rejects such kernels.
#[inline]
pub fn bits(op: BitFn, value: Scalar) -> Scalar {
    let (bits, signed) = match value {
        Scalar::U32(v) => (v, false),
        Scalar::I32(v) => (v as u32, true),
        other => panic!("validated kernels apply {op:?} to integers only, got {other:?}"),
    };
    let none = u32::MAX;
    let result = match op {
        BitFn::CountOneBits => bits.count_ones(),
        BitFn::CountLeadingZeros => bits.leading_zeros(),
        BitFn::CountTrailingZeros => bits.trailing_zeros(),
        BitFn::FirstTrailingBit if bits == 0 => none,
        BitFn::FirstTrailingBit => bits.trailing_zeros(),
        // For i32, the highest bit that differs from the sign: that of `!x` when negative.
        BitFn::FirstLeadingBit => {
            let magnitude = if signed && (bits as i32) < 0 {
                !bits
            } else {
                bits
            };
            if magnitude == 0 {
                none
            } else {
                31 - magnitude.leading_zeros()
            }
        }
        BitFn::ReverseBits => bits.reverse_bits(),
    };
    Scalar::from_bits(value.elem_type(), result)
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
    fn integer_division_and_remainder_follow_wgsl_at_zero_and_overflow() {
        // WGSL: `e1 / e2` is e1 for a zero e2 and for i32::MIN / -1; `e1 % e2` is 0 then.
        let cases = [
            (BinOp::Div, Scalar::U32(7), Scalar::U32(0), Scalar::U32(7)),
            (BinOp::Rem, Scalar::U32(7), Scalar::U32(0), Scalar::U32(0)),
            (BinOp::Div, Scalar::I32(-7), Scalar::I32(0), Scalar::I32(-7)),
            (BinOp::Rem, Scalar::I32(-7), Scalar::I32(0), Scalar::I32(0)),
            (
                BinOp::Div,
                Scalar::I32(i32::MIN),
                Scalar::I32(-1),
                Scalar::I32(i32::MIN),
            ),
            (
                BinOp::Rem,
                Scalar::I32(i32::MIN),
                Scalar::I32(-1),
                Scalar::I32(0),
            ),
            (BinOp::Rem, Scalar::I32(-7), Scalar::I32(2), Scalar::I32(-1)),
        ];
        for (op, a, b, want) in cases {
            assert_eq!(binary(op, a, b), want, "{op:?} {a:?} {b:?}");
        }
    }

    #[test]
    fn bitcasts_keep_every_bit() {
        let nan_with_payload = f32::from_bits(0x7fc0_1234);
        let cases = [
            (Scalar::I32(-1), ElemType::U32, Scalar::U32(u32::MAX)),
            (Scalar::U32(0x3f80_0000), ElemType::F32, Scalar::F32(1.0)),
            (Scalar::F32(-0.0), ElemType::U32, Scalar::U32(0x8000_0000)),
            (
                Scalar::F32(nan_with_payload),
                ElemType::I32,
                Scalar::I32(0x7fc0_1234),
            ),
        ];
        for (value, to, want) in cases {
            assert_eq!(
                bitcast(value, to).to_bits(),
                want.to_bits(),
                "{value:?} as {to}"
            );
            assert_eq!(bitcast(value, to).elem_type(), to);
        }
        let half = Scalar::from_bits(ElemType::F16, 0x7e01);
        assert_eq!(
            bitcast(half, ElemType::BF16),
            Scalar::from_bits(ElemType::BF16, 0x7e01)
        );
    }

    #[test]
    fn bit_functions_follow_wgsl_at_zero_and_for_negative_integers() {
        use BitFn::*;
        let u = |op, v| bits(op, Scalar::U32(v)).to_bits();
        let i = |op, v: i32| bits(op, Scalar::I32(v)).to_bits() as i32;
        assert_eq!([u(CountOneBits, 0xf0f0), u(CountOneBits, 0)], [8, 0]);
        assert_eq!([u(CountLeadingZeros, 1), u(CountLeadingZeros, 0)], [31, 32]);
        assert_eq!(
            [u(CountTrailingZeros, 8), u(CountTrailingZeros, 0)],
            [3, 32]
        );
        assert_eq!(
            [u(FirstTrailingBit, 12), u(FirstTrailingBit, 0)],
            [2, u32::MAX]
        );
        assert_eq!(i(FirstTrailingBit, 0), -1);
        assert_eq!(
            [u(FirstLeadingBit, 0x8000_0000), u(FirstLeadingBit, 0)],
            [31, u32::MAX]
        );
        // i32: the highest bit that differs from the sign bit.
        assert_eq!([i(FirstLeadingBit, 5), i(FirstLeadingBit, -5)], [2, 2]);
        assert_eq!([i(FirstLeadingBit, 0), i(FirstLeadingBit, -1)], [-1, -1]);
        assert_eq!(i(FirstLeadingBit, i32::MIN), 30);
        assert_eq!(u(ReverseBits, 1), 0x8000_0000);
        assert_eq!(bits(CountOneBits, Scalar::I32(-1)), Scalar::I32(32));
    }

    #[test]
    fn trunc_goes_toward_zero_and_round_takes_halves_to_even() {
        let f = |op, v: f32| unary(op, Scalar::F32(v));
        assert_eq!(f(UnaryOp::Trunc, -2.7), Scalar::F32(-2.0));
        assert_eq!(f(UnaryOp::Trunc, 2.7), Scalar::F32(2.0));
        for (v, want) in [
            (2.5, 2.0),
            (3.5, 4.0),
            (-2.5, -2.0),
            (0.5, 0.0),
            (1.4999, 1.0),
        ] {
            assert_eq!(f(UnaryOp::Round, v), Scalar::F32(want), "round({v})");
        }
        let atomic = |op, old: u32, v: u32| super::atomic(op, Scalar::U32(old), Scalar::U32(v));
        assert_eq!(atomic(AtomicOp::And, 0b1100, 0b1010), Scalar::U32(0b1000));
        assert_eq!(atomic(AtomicOp::Or, 0b1100, 0b1010), Scalar::U32(0b1110));
        assert_eq!(atomic(AtomicOp::Xor, 0b1100, 0b1010), Scalar::U32(0b0110));
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

    #[test]
    fn half_floats_round_each_operation_once_to_nearest_even() {
        let h = |v: f32| Scalar::F16(f16::from_f32(v));
        let add = |a, b| binary(BinOp::Add, a, b).to_bits();
        // 1 + 2^-11 is halfway between 1 and the next f16: ties to even keep 1.
        assert_eq!(add(h(1.0), h(2f32.powi(-11))), 0x3c00);
        // 1 + 3 * 2^-11 is halfway between two f16s; the even one is above.
        assert_eq!(add(h(1.0 + 2f32.powi(-10)), h(2f32.powi(-11))), 0x3c02);
        // Past f16's largest finite value (65504), the sum is infinite.
        assert_eq!(add(h(65504.0), h(32.0)), 0x7c00);
        assert_eq!(binary(BinOp::Mul, h(3.0), h(0.5)), h(1.5));
        assert_eq!(binary(BinOp::Min, h(f32::NAN), h(2.0)), h(2.0));
        let b = |v: f32| Scalar::BF16(bf16::from_f32(v));
        // bf16 has 8 significant bits: 1 + 2^-8 ties to 1, 1 + 3 * 2^-8 to 1 + 2^-6.
        assert_eq!(
            binary(BinOp::Add, b(1.0), b(2f32.powi(-8))).to_bits(),
            0x3f80
        );
        assert_eq!(
            binary(BinOp::Sub, b(1.0 + 2f32.powi(-7)), b(-(2f32.powi(-8)))).to_bits(),
            0x3f82
        );
        assert!(compare(CmpOp::Lt, b(-1.0), b(0.5)));
        assert!(compare(CmpOp::Ne, h(f32::NAN), h(f32::NAN)));
    }

    #[test]
    fn half_float_sign_operations_touch_the_sign_bit_only() {
        let nan = Scalar::F16(f16::from_bits(0x7e01));
        assert_eq!(negate(nan).to_bits(), 0xfe01);
        assert_eq!(unary(UnaryOp::Abs, negate(nan)).to_bits(), 0x7e01);
        let nan = Scalar::BF16(bf16::from_bits(0xffc1));
        assert_eq!(unary(UnaryOp::Abs, nan).to_bits(), 0x7fc1);
    }

    #[test]
    fn half_float_casts_go_through_f32() {
        let h = |v: f32| Scalar::F16(f16::from_f32(v));
        assert_eq!(cast(h(-2.75), ElemType::I32), Scalar::I32(-2));
        assert_eq!(cast(h(-2.75), ElemType::U32), Scalar::U32(0));
        assert_eq!(cast(h(f32::INFINITY), ElemType::U32), Scalar::U32(u32::MAX));
        assert_eq!(cast(h(f32::NAN), ElemType::I32), Scalar::I32(0));
        assert_eq!(
            cast(h(0.1), ElemType::F32),
            Scalar::F32(f16::from_f32(0.1).to_f32())
        );
        assert_eq!(cast(Scalar::U32(65519), ElemType::F16).to_bits(), 0x7bff);
        assert_eq!(cast(Scalar::U32(65520), ElemType::F16).to_bits(), 0x7c00);
        assert_eq!(cast(Scalar::I32(-3), ElemType::F16), h(-3.0));
        // 0x80800001 rounds to the f32 0x80800000, a bf16 tie, which goes to even: twice
        // rounded, as the IR defines it (rounded once it would be 0x81000000).
        assert_eq!(
            cast(Scalar::U32(0x8080_0001), ElemType::BF16).to_bits(),
            0x4f00
        );
        let b = cast(Scalar::F32(3.0), ElemType::BF16);
        assert_eq!(cast(b, ElemType::F16), h(3.0));
        assert_eq!(fma_scalar(h(2.0), h(3.0), h(-1.0)), h(5.0));
    }
}
