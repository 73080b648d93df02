//! Kernels that return early and have barriers, lowered in uniform control flow.
//!
//! The IR counts an invocation that returned as arrived at every later barrier of its
//! workgroup. WGSL promises nothing for a barrier that some invocations never reach, and
//! lavapipe loses the invocations that wait at one (a loop with a barrier that some invocations
//! left by `return` ended the workgroup without its later stores). So in such a kernel no
//! invocation leaves `main` early: `return` sets `ls_done`, and an invocation that returned
//! follows the others through every barrier:
//! - every statement without a barrier (effects, and `if`s and loops that hold none) runs
//!   under `if !ls_done`; a loop of those breaks at the top of an iteration once `ls_done`,
//!   and a `return` inside it breaks at once;
//! - a barrier is reached by every invocation;
//! - a decision a barrier depends on (the condition of an `if` that holds a barrier or leaves a
//!   loop that holds one, the test of such a loop) is `ls_vote(c)`: true when `c` holds for
//!   any running invocation, which the validator makes the same for all of them (a condition
//!   that depends on the invocation id is refused; one that diverges on data is a divergent
//!   barrier, which the simulator reports). Every invocation therefore runs the same
//!   barriers, and the vote's own barrier only adds order.

use lockstep::kernel::display::statements;
use lockstep::kernel::{ElemType, Expr, Stmt, VarId};

use super::{Lowerer, wgsl_type};

/// The vote's flags, one per round modulo 3, zero at the start as WGSL's workgroup memory is,
/// and each invocation's round.
pub(super) const VOTE_VARS: &str =
    "var<workgroup> ls_votes: array<atomic<u32>, 3>;\nvar<private> ls_round: u32;\n";

/// Round `r` uses flag `r % 3`: set before the barrier, read after it; the first invocation
/// clears flag `(r + 2) % 3` after it, which everyone read before this barrier and no one
/// sets before the next.
pub(super) const VOTE_FN: &str =
    "// Whether `x` holds for any invocation of the workgroup; every invocation calls it.
fn ls_vote(x: bool, lid: vec3<u32>) -> bool {
    let k = ls_round % 3u;
    ls_round = ls_round + 1u;
    if x { atomicStore(&ls_votes[k], 1u); }
    workgroupBarrier();
    let any = atomicLoad(&ls_votes[k]) != 0u;
    if all(lid == vec3<u32>(0u)) { atomicStore(&ls_votes[(k + 2u) % 3u], 0u); }
    return any;
}
";

/// Whether any statement of `body` (nested ones included) is `Return`, `Barrier`, ….
fn holds(body: &[Stmt], f: impl Fn(&Stmt) -> bool) -> bool {
    statements(body).into_iter().any(f)
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

fn has_barrier(body: &[Stmt]) -> bool {
    holds(body, |s| matches!(s, Stmt::Barrier))
}

impl Lowerer<'_> {
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
                self.line(&format!("if {vote} {{"));
                self.indent += 1;
                self.block(then_body);
                self.indent -= 1;
                if !else_body.is_empty() {
                    self.line("} else {");
                    self.indent += 1;
                    self.block(else_body);
                    self.indent -= 1;
                }
                self.line("}");
            }
            Stmt::While { cond, body } if has_barrier(body) => {
                self.line("loop {");
                self.indent += 1;
                let vote = self.vote(cond);
                self.line(&format!("if !{vote} {{ break; }}"));
                self.loop_body(true, body);
                self.indent -= 1;
                self.line("}");
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } if has_barrier(body) => self.mirrored_for(*var, start, end, body),
            other => {
                self.line("if !ls_done {");
                self.indent += 1;
                self.plain(other);
                self.indent -= 1;
                self.line("}");
            }
        }
    }

    /// `return`: in a mirrored kernel the invocation stays, done; inside a loop without
    /// barriers it leaves the loop (the loops around that one break at their next test).
    pub(super) fn returned(&mut self) {
        self.line("ls_done = true;");
        if self.loops.last() == Some(&false) {
            self.line("break;");
        }
    }

    /// A loop's body (`mirrored`: a loop with a barrier); a loop without barriers in a
    /// mirrored kernel first breaks for an invocation that returned inside it.
    pub(super) fn loop_body(&mut self, mirrored: bool, body: &[Stmt]) {
        if self.mirror && !mirrored && holds(body, |s| matches!(s, Stmt::Return)) {
            self.line("if ls_done { break; }");
        }
        self.loops.push(mirrored);
        self.block(body);
        self.loops.pop();
    }

    /// `ls_vote(c)` for condition `c`, evaluated (loads included) by running invocations only.
    fn vote(&mut self, cond: &Expr) -> String {
        let t = self.temp();
        self.line(&format!("var {t} = false;"));
        self.line("if !ls_done {");
        self.indent += 1;
        let c = self.expr(cond);
        self.line(&format!("{t} = {};", c.text));
        self.indent -= 1;
        self.line("}");
        format!("ls_vote({t}, lid)")
    }

    /// A `for` with a barrier: its bounds evaluated by running invocations, its test a vote.
    fn mirrored_for(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt]) {
        let elem = self.def.locals[var.0 as usize];
        let ty = wgsl_type(elem);
        let (i, e) = (self.temp(), self.temp());
        let zero = if elem == ElemType::I32 { "0i" } else { "0u" };
        self.line(&format!("var {i}: {ty} = {zero};"));
        self.line(&format!("var {e}: {ty} = {zero};"));
        self.line("if !ls_done {");
        self.indent += 1;
        let start = self.expr(start);
        let end = self.expr(end);
        self.line(&format!("{i} = {};", start.text));
        self.line(&format!("{e} = {};", end.text));
        self.indent -= 1;
        self.line("}");
        let one = if elem == ElemType::I32 { "1i" } else { "1u" };
        self.line("loop {");
        self.indent += 1;
        let t = self.temp();
        self.line(&format!("let {t} = ls_vote(!ls_done && {i} < {e}, lid);"));
        self.line(&format!("if !{t} {{ break; }}"));
        self.line(&format!("if !ls_done {{ v{} = {i}; }}", var.0));
        self.loop_body(true, body);
        self.line("continuing {");
        self.line(&format!("    {i} = {i} + {one};"));
        self.line("}");
        self.indent -= 1;
        self.line("}");
    }
}
