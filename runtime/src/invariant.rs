//! The invariants of the server's bookkeeping, each named, and what a broken one reports.
//!
//! `Server::check_invariants` (runtime/src/server/invariants.rs) checks them all: after every
//! task on a simulator or in a build with debug assertions, and after every task whose panic
//! the actor caught. A pool's `free` checks the one it can see at once (a slice freed twice, or
//! over a free range) and panics naming it. A broken invariant marks the device lost, with the
//! violation as the reason: a server whose books are wrong must not hand out more memory.

use thiserror::Error;

/// One invariant of the server's bookkeeping. `Display` is the name a violation reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invariant {
    /// A sliced page's free ranges are non-empty, inside the page, sorted, disjoint, and merged
    /// (no two touch).
    FreeRanges,
    /// Each pool's slice and byte counts equal the live slices it handed out (held by a buffer
    /// or a deferred free), and every byte of a sliced page is either free or in a live slice.
    BytesInUse,
    /// No slice is both free in its pool and referenced (by a buffer or a deferred free), no
    /// two referenced slices overlap, and every referenced slice lies on a page of a pool.
    FreeAndReferenced,
    /// Every deferred free and graph destruction has, for each stream it follows, a recorded
    /// event, a capture of that stream whose end it awaits, or a failure to record queued on
    /// that stream: otherwise it never completes, or completes too early.
    DeferredFreeEvents,
    /// A buffer's graph references equal the graphs, pending graph destructions and open
    /// captures that hold it; every buffer they hold is live; a released buffer is held.
    GraphRefs,
    /// The bytes every pool of the device reserves (its pages) stay within the device budget,
    /// if one is set.
    WithinBudget,
    /// A slice served at the call (`memory/books.rs`) is registered once: until then its buffer
    /// id is issued, belongs to no live buffer, and only the books hold the slice.
    InFlight,
}

impl std::fmt::Display for Invariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Invariant::FreeRanges => "free ranges are sorted, disjoint and merged",
            Invariant::BytesInUse => "bytes in use equal the sum of live slices",
            Invariant::FreeAndReferenced => "no slice is both free and referenced",
            Invariant::DeferredFreeEvents => "every deferred free has its events",
            Invariant::GraphRefs => "graph references are counted",
            Invariant::WithinBudget => "reserved bytes stay within the device budget",
            Invariant::InFlight => "a slice served at the call is registered once",
        })
    }
}

/// A broken invariant: which one, and the state that breaks it.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("runtime invariant broken ({invariant}): {detail}")]
pub(crate) struct Violation {
    pub invariant: Invariant,
    pub detail: String,
}

/// Fails with `invariant` broken, described by `detail` (evaluated only then), unless `holds`.
pub(crate) fn ensure(
    holds: bool,
    invariant: Invariant,
    detail: impl FnOnce() -> String,
) -> Result<(), Violation> {
    if holds {
        Ok(())
    } else {
        Err(Violation {
            invariant,
            detail: detail(),
        })
    }
}

/// A defect the runtime's self-tests plant in a server's bookkeeping (never in the device), to
/// prove that `check_invariants` notices each and names the invariant it breaks. See
/// `ComputeClient::plant_defect`.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlantedDefect {
    /// Splits the first free range of two or more alignment units on a sliced page into two
    /// touching ranges ([`Invariant::FreeRanges`]).
    SplitFreeRange,
    /// Counts one alignment unit more in use in the first sliced pool that has a page
    /// ([`Invariant::BytesInUse`]).
    MiscountBytesInUse,
    /// Returns the first live buffer's slice to its pool while the buffer still holds it
    /// ([`Invariant::FreeAndReferenced`]).
    FreeLiveSlice,
    /// Forgets the events of the first deferred free ([`Invariant::DeferredFreeEvents`]).
    ForgetDeferredFreeEvents,
    /// Counts one graph reference more on the first live buffer ([`Invariant::GraphRefs`]).
    MiscountGraphRef,
    /// Sets the device budget one byte under what the pools reserve
    /// ([`Invariant::WithinBudget`]).
    TightenBudget,
    /// Puts the first live buffer back in flight, as if a call had just taken its slice
    /// ([`Invariant::InFlight`]).
    ReissueInFlight,
}

/// A half-open byte range, as messages print it.
pub(crate) fn span(offset: u64, len: u64) -> String {
    format!("[{offset}, {})", offset.saturating_add(len))
}
