//! A kernel's statements flattened into instructions with explicit jumps, so that each lane of
//! the workgroup engine has a program counter: lanes can stop at a barrier, wait, and resume.

use lockstep::kernel::display::statements;
use lockstep::kernel::{ElemType, Expr, KernelDef, Stmt, VarId};

/// Each statement's number (see `lockstep::kernel::display::statements`), found by the
/// statement's address: the kernel is borrowed for the whole launch, so addresses are stable.
#[derive(Debug)]
pub(super) struct Numbers(Vec<(usize, u32)>);

impl Numbers {
    pub fn new(def: &KernelDef) -> Self {
        let mut by_address: Vec<(usize, u32)> = statements(&def.body)
            .into_iter()
            .zip(1..)
            .map(|(stmt, n)| (stmt as *const Stmt as usize, n))
            .collect();
        by_address.sort_unstable();
        Self(by_address)
    }

    /// The number of `stmt`, a statement of the kernel.
    pub fn of(&self, stmt: &Stmt) -> u32 {
        let address = stmt as *const Stmt as usize;
        match self.0.binary_search_by_key(&address, |&(a, _)| a) {
            Ok(i) => self.0[i].1,
            Err(_) => unreachable!("only the kernel's own statements are numbered"),
        }
    }
}

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
    /// A `workgroup_barrier`.
    Barrier,
    /// An early `return`: the lane ends and counts as arrived at every later barrier.
    Return,
    /// The end of the kernel.
    End,
}

/// A flattened kernel.
#[derive(Debug)]
pub(super) struct Program<'k> {
    pub insts: Vec<Inst<'k>>,
    /// Per instruction, the number of the statement it belongs to (0 for `End`).
    pub statements: Vec<u32>,
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
    numbers: Numbers,
    insts: Vec<Inst<'k>>,
    statements: Vec<u32>,
    loops: Vec<LoopJumps>,
    hidden: usize,
}

impl<'k> Program<'k> {
    pub fn new(def: &'k KernelDef) -> Self {
        let mut f = Flattener {
            def,
            numbers: Numbers::new(def),
            insts: Vec::new(),
            statements: Vec::new(),
            loops: Vec::new(),
            hidden: 0,
        };
        f.block(&def.body);
        f.push(Inst::End, 0);
        Program {
            insts: f.insts,
            statements: f.statements,
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

    /// Appends `inst`, an instruction of statement `number`.
    fn push(&mut self, inst: Inst<'k>, number: u32) {
        self.insts.push(inst);
        self.statements.push(number);
    }

    fn stmt(&mut self, stmt: &'k Stmt) {
        let n = self.numbers.of(stmt);
        match stmt {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body, n),
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(*var, start, end, body, n),
            Stmt::While { cond, body } => {
                let head = self.here();
                self.push(Inst::BranchUnless { cond, target: 0 }, n);
                self.loop_body(body, |f| {
                    f.push(Inst::Jump(head), n);
                    head
                });
                self.patch(head, self.here());
            }
            Stmt::Break | Stmt::Continue => {
                let at = self.here();
                self.push(Inst::Jump(0), n);
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
            Stmt::Barrier => self.push(Inst::Barrier, n),
            Stmt::Return => self.push(Inst::Return, n),
            Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Atomic { .. }
            | Stmt::CompareExchange { .. } => self.push(Inst::Effect(stmt), n),
        }
    }

    /// A branch past the `then` block when `cond` is false; with an `else` block, a jump over
    /// it at the end of `then`.
    fn if_else(&mut self, cond: &'k Expr, then_body: &'k [Stmt], else_body: &'k [Stmt], n: u32) {
        let branch = self.here();
        self.push(Inst::BranchUnless { cond, target: 0 }, n);
        self.block(then_body);
        if else_body.is_empty() {
            self.patch(branch, self.here());
        } else {
            let skip = self.here();
            self.push(Inst::Jump(0), n);
            self.patch(branch, self.here());
            self.block(else_body);
            self.patch(skip, self.here());
        }
    }

    /// `ForStart` evaluates the bounds once into two hidden locals (counter and limit),
    /// `ForTest` exits or sets the loop variable, `ForNext` steps the counter back to the test.
    fn for_loop(&mut self, var: VarId, start: &'k Expr, end: &'k Expr, body: &'k [Stmt], n: u32) {
        let elem = self.def.locals[var.0 as usize];
        let counter = self.def.locals.len() + self.hidden;
        let limit = counter + 1;
        self.hidden += 2;
        let enter = Inst::ForStart {
            start,
            end,
            counter,
            limit,
        };
        self.push(enter, n);
        let test = self.here();
        let check = Inst::ForTest {
            var,
            elem,
            counter,
            limit,
            exit: 0,
        };
        self.push(check, n);
        self.loop_body(body, |f| {
            let next = f.here();
            let step = Inst::ForNext {
                elem,
                counter,
                test,
            };
            f.push(step, n);
            next
        });
        self.patch(test, self.here());
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
