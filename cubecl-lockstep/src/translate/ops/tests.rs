use lockstep::kernel::{BinOp, CmpOp, ElemType, Expr, Scalar};
use naga::{BinaryOperator, ScalarKind, UnaryOperator};

use super::*;

const I32: ScalarTy = ScalarTy::Elem(ElemType::I32);
const F32: ScalarTy = ScalarTy::Elem(ElemType::F32);

fn var(n: u32) -> Expr {
    Expr::Var(lockstep::kernel::VarId(n))
}

#[test]
fn float_remainder_is_refused_as_a_semantic_difference() {
    let (construct, _) = binary(BinaryOperator::Modulo, F32, var(0), var(1)).unwrap_err();
    assert_eq!(construct, Construct::Semantics("f32 %".to_owned()));
    let (ty, rem) = binary(BinaryOperator::Modulo, I32, var(0), var(1)).unwrap();
    assert_eq!(ty, I32);
    assert!(
        matches!(rem, Expr::Binary { op: BinOp::Rem, .. }),
        "integer % is the IR's Rem"
    );
}

#[test]
fn a_signed_shift_reinterprets_its_u32_amount() {
    let (_, shifted) = binary(BinaryOperator::ShiftRight, I32, var(0), var(1)).unwrap();
    let Expr::Binary {
        op: BinOp::Shr,
        rhs,
        ..
    } = shifted
    else {
        panic!("{shifted:?}")
    };
    assert_eq!(
        *rhs,
        Expr::Cast {
            to: ElemType::I32,
            value: Box::new(var(1))
        }
    );
}

#[test]
fn booleans_compare_through_their_stored_form() {
    let (ty, eq) = binary(
        BinaryOperator::Equal,
        ScalarTy::Bool,
        Expr::Bool(true),
        Expr::Bool(false),
    )
    .unwrap();
    assert_eq!(ty, ScalarTy::Bool);
    assert!(matches!(eq, Expr::Cmp { op: CmpOp::Eq, .. }));
    assert!(
        binary(
            BinaryOperator::Less,
            ScalarTy::Bool,
            Expr::Bool(true),
            Expr::Bool(false)
        )
        .is_err()
    );
}

#[test]
fn bitwise_not_flips_every_bit() {
    let not = unary(UnaryOperator::BitwiseNot, I32, var(0)).unwrap();
    let ones = Expr::Lit(Scalar::I32(-1));
    assert_eq!(
        not,
        Expr::Binary {
            op: BinOp::BitXor,
            lhs: Box::new(var(0)),
            rhs: Box::new(ones)
        }
    );
    assert!(unary(UnaryOperator::Negate, ScalarTy::Elem(ElemType::U32), var(0)).is_err());
}

#[test]
fn conversions_to_and_from_booleans_are_comparisons_and_selects() {
    let (ty, to_bool) = cast(F32, ScalarKind::Bool, Some(1), var(0)).unwrap();
    assert_eq!(ty, ScalarTy::Bool);
    assert!(
        matches!(to_bool, Expr::Cmp { op: CmpOp::Ne, .. }),
        "x != 0.0: -0.0 false, NaN true"
    );
    let (ty, from_bool) =
        cast(ScalarTy::Bool, ScalarKind::Float, Some(4), Expr::Bool(true)).unwrap();
    assert_eq!(ty, F32);
    assert!(matches!(from_bool, Expr::Select { .. }));
}

#[test]
fn bitcasts_among_32_bit_types_are_the_irs_bitcast() {
    let (ty, from_float) = cast(F32, ScalarKind::Uint, None, var(0)).unwrap();
    assert_eq!(
        (ty, from_float),
        (
            ScalarTy::Elem(ElemType::U32),
            Expr::Bitcast {
                to: ElemType::U32,
                value: Box::new(var(0))
            }
        )
    );
    let (ty, to_float) = cast(I32, ScalarKind::Float, None, var(0)).unwrap();
    assert_eq!(
        (ty, to_float),
        (
            F32,
            Expr::Bitcast {
                to: ElemType::F32,
                value: Box::new(var(0))
            }
        )
    );
    assert_eq!(
        cast(F32, ScalarKind::Float, None, var(0)).unwrap(),
        (F32, var(0)),
        "to its own type: the value"
    );
    let (construct, _) =
        cast(ScalarTy::Bool, ScalarKind::Uint, None, Expr::Bool(true)).unwrap_err();
    assert_eq!(
        construct,
        Construct::Bitcast {
            from: "bool".to_owned(),
            to: "u32".to_owned()
        }
    );
    assert!(
        cast(I32, ScalarKind::Sint, Some(8), var(0)).is_err(),
        "64-bit conversions are refused"
    );
}
