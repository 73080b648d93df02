//! WGSL's operators on single lanes, as Lockstep IR. Pure functions of expressions: each
//! either gives IR whose result is WGSL's (the module doc of `lockstep::kernel` states the IR
//! rules relied on) or says which construct it refuses.
//!
//! Rules kept, with where the IR agrees:
//! - integer `/` and `%` by zero give the left operand and 0, `i32::MIN / -1` gives
//!   `i32::MIN` and `i32::MIN % -1` gives 0 (the IR's `Div`/`Rem`);
//! - shift amounts are taken modulo 32 (the IR's `Shl`/`Shr`, arithmetic for `i32`);
//! - `f32` to an integer truncates and saturates; WGSL leaves NaN's result unspecified and
//!   the IR gives 0, one of the values WGSL allows;
//! - integer to `f32` rounds to nearest even, one of the two roundings WGSL allows;
//! - `i32` ↔ `u32` conversions keep the bits (the IR's integer `Cast`);
//! - `bitcast<T>(x)` among `u32`, `i32` and `f32` keeps every bit, a NaN's payload included
//!   (the IR's `Bitcast`);
//! - `bool(x)` is `x != 0` (for floats `-0.0` is false and NaN true), `u32(b)` is 1 or 0.
//!
//! Refused: float `%` (WGSL's `x - y * trunc(x / y)` rounds differently from the IR's `Rem`,
//! C's `fmod`) and bitcasts from or to `bool` (not WGSL).

use lockstep::kernel::{BinOp, CmpOp, ElemType, Expr, LogicOp, Scalar};
use naga::{BinaryOperator, ScalarKind, UnaryOperator};

use super::error::Construct;
use super::types::ScalarTy;

