//! Kernels that return early and have barriers, lowered in uniform control flow.
//!
//! The IR counts a thread that returned as arrived at every later barrier of its workgroup.
//! `__syncthreads` (`bar.sync`, aligned) must be executed by every thread of a warp, and a
//! thread that left the body would start the next workgroup of an indirect launch while the
//! others still wait; a divergent `__syncthreads_or` hung the GPU here. So in such a kernel no
//! thread leaves the body early: `return` sets `ls_done`, and a thread that returned follows the
//! others through every barrier:
//! - every statement without a barrier (effects, and `if`s and loops that hold none) runs
//!   under `if (!ls_done)`; a loop of those breaks at the top of an iteration once `ls_done`,
//!   and a `return` inside it breaks at once;
//! - a barrier is reached by every thread;
//! - a decision a barrier depends on (the condition of an `if` that holds a barrier or leaves a
//!   loop that holds one, the test of such a loop) is `__syncthreads_or(c)` over the running
//!   threads' `c`, which the validator makes the same for all of them (a condition that
//!   depends on the thread's id is refused; one that diverges on data is a divergent barrier,
//!   which the simulator reports). Every thread therefore runs the same barriers, and the
//!   vote's own barrier only adds order.

use lockstep::kernel::display::statements;
use lockstep::kernel::{Expr, Stmt, VarId};

use super::{Lowering, c_type, unparen};

/// Whether `body` (nested statements included) holds a barrier.
fn has_barrier(body: &[Stmt]) -> bool {
    statements(body).iter().any(|s| matches!(s, Stmt::Barrier))
}

/// Whether `body` leaves or continues the loop it is in (not a loop nested in it).
fn exits(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Break | Stmt::Continue => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => exits(then_body) || exits(else_body),
        _ => false,
    })
}

impl Lowering<'_> {
    /// `stmt` of a mirrored kernel (see the module doc).
    pub(super) fn mirrored(&mut self, stmt: &Stmt) {
        let in_mirrored_loop = self.loops.last() == Some(&true);
        match stmt {
            Stmt::Barrier | Stmt::Break | Stmt::Continue => self.plain(stmt),
            Stmt::Return => self.returned(),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } if has_barrier(then_body)
                || has_barrier(else_body)
                || (in_mirrored_loop && (exits(then_body) || exits(else_body))) =>
            {
                let vote = self.vote(cond);
                self.line(&format!("if ({vote}) {{"));
                self.block(then_body);
                if !else_body.is_empty() {
                    self.line("} else {");
                    self.block(else_body);
                }
                self.line("}");
            }
            Stmt::While { cond, body } if has_barrier(body) => {
                self.line("while (true) {");
                self.indent += 1;
                let vote = self.vote(cond);
                self.line(&format!("if (!{vote}) break;"));
                self.indent -= 1;
                self.loop_body(true, body);
                self.line("}");
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } if has_barrier(body) => self.mirrored_for(*var, start, end, body),
            other => {
                self.line("if (!ls_done) {");
                self.indent += 1;
                self.plain(other);
                self.indent -= 1;
                self.line("}");
            }
        }
    }

    /// `return`: in a mirrored kernel the thread stays, done; inside a loop without barriers
    /// it leaves the loop (the loops around that one break at their next test).
    pub(super) fn returned(&mut self) {
        self.line("ls_done = true;");
        if self.loops.last() == Some(&false) {
            self.line("break;");
        }
    }

    /// A loop's body, one level in (`mirrored`: a loop with a barrier); a loop without
    /// barriers in a mirrored kernel first breaks for a thread that returned inside it.
    pub(super) fn loop_body(&mut self, mirrored: bool, body: &[Stmt]) {
        let returns = statements(body).iter().any(|s| matches!(s, Stmt::Return));
        if self.mirror && !mirrored && returns {
            self.indent += 1;
            self.line("if (ls_done) break;");
            self.indent -= 1;
        }
        self.loops.push(mirrored);
        self.block(body);
        self.loops.pop();
    }

    /// `__syncthreads_or(c)` for condition `c`, evaluated (loads included) by running threads.
    fn vote(&mut self, cond: &Expr) -> String {
        let t = self.temp();
        self.line(&format!("bool {t} = false;"));
        self.line("if (!ls_done) {");
        self.indent += 1;
        let c = self.expr(cond);
        self.line(&format!("{t} = {};", unparen(&c)));
        self.indent -= 1;
        self.line("}");
        format!("__syncthreads_or({t})")
    }

    /// A `for` with a barrier: its bounds evaluated by running threads, its test a vote.
    fn mirrored_for(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt]) {
        let ty = c_type(self.def.locals[var.0 as usize]);
        self.line("{");
        self.indent += 1;
        let (first, last) = (self.temp(), self.temp());
        self.line(&format!("{ty} {first} = 0, {last} = 0;"));
        self.line("if (!ls_done) {");
        self.indent += 1;
        let start = self.expr(start);
        self.line(&format!("{first} = {};", unparen(&start)));
        let end = self.expr(end);
        self.line(&format!("{last} = {};", unparen(&end)));
        self.indent -= 1;
        self.line("}");
        let i = self.temp();
        self.line(&format!(
            "for ({ty} {i} = {first}; __syncthreads_or(!ls_done && {i} < {last}); ++{i}) {{"
        ));
        self.indent += 1;
        self.line(&format!("if (!ls_done) v{} = {i};", var.0));
        self.indent -= 1;
        self.loop_body(true, body);
        self.line("}");
        self.indent -= 1;
        self.line("}");
    }
}
