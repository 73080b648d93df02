//! WGSL's built-in math functions over whole values (lanes), as Lockstep IR.
//!
//! Exact where the IR is exact (`abs`, `min`, `max`, `floor`, `ceil`, `trunc`, `round`,
//! integer `clamp`, and the integer bit functions, which are the IR's `BitFn`s), and within
//! WGSL's own bounds where WGSL defines a function by a formula (`dot` and `length` from sums
//! of products, `normalize` as `x / length(x)`, `degrees`, `radians`; the IR's transcendental
//! functions, the inverse and hyperbolic ones and `atan2` included, are bounded as WGSL
//! states). Float `clamp` is `min(max(e, low), high)`, one of the two results WGSL allows.
//! Every other function is refused by name.

use lockstep::kernel::{BinOp, BitFn, ElemType, Expr, Scalar, UnaryOp};
use naga::MathFunction as F;

use super::error::Construct;
use super::ops::Refusal;
use super::types::{ScalarTy, Value};

fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary {
        op,
        lhs: b(lhs),
        rhs: b(rhs),
    }
}

fn un(op: UnaryOp, value: Expr) -> Expr {
    Expr::Unary {
        op,
        value: b(value),
    }
}

/// `fun(args)`, lane by lane where WGSL applies it component-wise.
pub fn math(fun: F, args: &[Value]) -> Result<Value, Refusal> {
    let ty = args[0].ty;
    let float = ty == ScalarTy::Elem(ElemType::F32);
    let integer = matches!(ty, ScalarTy::Elem(ElemType::U32 | ElemType::I32));
    let unary = |op| lanewise(args, |l| un(op, l[0].clone()));
    let binary = |op| lanewise(args, |l| bin(op, l[0].clone(), l[1].clone()));
    let bits = |op| {
        lanewise(args, |l| Expr::Bits {
            op,
            value: b(l[0].clone()),
        })
    };
    Ok(match fun {
        F::Abs if ty != ScalarTy::Bool => unary(UnaryOp::Abs),
        F::Min if ty != ScalarTy::Bool => binary(BinOp::Min),
        F::Max if ty != ScalarTy::Bool => binary(BinOp::Max),
        F::Clamp if ty != ScalarTy::Bool => lanewise(args, |l| {
            bin(
                BinOp::Min,
                bin(BinOp::Max, l[0].clone(), l[1].clone()),
                l[2].clone(),
            )
        }),
        F::Floor if float => unary(UnaryOp::Floor),
        F::Ceil if float => unary(UnaryOp::Ceil),
        F::Sqrt if float => unary(UnaryOp::Sqrt),
        F::InverseSqrt if float => unary(UnaryOp::InverseSqrt),
        F::Exp if float => unary(UnaryOp::Exp),
        F::Log if float => unary(UnaryOp::Log),
        F::Tanh if float => unary(UnaryOp::Tanh),
        F::Sin if float => unary(UnaryOp::Sin),
        F::Cos if float => unary(UnaryOp::Cos),
        F::Tan if float => unary(UnaryOp::Tan),
        F::Sinh if float => unary(UnaryOp::Sinh),
        F::Cosh if float => unary(UnaryOp::Cosh),
        F::Asin if float => unary(UnaryOp::Asin),
        F::Acos if float => unary(UnaryOp::Acos),
        F::Atan if float => unary(UnaryOp::Atan),
        F::Asinh if float => unary(UnaryOp::Asinh),
        F::Acosh if float => unary(UnaryOp::Acosh),
        F::Atanh if float => unary(UnaryOp::Atanh),
        F::Trunc if float => unary(UnaryOp::Trunc),
        F::Round if float => unary(UnaryOp::Round),
        F::Pow if float => binary(BinOp::Pow),
        // WGSL's `atan2(y, x)` and the IR's `Atan2` both take `y` first.
        F::Atan2 if float => binary(BinOp::Atan2),
        F::CountOneBits if integer => bits(BitFn::CountOneBits),
        F::CountLeadingZeros if integer => bits(BitFn::CountLeadingZeros),
        F::CountTrailingZeros if integer => bits(BitFn::CountTrailingZeros),
        F::FirstTrailingBit if integer => bits(BitFn::FirstTrailingBit),
        F::FirstLeadingBit if integer => bits(BitFn::FirstLeadingBit),
        F::ReverseBits if integer => bits(BitFn::ReverseBits),
        F::Fma if float => lanewise(args, |l| Expr::Fma {
            a: b(l[0].clone()),
            b: b(l[1].clone()),
            c: b(l[2].clone()),
        }),
        F::Degrees if float => lanewise(args, |l| {
            bin(BinOp::Mul, l[0].clone(), f32_lit(DEGREES_PER_RADIAN))
        }),
        F::Radians if float => lanewise(args, |l| {
            bin(BinOp::Mul, l[0].clone(), f32_lit(RADIANS_PER_DEGREE))
        }),
        F::Dot if ty != ScalarTy::Bool => Value::scalar(ty, dot(&args[0], &args[1])),
        F::Length if float => Value::scalar(ty, length(&args[0])),
        F::Normalize if float => {
            let length = length(&args[0]);
            lanewise(&args[..1], |l| {
                bin(BinOp::Div, l[0].clone(), length.clone())
            })
        }
        other => {
            return Err((
                Construct::Math(format!("{other:?}")),
                "Lockstep's IR has no such function on this type yet",
            ));
        }
    })
}

/// WGSL's `degrees(x)` is inherited from `x * 57.295779513082322865`, rounded to `f32`.
const DEGREES_PER_RADIAN: f32 = 57.295_779_513_082_32_f64 as f32;
/// WGSL's `radians(x)` is inherited from `x * 0.017453292519943295`, rounded to `f32`.
const RADIANS_PER_DEGREE: f32 = 0.017_453_292_519_943_295_f64 as f32;

fn f32_lit(v: f32) -> Expr {
    Expr::Lit(Scalar::F32(v))
}

/// `f` applied lane by lane to the arguments' lanes (a scalar argument repeats), with the
/// first argument's type.
fn lanewise(args: &[Value], f: impl Fn(&[Expr]) -> Expr) -> Value {
    let lanes = args.iter().map(|a| a.lanes.len()).max().unwrap_or(1);
    let lanes = (0..lanes)
        .map(|k| f(&args.iter().map(|a| a.lane(k)).collect::<Vec<_>>()))
        .collect();
    Value {
        ty: args[0].ty,
        lanes,
    }
}

/// `((a0*b0 + a1*b1) + a2*b2) + ...`.
fn dot(a: &Value, b_: &Value) -> Expr {
    let products = a
        .lanes
        .iter()
        .zip(&b_.lanes)
        .map(|(x, y)| bin(BinOp::Mul, x.clone(), y.clone()));
    products
        .reduce(|sum, p| bin(BinOp::Add, sum, p))
        .unwrap_or_else(|| f32_lit(0.0))
}

/// `sqrt(dot(x, x))`, or `abs(x)` for a scalar (WGSL's `length` of a scalar).
fn length(x: &Value) -> Expr {
    match x.lanes.as_slice() {
        [only] => un(UnaryOp::Abs, only.clone()),
        _ => un(UnaryOp::Sqrt, dot(x, x)),
    }
}
