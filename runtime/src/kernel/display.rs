//! IR as one-line text, for reports a person reads (the simulator's kernel sanitizer): an
//! expression in full, a statement by its head (`if cond`, not its branches), and statements
//! numbered in program order.
//!
//! Names: `b1` is binding 1, `s0` shared array 0, `l2` local array 2, `v3` local 3, `p0`
//! parameter 0; literals carry their type (`7u`, `-3i`, `1.5f`).

use std::fmt;

use super::ir::{
    Array, AtomicOp, Axis, BinOp, Builtin, CmpOp, Expr, LogicOp, Scalar, Stmt, UnaryOp,
};

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::U32(v) => write!(f, "{v}u"),
            Scalar::I32(v) => write!(f, "{v}i"),
            Scalar::F32(v) => write!(f, "{v:?}f"),
            Scalar::F16(v) => write!(f, "{:?}h", v.to_f32()),
            Scalar::BF16(v) => write!(f, "{:?}bf", v.to_f32()),
        }
    }
}

/// An array as expressions name it: `b1`, `s0`.
struct ArrayName(Array);

impl fmt::Display for ArrayName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Array::Binding(b) => write!(f, "b{}", b.0),
            Array::Shared(s) => write!(f, "s{}", s.0),
            Array::Local(l) => write!(f, "l{}", l.0),
        }
    }
}

fn axis(a: Axis) -> &'static str {
    ["x", "y", "z"][a.index()]
}

fn binary_symbol(op: BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::BitAnd => "&",
        BinOp::BitOr => "|",
        BinOp::BitXor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Min | BinOp::Max | BinOp::Pow | BinOp::Atan2 => return None,
    })
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Lit(s) => s.fmt(f),
            Expr::Bool(b) => b.fmt(f),
            Expr::Builtin(b) => match b {
                Builtin::GlobalId(a) => write!(f, "global_id.{}", axis(*a)),
                Builtin::LocalId(a) => write!(f, "local_id.{}", axis(*a)),
                Builtin::WorkgroupId(a) => write!(f, "workgroup_id.{}", axis(*a)),
                Builtin::NumWorkgroups(a) => write!(f, "num_workgroups.{}", axis(*a)),
            },
            Expr::Param(p) => write!(f, "p{p}"),
            Expr::Var(v) => write!(f, "v{}", v.0),
            Expr::Len(b) => write!(f, "len(b{})", b.0),
            Expr::Load { array, index } => write!(f, "{}[{index}]", ArrayName(*array)),
            Expr::Binary { op, lhs, rhs } => match binary_symbol(*op) {
                Some(symbol) => write!(f, "({lhs} {symbol} {rhs})"),
                None => write!(f, "{}({lhs}, {rhs})", format!("{op:?}").to_lowercase()),
            },
            Expr::Cmp { op, lhs, rhs } => {
                let symbol = match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                write!(f, "({lhs} {symbol} {rhs})")
            }
            Expr::Logic { op, lhs, rhs } => {
                let symbol = match op {
                    LogicOp::And => "&&",
                    LogicOp::Or => "||",
                };
                write!(f, "({lhs} {symbol} {rhs})")
            }
            Expr::Not(e) => write!(f, "!{e}"),
            Expr::Neg(e) => write!(f, "-{e}"),
            Expr::Unary { op, value } => write!(f, "{}({value})", unary_name(*op)),
            Expr::Fma { a, b, c } => write!(f, "fma({a}, {b}, {c})"),
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => write!(f, "({cond} ? {if_true} : {if_false})"),
            Expr::Cast { to, value } => write!(f, "{to}({value})"),
            Expr::Bitcast { to, value } => write!(f, "bitcast<{to}>({value})"),
            Expr::Bits { op, value } => write!(f, "{}({value})", op.name()),
        }
    }
}

fn unary_name(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::InverseSqrt => "inverse_sqrt",
        other => other.name(),
    }
}

