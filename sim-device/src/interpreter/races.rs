//! The kernel race check: which accesses of one launch to one word are not ordered by the
//! memory model (see `lockstep::kernel`). Two accesses are ordered when one invocation made
//! both, or when invocations of one workgroup made them in different barrier epochs (the
//! barriers a workgroup has passed); a race is two unordered accesses, at least one a write,
//! not both atomic. Each workgroup's shared arrays are words of their own (see `lanes::Batch`),
//! so one log serves a batch's workgroups.
//!
//! Each word remembers its last write and the last reads of two distinct invocations since:
//! a write supersedes the reads ordered before it (anything they could race with, it races
//! with too), and the ones it races with are reported. So the check finds every race between
//! a write and the accesses nearest to it; a race hidden behind three or more unordered
//! readers of one word, or between two atomics and a later plain access of the first's
//! invocation, can go unseen.

use lockstep::kernel::Array;

/// How an access touches its word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessKind {
    Read,
    Write,
    Atomic,
}

impl AccessKind {
    pub fn verb(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "wrote",
            AccessKind::Atomic => "updated atomically",
        }
    }
}

/// One access, as the check remembers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    /// The invocation, in launch order.
    pub invocation: u64,
    /// Barriers its workgroup had passed.
    pub epoch: u32,
    /// The statement's number (see `lockstep::kernel::display::statements`).
    pub statement: u32,
    pub kind: AccessKind,
}

/// Two accesses of one launch to one word that no rule orders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Race {
    pub array: Array,
    pub index: u32,
    pub first: Access,
    pub second: Access,
}

#[derive(Clone, Copy, Debug, Default)]
struct WordLog {
    write: Option<Access>,
    /// The latest reads since the write, by two distinct invocations; `[0]` the newest.
    reads: [Option<Access>; 2],
}

/// The accesses to one array's words during a launch.
#[derive(Debug)]
pub(crate) struct AccessLog {
    /// Per word; allocated at the first access, so a launch that never reaches the array
    /// (an out-of-range store, say) costs nothing.
    words: Vec<WordLog>,
    len: usize,
    /// Invocations per workgroup.
    group_lanes: u64,
}

impl AccessLog {
    pub fn new(len: usize, group_lanes: u64) -> Self {
        Self {
            words: Vec::new(),
            len,
            group_lanes,
        }
    }

    /// Whether an earlier access may race with `later`, whose workgroup's invocations are
    /// `group`: different invocations that no barrier orders, at least one writing, not both
    /// atomic. (A range test, not a division per access: this runs for every watched access.)
    fn conflict(earlier: &Access, later: &Access, group: &std::ops::Range<u64>) -> bool {
        if earlier.invocation == later.invocation {
            return false;
        }
        if earlier.epoch != later.epoch && group.contains(&earlier.invocation) {
            return false;
        }
        let writes = |a: &Access| a.kind != AccessKind::Read;
        let both_atomic = earlier.kind == AccessKind::Atomic && later.kind == AccessKind::Atomic;
        (writes(earlier) || writes(later)) && !both_atomic
    }

    /// Forgets every access, as a new log would (keeping the buffer).
    pub fn forget(&mut self) {
        self.words.clear();
    }

    /// Records `access` to word `index`; returns the earlier access it races with, if any.
    pub fn record(&mut self, index: u32, access: Access) -> Option<Access> {
        if self.words.is_empty() {
            self.words.resize(self.len, WordLog::default());
        }
        let first = access.invocation - access.invocation % self.group_lanes;
        let group = first..first + self.group_lanes;
        let log = &mut self.words[index as usize];
        let earlier = (log.write.iter())
            .chain(log.reads.iter().flatten())
            .find(|e| Self::conflict(e, &access, &group))
            .copied();
        match access.kind {
            AccessKind::Read => {
                if log.reads[0].is_some_and(|r| r.invocation != access.invocation) {
                    log.reads[1] = log.reads[0];
                }
                log.reads[0] = Some(access);
            }
            AccessKind::Write | AccessKind::Atomic => {
                log.write = Some(access);
                log.reads = [None, None];
            }
        }
        earlier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(invocation: u64, epoch: u32, kind: AccessKind) -> Access {
        Access {
            invocation,
            epoch,
            statement: 1,
            kind,
        }
    }

    use AccessKind::{Atomic, Read, Write};

    #[test]
    fn unordered_writes_and_reads_race_and_barriers_order_a_workgroup() {
        // Workgroups of 4: invocations 0..4 are workgroup 0.
        let mut log = AccessLog::new(1, 4);
        assert_eq!(log.record(0, at(1, 0, Read)), None);
        assert_eq!(log.record(0, at(2, 0, Read)), None);
        // Invocation 1 writes: invocation 2's read races with it.
        assert_eq!(log.record(0, at(1, 0, Write)), Some(at(2, 0, Read)));
        // After a barrier, workgroup 0 is ordered; workgroup 1 never is.
        assert_eq!(log.record(0, at(3, 1, Read)), None);
        assert_eq!(log.record(0, at(5, 0, Read)), Some(at(1, 0, Write)));
        // The write comes first among what a write races with.
        assert_eq!(log.record(0, at(5, 0, Write)), Some(at(1, 0, Write)));
        assert_eq!(log.record(0, at(6, 0, Read)), Some(at(5, 0, Write)));
        assert_eq!(
            log.record(0, at(7, 1, Read)),
            None,
            "past workgroup 1's barrier"
        );
    }

    #[test]
    fn atomics_race_only_with_plain_accesses() {
        let mut log = AccessLog::new(1, 8);
        assert_eq!(log.record(0, at(0, 0, Atomic)), None);
        assert_eq!(log.record(0, at(1, 0, Atomic)), None);
        assert_eq!(log.record(0, at(1, 0, Read)), None, "its own atomic");
        assert_eq!(log.record(0, at(2, 0, Read)), Some(at(1, 0, Atomic)));
        assert_eq!(log.record(0, at(3, 0, Atomic)), Some(at(2, 0, Read)));
    }
}
