//! Loads that repeat within one statement. A kernel built from values repeats a value's
//! expression at each of its uses (the explorer's formulas read `src[(i * stride + shift) %
//! len]` again at every use of `src[j]`), and each repeat evaluated again costs as much as the
//! first: its index, then its gather.
//!
//! Within one execution of a statement, before it stores anything, a load of an array the race
//! check does not watch gives every repeat the value the first gave, and what else it does
//! (a violation kept if it is the launch's first, a trapped lane, an unwritten binding
//! reported once per launch) the first did already, on the same lanes and indices. So
//! [`Batch`](super::lanes::Batch) evaluates such a load once per execution of its statement and
//! copies its column for the repeats; a watched array's loads are all shown to the race check.

use lockstep::kernel::display::statements;
use lockstep::kernel::{Expr, KernelDef, Stmt};

/// The loads of a kernel that share a value with another load of their statement, by the
/// address of their node, each with the slot of its group: equal loads of one statement's
/// operands, outside short-circuit operators (whose right side runs on fewer lanes).
pub(super) struct RepeatedLoads {
    by_address: Vec<(usize, u32)>,
    slots: usize,
}

impl RepeatedLoads {
    pub fn new(def: &KernelDef) -> Self {
        let mut by_address = Vec::new();
        let mut slots = 0;
        for stmt in statements(&def.body) {
            let mut loads = Vec::new();
            for operand in operands(stmt) {
                collect_loads(operand, &mut loads);
            }
            let mut groups: Vec<(&Expr, u32)> = Vec::new();
            for (at, &load) in loads.iter().enumerate() {
                let repeated = loads
                    .iter()
                    .enumerate()
                    .any(|(o, &other)| o != at && other == load);
                if !repeated {
                    continue;
                }
                let slot = match groups.iter().find(|(expr, _)| *expr == load) {
                    Some(&(_, slot)) => slot,
                    None => {
                        groups.push((load, slots));
                        slots += 1;
                        slots - 1
                    }
                };
                by_address.push((load as *const Expr as usize, slot));
            }
        }
        by_address.sort_unstable();
        Self {
            by_address,
            slots: slots as usize,
        }
    }

    /// The number of slots: groups of equal loads.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The slot of `load`, a load node of the kernel, if it repeats in its statement.
    #[inline]
    pub fn slot(&self, load: &Expr) -> Option<u32> {
        if self.by_address.is_empty() {
            return None;
        }
        let address = load as *const Expr as usize;
        let at = (self.by_address)
            .binary_search_by_key(&address, |&(a, _)| a)
            .ok()?;
        Some(self.by_address[at].1)
    }
}

/// The expressions a statement without control flow evaluates before its effect (none for
/// control flow, whose conditions and bounds are not planned).
fn operands(stmt: &Stmt) -> Vec<&Expr> {
    match stmt {
        Stmt::Assign { value, .. } => vec![value],
        Stmt::Store { index, value, .. } | Stmt::Atomic { index, value, .. } => vec![index, value],
        Stmt::CompareExchange {
            index,
            expected,
            value,
            ..
        } => vec![index, expected, value],
        Stmt::If { .. }
        | Stmt::For { .. }
        | Stmt::While { .. }
        | Stmt::Break
        | Stmt::Continue
        | Stmt::Barrier
        | Stmt::Return => Vec::new(),
    }
}

/// Every load in `expr` that runs on all of the statement's lanes, into `loads`.
fn collect_loads<'e>(expr: &'e Expr, loads: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Load { .. } => loads.push(expr),
        // The right side runs only on the lanes the left side leaves undecided.
        Expr::Logic { .. } => return,
        _ => {}
    }
    expr.operands().for_each(|e| collect_loads(e, loads));
}
