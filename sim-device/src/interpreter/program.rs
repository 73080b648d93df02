//! A kernel's statements flattened into instructions with explicit jumps, so that each lane of
//! the workgroup engine has a program counter: lanes can stop at a barrier, wait, and resume.

use lockstep::kernel::{ElemType, Expr, KernelDef, Stmt, VarId};

/// One instruction. Jump targets are instruction indices.
#[derive(Debug)]
pub(super) enum Inst<'k> {
    /// A statement without control flow: assignment, store or atomic.
    Effect(&'k Stmt),
    /// Lanes whose `cond` is false continue at `target`, the others at the next instruction.
    BranchUnless {
        cond: &'k Expr,
        target: usize,
    },
    Jump(usize),
    /// Enters a `for`: its start and end, evaluated once, go to hidden slots.
    ForStart {
        start: &'k Expr,
        end: &'k Expr,
        counter: usize,
        limit: usize,
    },
    /// Lanes whose counter reached the end continue at `exit`; the others set `var` to the
    /// counter and run the body.
    ForTest {
        var: VarId,
        elem: ElemType,
        counter: usize,
        limit: usize,
        exit: usize,
    },
    /// Advances the counter and continues at the test.
    ForNext {
        elem: ElemType,
        counter: usize,
        test: usize,
    },
    /// A `workgroup_barrier`; `ordinal` counts the kernel's barriers in program order.
    Barrier {
        ordinal: usize,
    },
    /// The end of the kernel.
    End,
}

/// A flattened kernel.
#[derive(Debug)]
pub(super) struct Program<'k> {
    pub insts: Vec<Inst<'k>>,
    /// Hidden slots (two per `for`) after the kernel's locals.
    pub hidden: usize,
}

/// Jumps of the loop being flattened, patched when its exit and continue points are known.
#[derive(Default)]
struct LoopJumps {
    breaks: Vec<usize>,
    continues: Vec<usize>,
}

struct Flattener<'k> {
    def: &'k KernelDef,
    insts: Vec<Inst<'k>>,
    loops: Vec<LoopJumps>,
    hidden: usize,
    barriers: usize,
}

impl<'k> Program<'k> {
    pub fn new(def: &'k KernelDef) -> Self {
        let mut f = Flattener {
            def,
            insts: Vec::new(),
            loops: Vec::new(),
            hidden: 0,
            barriers: 0,
        };
        f.block(&def.body);
        f.insts.push(Inst::End);
        Program {
            insts: f.insts,
            hidden: f.hidden,
        }
    }
}

impl<'k> Flattener<'k> {
    fn here(&self) -> usize {
        self.insts.len()
    }

    /// Points the jump or branch at `at` to `target`.
    fn patch(&mut self, at: usize, target: usize) {
        match &mut self.insts[at] {
            Inst::Jump(t)
            | Inst::BranchUnless { target: t, .. }
            | Inst::ForTest { exit: t, .. } => *t = target,
            other => unreachable!("only jumps are patched, not {other:?}"),
        }
    }

    fn block(&mut self, body: &'k [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &'k Stmt) {
        match stmt {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let branch = self.here();
                self.insts.push(Inst::BranchUnless { cond, target: 0 });
                self.block(then_body);
                if else_body.is_empty() {
                    self.patch(branch, self.here());
                } else {
                    let skip = self.here();
                    self.insts.push(Inst::Jump(0));
                    self.patch(branch, self.here());
                    self.block(else_body);
                    self.patch(skip, self.here());
                }
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => {
                let elem = self.def.locals[var.0 as usize];
                let (counter, limit) = (
                    self.def.locals.len() + self.hidden,
                    self.def.locals.len() + self.hidden + 1,
                );
                self.hidden += 2;
                self.insts.push(Inst::ForStart {
                    start,
                    end,
                    counter,
                    limit,
                });
                let test = self.here();
                self.insts.push(Inst::ForTest {
                    var: *var,
                    elem,
                    counter,
                    limit,
                    exit: 0,
                });
                self.loop_body(body, |f| {
                    let next = f.here();
                    f.insts.push(Inst::ForNext {
                        elem,
                        counter,
                        test,
                    });
                    next
                });
                self.patch(test, self.here());
            }
            Stmt::While { cond, body } => {
                let head = self.here();
                self.insts.push(Inst::BranchUnless { cond, target: 0 });
                self.loop_body(body, |f| {
                    f.insts.push(Inst::Jump(head));
                    head
                });
                self.patch(head, self.here());
            }
            Stmt::Break | Stmt::Continue => {
                let at = self.here();
                self.insts.push(Inst::Jump(0));
                let jumps = self
                    .loops
                    .last_mut()
                    .expect("validated kernels break and continue inside loops");
                if matches!(stmt, Stmt::Break) {
                    jumps.breaks.push(at);
                } else {
                    jumps.continues.push(at);
                }
            }
            Stmt::Barrier => {
                self.insts.push(Inst::Barrier {
                    ordinal: self.barriers,
                });
                self.barriers += 1;
            }
            Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Atomic { .. }
            | Stmt::CompareExchange { .. } => self.insts.push(Inst::Effect(stmt)),
        }
    }

    /// Flattens a loop's body, then its back edge with `back` (which returns where
    /// `continue` goes); patches the loop's breaks to the instruction after the back edge.
    fn loop_body(&mut self, body: &'k [Stmt], back: impl FnOnce(&mut Self) -> usize) {
        self.loops.push(LoopJumps::default());
        self.block(body);
        let continue_at = back(self);
        let jumps = self.loops.pop().expect("pushed above");
        let exit = self.here();
        for at in jumps.breaks {
            self.patch(at, exit);
        }
        for at in jumps.continues {
            self.patch(at, continue_at);
        }
    }
}
