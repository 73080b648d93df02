//! What the kernel sanitizer found in a launch, in words: each invocation by its launch index,
//! workgroup and local id, each statement by its number and head
//! (`lockstep::kernel::display`), each location by its array and index.

use lockstep::kernel::KernelDef;
use lockstep::kernel::display::{Head, statements};

use super::LaunchOutcome;
use super::races::{Access, Race};
use crate::memory::KernelFinding;

/// One finding and its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    pub kind: KernelFinding,
    pub detail: String,
}

/// How a launch's invocations and statements are named.
struct Namer<'a> {
    def: &'a KernelDef,
    count: [u32; 3],
}

impl Namer<'_> {
    fn group_lanes(&self) -> u64 {
        self.def.workgroup_invocations().max(1)
    }

    /// `invocation 37 (workgroup [1, 0, 0], local [5, 0, 0])`: launch order runs workgroups
    /// x fastest, and local ids x fastest within each.
    fn invocation(&self, invocation: u64) -> String {
        let split = |mut n: u64, dims: [u32; 3]| {
            dims.map(|d| {
                let d = d.max(1) as u64;
                let i = n % d;
                n /= d;
                i
            })
        };
        let group = split(invocation / self.group_lanes(), self.count);
        let local = split(invocation % self.group_lanes(), self.def.workgroup_size);
        format!("invocation {invocation} (workgroup {group:?}, local {local:?})")
    }

    /// `statement 4 `s0[local_id.x] = 0u``.
    fn statement(&self, number: u32) -> String {
        let all = statements(&self.def.body);
        match number.checked_sub(1).and_then(|i| all.get(i as usize)) {
            Some(stmt) => format!("statement {number} `{}`", Head(stmt)),
            None => format!("statement {number}"),
        }
    }

    fn access(&self, a: &Access) -> String {
        format!(
            "{} {} it at {}",
            self.invocation(a.invocation),
            a.kind.verb(),
            self.statement(a.statement)
        )
    }

    fn race(&self, race: &Race) -> String {
        let group = |a: &Access| a.invocation / self.group_lanes();
        let why = if group(&race.first) == group(&race.second) {
            "with no barrier between them"
        } else {
            "in different workgroups, which nothing orders"
        };
        format!(
            "{} index {}: {}, and {}, {why}",
            race.array,
            race.index,
            self.access(&race.first),
            self.access(&race.second)
        )
    }
}

/// The findings of `outcome`, a launch of `def` over `count` workgroups.
pub(crate) fn describe(def: &KernelDef, count: [u32; 3], outcome: &LaunchOutcome) -> Vec<Finding> {
    let namer = Namer { def, count };
    let mut out: Vec<Finding> = outcome
        .races
        .iter()
        .map(|race| Finding {
            kind: KernelFinding::Race,
            detail: namer.race(race),
        })
        .collect();
    if let Some(divergence) = &outcome.divergent_barrier {
        let places: Vec<String> = divergence
            .waiting
            .iter()
            .map(|&(statement, invocation)| {
                format!(
                    "{} waits at {}",
                    namer.invocation(invocation),
                    namer.statement(statement)
                )
            })
            .chain(
                divergence
                    .finished
                    .map(|i| format!("{} has finished", namer.invocation(i))),
            )
            .collect();
        out.push(Finding {
            kind: KernelFinding::DivergentBarrier,
            detail: places.join(", "),
        });
    }
    out.extend(outcome.unwritten_shared.iter().map(|read| Finding {
        kind: KernelFinding::UnwrittenShared,
        detail: format!(
            "{} read {} index {} at {}, which no invocation of its workgroup had written",
            namer.invocation(read.invocation),
            read.array,
            read.index,
            namer.statement(read.statement)
        ),
    }));
    out
}