/// Why an operator cannot be translated: the construct and the detail of the refusal.
pub type Refusal = (Construct, &'static str);

const U32: ScalarTy = ScalarTy::Elem(ElemType::U32);

/// `Box::new`, for building IR trees.
fn b(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// `lhs op rhs` on two lanes, with the result's type. `ty` is the left operand's type (the
/// right one's too, except for shifts, whose amount is `u32`).
pub fn binary(
    op: BinaryOperator,
    ty: ScalarTy,
    lhs: Expr,
    rhs: Expr,
) -> Result<(ScalarTy, Expr), Refusal> {
    use BinaryOperator as O;
    let arith = |op| Expr::Binary {
        op,
        lhs: b(lhs.clone()),
        rhs: b(rhs.clone()),
    };
    let cmp = |op| Expr::Cmp {
        op,
        lhs: b(lhs.clone()),
        rhs: b(rhs.clone()),
    };
    Ok(match (op, ty) {
        (O::Modulo, ScalarTy::Elem(ElemType::F32)) => {
            return Err((
                Construct::Semantics("f32 %".to_owned()),
                "WGSL's float remainder is x - y * trunc(x / y); the IR's Rem is fmod",
            ));
        }
        (O::Equal | O::NotEqual, ScalarTy::Bool) => {
            (ScalarTy::Bool, bool_compare(op == O::Equal, lhs, rhs))
        }
        (O::And | O::LogicalAnd, ScalarTy::Bool) => (ScalarTy::Bool, logic(LogicOp::And, lhs, rhs)),
        (O::InclusiveOr | O::LogicalOr, ScalarTy::Bool) => {
            (ScalarTy::Bool, logic(LogicOp::Or, lhs, rhs))
        }
        (O::ExclusiveOr, ScalarTy::Bool) => (ScalarTy::Bool, bool_compare(false, lhs, rhs)),
        (_, ScalarTy::Bool) => return Err((bad_operator(op), "not defined on booleans")),
        (O::Add, _) => (ty, arith(BinOp::Add)),
        (O::Subtract, _) => (ty, arith(BinOp::Sub)),
        (O::Multiply, _) => (ty, arith(BinOp::Mul)),
        (O::Divide, _) => (ty, arith(BinOp::Div)),
        (O::Modulo, _) => (ty, arith(BinOp::Rem)),
        (O::And, _) => (ty, arith(BinOp::BitAnd)),
        (O::InclusiveOr, _) => (ty, arith(BinOp::BitOr)),
        (O::ExclusiveOr, _) => (ty, arith(BinOp::BitXor)),
        (O::ShiftLeft | O::ShiftRight, ScalarTy::Elem(elem)) => (ty, shift(op, elem, lhs, rhs)),
        (O::Equal, _) => (ScalarTy::Bool, cmp(CmpOp::Eq)),
        (O::NotEqual, _) => (ScalarTy::Bool, cmp(CmpOp::Ne)),
        (O::Less, _) => (ScalarTy::Bool, cmp(CmpOp::Lt)),
        (O::LessEqual, _) => (ScalarTy::Bool, cmp(CmpOp::Le)),
        (O::Greater, _) => (ScalarTy::Bool, cmp(CmpOp::Gt)),
        (O::GreaterEqual, _) => (ScalarTy::Bool, cmp(CmpOp::Ge)),
        (O::LogicalAnd | O::LogicalOr, _) => {
            return Err((bad_operator(op), "defined on booleans only"));
        }
    })
}

fn bad_operator(op: BinaryOperator) -> Construct {
    Construct::Expression(format!("Binary {op:?}"))
}

fn logic(op: LogicOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Logic {
        op,
        lhs: b(lhs),
        rhs: b(rhs),
    }
}

/// `a == b` (or `a != b`) on booleans, comparing their `u32` forms.
fn bool_compare(equal: bool, lhs: Expr, rhs: Expr) -> Expr {
    let op = if equal { CmpOp::Eq } else { CmpOp::Ne };
    Expr::Cmp {
        op,
        lhs: b(to_stored(ScalarTy::Bool, lhs)),
        rhs: b(to_stored(ScalarTy::Bool, rhs)),
    }
}

/// A shift of `elem` by a `u32` amount; for `i32` the amount is reinterpreted, which keeps
/// it modulo 32.
fn shift(op: BinaryOperator, elem: ElemType, lhs: Expr, amount: Expr) -> Expr {
    let op = if op == BinaryOperator::ShiftLeft {
        BinOp::Shl
    } else {
        BinOp::Shr
    };
    let amount = if elem == ElemType::U32 {
        amount
    } else {
        Expr::Cast {
            to: elem,
            value: b(amount),
        }
    };
    Expr::Binary {
        op,
        lhs: b(lhs),
        rhs: b(amount),
    }
}

/// A unary operator on one lane.
pub fn unary(op: UnaryOperator, ty: ScalarTy, value: Expr) -> Result<Expr, Refusal> {
    Ok(match (op, ty) {
        (UnaryOperator::LogicalNot, ScalarTy::Bool) => Expr::Not(b(value)),
        (UnaryOperator::Negate, ScalarTy::Elem(ElemType::I32 | ElemType::F32)) => {
            Expr::Neg(b(value))
        }
        (UnaryOperator::BitwiseNot, ScalarTy::Elem(elem @ (ElemType::U32 | ElemType::I32))) => {
            let ones = Expr::Lit(Scalar::from_bits(elem, u32::MAX));
            Expr::Binary {
                op: BinOp::BitXor,
                lhs: b(value),
                rhs: b(ones),
            }
        }
        _ => {
            return Err((
                Construct::Expression(format!("Unary {op:?} on {ty:?}")),
                "not WGSL",
            ));
        }
    })
}

/// `select(if_false, if_true, cond)` on one lane of `ty`; both sides are evaluated, as in
/// WGSL.
pub fn select(ty: ScalarTy, cond: Expr, if_true: Expr, if_false: Expr) -> Expr {
    let chosen = Expr::Select {
        cond: b(cond),
        if_true: b(to_stored(ty, if_true)),
        if_false: b(to_stored(ty, if_false)),
    };
    from_stored(ty, chosen)
}

/// A lane of `ty` as a local or array element holds it: booleans as `u32` 1 or 0.
pub fn to_stored(ty: ScalarTy, lane: Expr) -> Expr {
    match ty {
        ScalarTy::Bool => Expr::Select {
            cond: b(lane),
            if_true: b(1u32.into()),
            if_false: b(0u32.into()),
        },
        ScalarTy::Elem(_) => lane,
    }
}

/// A stored lane read back as `ty`: a `u32` is true when not zero.
pub fn from_stored(ty: ScalarTy, stored: Expr) -> Expr {
    match ty {
        ScalarTy::Bool => Expr::Cmp {
            op: CmpOp::Ne,
            lhs: b(stored),
            rhs: b(0u32.into()),
        },
        ScalarTy::Elem(_) => stored,
    }
}

/// A lane of an element of `stored` type read as `ty`: booleans from `u32`, and another
/// 32-bit type from `u32` words (the info buffer's signed scalars) by their bits.
pub fn reinterpret_load(stored: ElemType, ty: ScalarTy, lane: Expr) -> Expr {
    match ty {
        ScalarTy::Elem(elem) if elem != stored => Expr::Bitcast {
            to: elem,
            value: b(lane),
        },
        _ => from_stored(ty, lane),
    }
}

/// WGSL's value conversion `T(x)` (`convert` is the target width in bytes), or its bitcast
/// `bitcast<T>(x)` when `convert` is `None`.
pub fn cast(
    from: ScalarTy,
    kind: ScalarKind,
    convert: Option<u8>,
    value: Expr,
) -> Result<(ScalarTy, Expr), Refusal> {
    let to = match (kind, convert) {
        (ScalarKind::Bool, _) => ScalarTy::Bool,
        (ScalarKind::Uint, None | Some(4)) => ScalarTy::Elem(ElemType::U32),
        (ScalarKind::Sint, None | Some(4)) => ScalarTy::Elem(ElemType::I32),
        (ScalarKind::Float, None | Some(4)) => ScalarTy::Elem(ElemType::F32),
        (kind, Some(width)) => {
            return Err((
                Construct::Type(format!("{kind:?}{}", u32::from(width) * 8)),
                "Lockstep's IR has 32-bit types",
            ));
        }
        (kind, None) => return Err((Construct::Type(format!("{kind:?}")), "not a WGSL type")),
    };
    Ok((
        to,
        if convert.is_some() {
            convert_lane(from, to, value)
        } else {
            bitcast(from, to, value)?
        },
    ))
}

fn convert_lane(from: ScalarTy, to: ScalarTy, value: Expr) -> Expr {
    match (from, to) {
        (a, b) if a == b => value,
        (ScalarTy::Bool, ScalarTy::Elem(elem)) => Expr::Select {
            cond: b(value),
            if_true: b(one(elem)),
            if_false: b(Expr::Lit(Scalar::from_bits(elem, 0))),
        },
        (ScalarTy::Elem(elem), ScalarTy::Bool) => Expr::Cmp {
            op: CmpOp::Ne,
            lhs: b(value),
            rhs: b(Expr::Lit(Scalar::from_bits(elem, 0))),
        },
        (ScalarTy::Elem(_), ScalarTy::Elem(to)) => Expr::Cast {
            to,
            value: b(value),
        },
        (ScalarTy::Bool, ScalarTy::Bool) => value,
    }
}

/// `bitcast<to>(value)`: the IR's `Bitcast` among the 32-bit types.
fn bitcast(from: ScalarTy, to: ScalarTy, value: Expr) -> Result<Expr, Refusal> {
    const WORDS: [ElemType; 3] = [ElemType::U32, ElemType::I32, ElemType::F32];
    match (from, to) {
        (a, b) if a == b => Ok(value),
        (ScalarTy::Elem(from), ScalarTy::Elem(to))
            if WORDS.contains(&from) && WORDS.contains(&to) =>
        {
            Ok(Expr::Bitcast {
                to,
                value: b(value),
            })
        }
        _ => Err((
            Construct::Bitcast {
                from: ty_name(from),
                to: ty_name(to),
            },
            "a bitcast reinterprets a number's bits as a number of the same size",
        )),
    }
}

fn ty_name(ty: ScalarTy) -> String {
    ty.elem()
        .map_or_else(|| "bool".to_owned(), |e| e.to_string())
}

/// Lane `index` (a `u32` expression) of `vector`: a select chain over its lanes. WGSL leaves
/// an index past the last lane indeterminate; the chain gives the last lane.
pub fn lane_chain(vector: &super::types::Value, index: &Expr) -> Expr {
    let last = vector.lanes.len() - 1;
    (0..last).rev().fold(vector.lane(last), |rest, k| {
        let is_k = Expr::Cmp {
            op: CmpOp::Eq,
            lhs: b(index.clone()),
            rhs: b((k as u32).into()),
        };
        select(vector.ty, is_k, vector.lane(k), rest)
    })
}

/// One of `elem`.
pub fn one(elem: ElemType) -> Expr {
    Expr::Lit(match elem {
        ElemType::F32 => Scalar::F32(1.0),
        other => Scalar::from_bits(other, 1),
    })
}

/// `u32` operands of index arithmetic.
pub fn u32_add(lhs: Expr, rhs: u32) -> Expr {
    if rhs == 0 {
        return lhs;
    }
    Expr::Binary {
        op: BinOp::Add,
        lhs: b(lhs),
        rhs: b(rhs.into()),
    }
}

/// `lhs * rhs` on `u32`s, `lhs` itself when `rhs` is 1.
pub fn u32_mul(lhs: Expr, rhs: u32) -> Expr {
    if rhs == 1 {
        return lhs;
    }
    Expr::Binary {
        op: BinOp::Mul,
        lhs: b(lhs),
        rhs: b(rhs.into()),
    }
}

/// An index of type `ty` as the `u32` the IR indexes with (an `i32` keeps its bits, so a
/// negative index is out of range).
pub fn index_u32(ty: ScalarTy, index: Expr) -> Option<Expr> {
    match ty {
        U32 => Some(index),
        ScalarTy::Elem(ElemType::I32) => Some(Expr::Cast {
            to: ElemType::U32,
            value: b(index),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
