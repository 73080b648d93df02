//! The world's kernels as `KernelBuilder` code that builds the same IR as
//! [`Formula::kernel`] and [`lockstep_kernels::elementwise::overrun`].

use lockstep::kernel::BinOp;

use super::Code;
use lockstep_kernels::formula::{Formula, Term};

/// `let {var} = { .. };` building `formula`'s kernel.
pub fn formula(code: &mut Code, var: &str, formula: &Formula) {
    code.uses(
        "lockstep::kernel",
        &["Access", "Axis", "ElemType", "KernelBuilder"],
    );
    let (mut dst, mut src, mut k, mut neighbour) = (false, false, false, false);
    formula.f.visit(&mut |t| match t {
        Term::Dst => dst = true,
        Term::Src => src = true,
        Term::K => k = true,
        Term::Neighbour => neighbour = true,
        Term::Lit(_) | Term::Op(..) | Term::SelectLt(_) => {}
    });
    let value = term(code, &formula.f).0;
    code.line(format!("let {var} = {{"));
    code.line(format!(
        "    let mut b = KernelBuilder::new({:?}, [{}, 1, 1]);",
        formula.name, formula.workgroup
    ));
    code.line("    let dst = b.binding(ElemType::U32, Access::ReadWrite);");
    code.line(if src {
        "    let src = b.binding(ElemType::U32, Access::Read);"
    } else {
        "    let _src = b.binding(ElemType::U32, Access::Read);"
    });
    code.line(if k {
        "    let k = b.param(ElemType::U32);"
    } else {
        "    b.param(ElemType::U32);"
    });
    code.line("    let i = b.global_id(Axis::X);");
    if let Some(rotate) = formula.rotate {
        staging(code, (rotate, formula.workgroup), neighbour);
    }
    code.line("    b.if_(i.lt(dst.len()), |b| {");
    if dst {
        code.line("        let d = dst.load(i);");
    }
    if src {
        code.line(format!(
            "        let s = src.load((i * {}u32 + {}u32) % src.len());",
            formula.stride, formula.shift
        ));
    }
    code.line(format!("        b.store(dst, i, {value});"));
    code.line("    });");
    code.line("    b.build().unwrap()");
    code.line("};");
}

/// A sharing formula's staging of `dst` through shared memory (of one word per lane of its
/// workgroup of `size`), and `n`, the neighbour's value (when `f` reads it).
fn staging(code: &mut Code, (rotate, size): (u32, u32), neighbour: bool) {
    code.line(format!("    let staged = b.shared(ElemType::U32, {size});"));
    code.line("    let own = b.var(ElemType::U32, 0u32);");
    code.line("    b.if_(i.lt(dst.len()), |b| b.assign(own, dst.load(i)));");
    code.line("    let lane = b.local_id(Axis::X);");
    code.line("    b.store(staged, lane, own);");
    code.line("    b.workgroup_barrier();");
    if neighbour {
        code.line(format!(
            "    let n = staged.load((lane + {rotate}u32) % {size}u32);"
        ));
    }
}

/// `f` as a `Value` over `d` (`dst[i]`), `s` (`src[j]`), `n` (the neighbour's `dst`) and `k`,
/// and whether it is an infix operation (which needs parentheses as an operand or a receiver).
fn term(code: &mut Code, t: &Term) -> (String, bool) {
    match t {
        Term::Dst => ("d".into(), false),
        Term::Src => ("s".into(), false),
        Term::Neighbour => ("n".into(), false),
        Term::K => ("k".into(), false),
        Term::Lit(v) => {
            code.uses("lockstep::kernel", &["Value"]);
            (format!("Value::from({v}u32)"), false)
        }
        Term::Op(op, a, b) => {
            // `min` and `max` are methods: their argument needs no parentheses.
            let infix = !matches!(op, BinOp::Min | BinOp::Max);
            binary(*op, &grouped(code, a), &operand(code, b, infix))
        }
        Term::SelectLt(t) => {
            let [a, b, c, d] = &**t;
            let a = grouped(code, a);
            let b = operand(code, b, false);
            let (c, d) = (operand(code, c, false), operand(code, d, false));
            (format!("{a}.lt({b}).select({c}, {d})"), false)
        }
    }
}

/// `t` in parentheses if it is an infix operation.
fn grouped(code: &mut Code, t: &Term) -> String {
    match term(code, t) {
        (text, true) => format!("({text})"),
        (text, false) => text,
    }
}

/// An argument (of an operator when `infix`, else of a method): a literal converts itself
/// (`impl Into<Value>`).
fn operand(code: &mut Code, t: &Term, infix: bool) -> String {
    match t {
        Term::Lit(v) => format!("{v}u32"),
        t if infix => grouped(code, t),
        t => term(code, t).0,
    }
}

/// `a op b` with the builder's operator or method for `op`; whether it is infix.
fn binary(op: BinOp, a: &str, b: &str) -> (String, bool) {
    let infix = |symbol: &str| (format!("{a} {symbol} {b}"), true);
    match op {
        BinOp::Add => infix("+"),
        BinOp::Sub => infix("-"),
        BinOp::Mul => infix("*"),
        BinOp::Div => infix("/"),
        BinOp::Rem => infix("%"),
        BinOp::BitAnd => infix("&"),
        BinOp::BitOr => infix("|"),
        BinOp::BitXor => infix("^"),
        BinOp::Shl => infix("<<"),
        BinOp::Shr => infix(">>"),
        BinOp::Min => (format!("{a}.min({b})"), false),
        BinOp::Max => (format!("{a}.max({b})"), false),
        BinOp::Pow => (format!("{a}.pow({b})"), false),
        BinOp::Atan2 => (format!("{a}.atan2({b})"), false),
    }
}

/// `let overrun = { .. };`: the checked kernel that stores one element past the end.
pub fn overrun(code: &mut Code) {
    code.uses("lockstep::kernel", &["Access", "ElemType", "KernelBuilder"]);
    code.line("let overrun = {");
    code.line("    let mut b = KernelBuilder::new(\"overrun\", [1, 1, 1]);");
    code.line("    let data = b.binding(ElemType::U32, Access::ReadWrite);");
    code.line("    let past_end = b.param(ElemType::U32);");
    code.line("    b.store(data, data.len() + past_end, 1u32);");
    code.line("    b.build().unwrap()");
    code.line("};");
}
