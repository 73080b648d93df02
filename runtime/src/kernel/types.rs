//! Which element types a kernel uses: what a device must support to run it.

use super::display::statements;
use super::ir::{ElemType, Expr, KernelDef, Stmt};
use crate::properties::Features;

/// Every element type `def` uses (in its bindings, parameters, locals, shared and local arrays,
/// literals and casts), each once, in [`ElemType::ALL`] order.
pub fn used(def: &KernelDef) -> Vec<ElemType> {
    let mut seen = [false; ElemType::ALL.len()];
    let mut mark = |elem: ElemType| seen[position(elem)] = true;
    def.bindings.iter().for_each(|b| mark(b.elem));
    def.shared.iter().for_each(|s| mark(s.elem));
    def.local_arrays.iter().for_each(|l| mark(l.elem));
    def.params.iter().chain(&def.locals).for_each(|&e| mark(e));
    block(&def.body, &mut mark);
    ElemType::ALL
        .into_iter()
        .filter(|&e| seen[position(e)])
        .collect()
}

/// Whether `def` uses a half float (`f16`, `bf16`) anywhere.
pub fn uses_half(def: &KernelDef) -> bool {
    used(def).iter().any(|e| e.is_half())
}

fn position(elem: ElemType) -> usize {
    ElemType::ALL
        .iter()
        .position(|&e| e == elem)
        .unwrap_or_default()
}

/// The expressions of every statement of `body`, nested ones included (their nesting is
/// [`statements`]' to walk).
fn block(body: &[Stmt], mark: &mut impl FnMut(ElemType)) {
    for stmt in statements(body) {
        match stmt {
            Stmt::Assign { value, .. } => expr(value, mark),
            Stmt::Store { index, value, .. } | Stmt::Atomic { index, value, .. } => {
                expr(index, mark);
                expr(value, mark);
            }
            Stmt::CompareExchange {
                index,
                expected,
                value,
                ..
            } => [index, expected, value]
                .into_iter()
                .for_each(|e| expr(e, mark)),
            Stmt::If { cond, .. } | Stmt::While { cond, .. } => expr(cond, mark),
            Stmt::For { start, end, .. } => {
                expr(start, mark);
                expr(end, mark);
            }
            Stmt::Break | Stmt::Continue | Stmt::Barrier | Stmt::Return => {}
        }
    }
}

fn expr(e: &Expr, mark: &mut impl FnMut(ElemType)) {
    match e {
        Expr::Lit(s) => mark(s.elem_type()),
        Expr::Cast { to, .. } | Expr::Bitcast { to, .. } => mark(*to),
        _ => {}
    }
    e.operands().for_each(|o| expr(o, mark));
}

/// Which element types a device's features allow: kept beside the kernel's element types, so
/// that the properties module names nothing of the kernel.
impl Features {
    /// Whether kernels may use values of `elem`: always for the 32-bit types, per flag for the
    /// half floats.
    pub fn supports(&self, elem: ElemType) -> bool {
        match elem {
            ElemType::U32 | ElemType::I32 | ElemType::F32 => true,
            ElemType::F16 => self.f16,
            ElemType::BF16 => self.bf16,
        }
    }

    /// The field of [`Features`] that says whether `elem` is supported (`"f16"`, `"bf16"`);
    /// `None` for the types every device supports.
    pub fn flag_of(elem: ElemType) -> Option<&'static str> {
        match elem {
            ElemType::U32 | ElemType::I32 | ElemType::F32 => None,
            ElemType::F16 => Some("f16"),
            ElemType::BF16 => Some("bf16"),
        }
    }
}
