//! The batched engine, for kernels whose statements are assignments, stores, `if` and `for`
//! (what the explorer's kernels are made of): it walks the IR tree once per batch of whole
//! workgroups, each statement over every active lane. `if` splits the lanes and `for` keeps
//! each lane's own trip count.

use lockstep::kernel::{BinOp, CmpOp, ElemType, Expr, Scalar, Stmt, VarId, semantics};

use super::column;
use super::lanes::Batch;

/// Whether the batched engine runs `body`: it has no statement that makes one invocation's
/// result depend on another's progress (barriers, atomics, shared arrays live elsewhere), no
/// loop it cannot bound (`while`) and no early `return`.
pub(super) fn runs(body: &[Stmt]) -> bool {
    body.iter().all(|stmt| match stmt {
        Stmt::Assign { .. } | Stmt::Store { .. } => true,
        Stmt::If {
            then_body,
            else_body,
            ..
        } => runs(then_body) && runs(else_body),
        Stmt::For { body, .. } => runs(body),
        Stmt::Atomic { .. }
        | Stmt::CompareExchange { .. }
        | Stmt::While { .. }
        | Stmt::Break
        | Stmt::Continue
        | Stmt::Barrier
        | Stmt::Return => false,
    })
}

impl Batch<'_, '_> {
    pub(super) fn block(&mut self, body: &[Stmt], lanes: &[u32]) {
        for stmt in body {
            if self.any_trapped {
                let live = self.live(lanes);
                self.stmt(stmt, &live);
            } else {
                self.stmt(stmt, lanes);
            }
        }
    }

    fn stmt(&mut self, stmt: &Stmt, lanes: &[u32]) {
        if lanes.is_empty() {
            return;
        }
        if let Some(numbers) = &self.launch.numbers {
            self.statement = numbers.of(stmt);
        }
        match stmt {
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.eval(cond, lanes).bools();
                // Usually every lane takes one side (a guard `i < len`): no lane lists then.
                match column::uniform(&cond, lanes) {
                    Some(taken) => {
                        self.spares.give(cond);
                        let body = if taken != 0 { then_body } else { else_body };
                        self.block(body, lanes);
                    }
                    None => {
                        let (then_lanes, else_lanes) = split(lanes, &cond);
                        self.spares.give(cond);
                        self.block(then_body, &then_lanes);
                        self.block(else_body, &else_lanes);
                    }
                }
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(*var, start, end, body, lanes),
            other => self.effect(other, lanes),
        }
    }

    /// Each lane loops from its `start` to its `end`; the counter is the lane's own, so the
    /// body's assignments to `var` do not change the trip count.
    fn for_loop(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt], lanes: &[u32]) {
        let (elem, mut counter) = self.eval(start, lanes).words();
        let (_, end) = self.eval(end, lanes).words();
        let mut active: Vec<u32> = lanes
            .iter()
            .copied()
            .filter(|&l| below(elem, counter[l as usize], end[l as usize]))
            .collect();
        while !active.is_empty() {
            self.set_local(var, &counter, &active);
            self.block(body, &active);
            for &l in &active {
                counter[l as usize] = increment(elem, counter[l as usize]);
            }
            active.retain(|&l| {
                !self.trapped[l as usize] && below(elem, counter[l as usize], end[l as usize])
            });
        }
        self.spares.give(counter);
        self.spares.give(end);
    }
}

/// The lanes of `lanes` where `cond` holds, and those where it does not, each ascending.
pub(super) fn split(lanes: &[u32], cond: &[u32]) -> (Vec<u32>, Vec<u32>) {
    // Usually every lane takes one side: room for all of them on each, no growing.
    let (mut taken, mut skipped) = (Vec::with_capacity(lanes.len()), Vec::new());
    for &l in lanes {
        if cond[l as usize] != 0 {
            taken.push(l);
        } else {
            skipped.push(l);
        }
    }
    (taken, skipped)
}

/// Whether a `for` counter of type `elem` is below its end.
pub(super) fn below(elem: ElemType, counter: u32, end: u32) -> bool {
    semantics::compare(
        CmpOp::Lt,
        Scalar::from_bits(elem, counter),
        Scalar::from_bits(elem, end),
    )
}

/// A `for` counter of type `elem` plus one.
pub(super) fn increment(elem: ElemType, counter: u32) -> u32 {
    let one = match elem {
        ElemType::I32 => Scalar::I32(1),
        _ => Scalar::U32(1),
    };
    semantics::binary(BinOp::Add, Scalar::from_bits(elem, counter), one).to_bits()
}