/// A statement's head: the whole of a simple statement, the condition or range of a compound
/// one.
pub struct Head<'a>(pub &'a Stmt);

impl fmt::Display for Head<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Stmt::Assign { var, value } => write!(f, "v{} = {value}", var.0),
            Stmt::Store {
                array,
                index,
                value,
            } => write!(f, "{}[{index}] = {value}", ArrayName(*array)),
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                old,
            } => {
                if let Some(v) = old {
                    write!(f, "v{} = ", v.0)?;
                }
                let name = match op {
                    AtomicOp::Add => "atomic_add",
                    AtomicOp::Min => "atomic_min",
                    AtomicOp::Max => "atomic_max",
                    AtomicOp::Exchange => "atomic_exchange",
                    AtomicOp::And => "atomic_and",
                    AtomicOp::Or => "atomic_or",
                    AtomicOp::Xor => "atomic_xor",
                };
                write!(f, "{name}({}[{index}], {value})", ArrayName(*array))
            }
            Stmt::CompareExchange {
                array,
                index,
                expected,
                value,
                old,
            } => write!(
                f,
                "v{} = compare_exchange({}[{index}], {expected}, {value})",
                old.0,
                ArrayName(*array)
            ),
            Stmt::If { cond, .. } => write!(f, "if {cond}"),
            Stmt::For {
                var, start, end, ..
            } => write!(f, "for v{} in {start}..{end}", var.0),
            Stmt::While { cond, .. } => write!(f, "while {cond}"),
            Stmt::Break => f.write_str("break"),
            Stmt::Continue => f.write_str("continue"),
            Stmt::Barrier => f.write_str("workgroup_barrier"),
            Stmt::Return => f.write_str("return"),
        }
    }
}

/// Every statement of `body` in program order (pre-order: a compound statement, then its then
/// branch, else branch or loop body). Statement `n` of a kernel is the `n`-th, counted from 1.
pub fn statements(body: &[Stmt]) -> Vec<&Stmt> {
    let mut out = Vec::new();
    collect(body, &mut out);
    out
}

fn collect<'a>(body: &'a [Stmt], out: &mut Vec<&'a Stmt>) {
    for stmt in body {
        out.push(stmt);
        match stmt {
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect(then_body, out);
                collect(else_body, out);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => collect(body, out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{Access, Axis, ElemType, KernelBuilder};

    #[test]
    fn statements_print_their_heads_in_program_order() {
        let mut k = KernelBuilder::new("show", [8, 1, 1]);
        let out = k.binding(ElemType::F32, Access::ReadWrite);
        let tile = k.shared(ElemType::U32, 8);
        let lid = k.local_id(Axis::X);
        k.if_(lid.lt(4u32), |k| k.store(tile, lid, lid * 2u32));
        k.workgroup_barrier();
        let n = k.var(ElemType::U32, tile.load(0u32).min(3u32));
        k.while_(n.get().gt(0u32), |k| {
            k.assign(n, n.get() - 1u32);
        });
        let x = out.load(k.global_id(Axis::X)).rsqrt().fma(-1.5f32, 2.0f32);
        k.store(out, k.global_id(Axis::X), x);
        k.atomic_add(tile, 1u32, 7u32);
        k.if_(lid.equals(0u32), |k| k.return_());
        let kernel = k.build().unwrap();
        let lines: Vec<String> = statements(&kernel.def().body)
            .iter()
            .map(|s| Head(s).to_string())
            .collect();
        assert_eq!(
            lines,
            vec![
                "if (local_id.x < 4u)",
                "s0[local_id.x] = (local_id.x * 2u)",
                "workgroup_barrier",
                "v0 = min(s0[0u], 3u)",
                "while (v0 > 0u)",
                "v0 = (v0 - 1u)",
                "b0[global_id.x] = fma(inverse_sqrt(b0[global_id.x]), -1.5f, 2.0f)",
                "atomic_add(s0[1u], 7u)",
                "if (local_id.x == 0u)",
                "return",
            ]
        );
    }
}
