//! Which barriers a kernel's text puts in divergent control flow: flow that depends on the
//! invocation id (`global_id`, `local_id`), directly or through local variables, load indices
//! and atomics' previous values (which differ between invocations by nature). A loaded value
//! at a uniform index counts as uniform here: control flow that diverges on data is the
//! simulator's to report when it happens.
//!
//! A variable is varying if any assignment gives it a varying value or happens in divergent
//! control flow; the analysis iterates to a fixed point (variables only ever become varying,
//! so it ends after at most one pass per variable).

use std::fmt;

use super::ir::{Builtin, Expr, KernelDef, Stmt, VarId};

/// Why a barrier's control flow diverges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DivergenceCause {
    /// Inside an `if` whose condition depends on the invocation id.
    Branch,
    /// Inside a loop whose condition or bounds depend on the invocation id.
    LoopCondition,
    /// Inside a loop that invocations may leave at different iterations: a `break` or
    /// `continue` under a condition that depends on the invocation id.
    LoopExit,
}

impl fmt::Display for DivergenceCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DivergenceCause::Branch => "inside an `if` whose condition depends on the invocation id",
            DivergenceCause::LoopCondition => {
                "inside a loop whose condition or bounds depend on the invocation id"
            }
            DivergenceCause::LoopExit => {
                "inside a loop that a `break` or `continue` under an id-dependent condition lets invocations leave at different iterations"
            }
        })
    }
}

/// The first barrier (in program order) that is reached in divergent control flow, by cause.
pub(crate) fn check_barriers(def: &KernelDef) -> Result<(), DivergenceCause> {
    let mut analysis = Analysis {
        varying: vec![false; def.locals.len()],
        changed: false,
        divergent_barrier: None,
    };
    loop {
        analysis.changed = false;
        analysis.divergent_barrier = None;
        analysis.block(&def.body, None);
        if !analysis.changed {
            // This pass saw the final set of varying variables.
            return analysis.divergent_barrier.map_or(Ok(()), Err);
        }
    }
}

struct Analysis {
    /// Per local: whether its value may differ between invocations of a workgroup.
    varying: Vec<bool>,
    /// Whether this pass marked a variable varying.
    changed: bool,
    divergent_barrier: Option<DivergenceCause>,
}

impl Analysis {
    fn mark(&mut self, var: VarId) {
        if let Some(v) = self.varying.get_mut(var.0 as usize)
            && !*v
        {
            *v = true;
            self.changed = true;
        }
    }

    fn is_varying(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Builtin(b) => matches!(b, Builtin::GlobalId(_) | Builtin::LocalId(_)),
            Expr::Var(v) => self.varying.get(v.0 as usize).copied().unwrap_or(false),
            Expr::Lit(_) | Expr::Bool(_) | Expr::Param(_) | Expr::Len(_) => false,
            Expr::Load { index: e, .. }
            | Expr::Not(e)
            | Expr::Neg(e)
            | Expr::Unary { value: e, .. }
            | Expr::Cast { value: e, .. }
            | Expr::Bitcast { value: e, .. }
            | Expr::Bits { value: e, .. } => self.is_varying(e),
            Expr::Binary { lhs, rhs, .. }
            | Expr::Cmp { lhs, rhs, .. }
            | Expr::Logic { lhs, rhs, .. } => self.is_varying(lhs) || self.is_varying(rhs),
            Expr::Select {
                cond: a,
                if_true: b,
                if_false: c,
            }
            | Expr::Fma { a, b, c } => {
                self.is_varying(a) || self.is_varying(b) || self.is_varying(c)
            }
        }
    }

    /// Whether a `break` or `continue` of the loop whose body is `body` sits under a varying
    /// condition (nested loops' own exits do not count).
    fn exits_diverge(&self, body: &[Stmt], under_varying: bool) -> bool {
        body.iter().any(|stmt| match stmt {
            Stmt::Break | Stmt::Continue => under_varying,
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let under = under_varying || self.is_varying(cond);
                self.exits_diverge(then_body, under) || self.exits_diverge(else_body, under)
            }
            _ => false,
        })
    }

    /// The divergence inside a loop entered with `divergent`, whose condition or bounds vary
    /// as `bounds_vary` says.
    fn loop_divergence(
        &self,
        divergent: Option<DivergenceCause>,
        bounds_vary: bool,
        body: &[Stmt],
    ) -> Option<DivergenceCause> {
        divergent
            .or(bounds_vary.then_some(DivergenceCause::LoopCondition))
            .or(self
                .exits_diverge(body, false)
                .then_some(DivergenceCause::LoopExit))
    }

    fn block(&mut self, body: &[Stmt], divergent: Option<DivergenceCause>) {
        for stmt in body {
            self.stmt(stmt, divergent);
        }
    }

    fn stmt(&mut self, stmt: &Stmt, divergent: Option<DivergenceCause>) {
        match stmt {
            Stmt::Assign { var, value } => {
                if divergent.is_some() || self.is_varying(value) {
                    self.mark(*var);
                }
            }
            Stmt::Atomic { old, .. } => {
                if let Some(old) = old {
                    self.mark(*old);
                }
            }
            Stmt::CompareExchange { old, .. } => self.mark(*old),
            // A `return` makes no later barrier divergent: an invocation that returned counts
            // as arrived at them (the memory model in `ir.rs`).
            Stmt::Store { .. } | Stmt::Break | Stmt::Continue | Stmt::Return => {}
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let inner = divergent.or(self.is_varying(cond).then_some(DivergenceCause::Branch));
                self.block(then_body, inner);
                self.block(else_body, inner);
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let bounds_vary = self.is_varying(start) || self.is_varying(end);
                let inner = self.loop_divergence(divergent, bounds_vary, body);
                if inner.is_some() {
                    self.mark(*var);
                }
                self.block(body, inner);
            }
            Stmt::While { cond, body } => {
                let inner = self.loop_divergence(divergent, self.is_varying(cond), body);
                self.block(body, inner);
            }
            Stmt::Barrier => {
                if let Some(cause) = divergent {
                    self.divergent_barrier.get_or_insert(cause);
                }
            }
        }
    }
}
