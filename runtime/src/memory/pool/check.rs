//! The pools' side of the invariants: the check `free` makes before it takes a range back, and
//! the pools' part of `Server::check_invariants`, where each pool checks its pages against the
//! slices the server references on them. Linear in pages, free ranges and referenced slices,
//! with no allocation: it runs after every task on a simulator.

use std::fmt::Display;

use super::{ExclusivePool, Page, PageId, SliceLocation, SlicedPool};
use crate::invariant::{Invariant, Violation, ensure, span};
use crate::memory::report::PoolStats;

/// A slice the server references, and who holds it (for messages).
pub(crate) struct Held<H> {
    pub slice: SliceLocation,
    pub holder: H,
}

/// The slices of `held` (sorted by page, then offset) that lie on `page`.
fn on_page<H>(held: &[Held<H>], page: PageId) -> &[Held<H>] {
    let start = held.partition_point(|h| h.slice.page < page);
    let end = start + held[start..].partition_point(|h| h.slice.page == page);
    &held[start..end]
}

/// Why a range cannot return to a page's free ranges.
#[derive(Debug)]
pub(super) enum Conflict {
    /// It does not fit in the page.
    Outside { page_bytes: u64 },
    /// A free range holds all of it.
    Free,
    /// It overlaps this free range.
    Overlaps { offset: u64, len: u64 },
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conflict::Outside { page_bytes } => {
                write!(f, "lies beyond the page's {page_bytes} bytes")
            }
            Conflict::Free => f.write_str("is free"),
            Conflict::Overlaps { offset, len } => {
                write!(f, "overlaps the free range {}", span(*offset, *len))
            }
        }
    }
}

impl Page {
    /// Whether `[offset, offset + len)` can return to this page's free ranges. Free ranges are
    /// disjoint, so only the last one starting before the range's end can overlap it.
    pub(super) fn may_free(&self, offset: u64, len: u64) -> Result<(), Conflict> {
        let end = match offset.checked_add(len) {
            Some(end) if end <= self.size => end,
            _ => {
                return Err(Conflict::Outside {
                    page_bytes: self.size,
                });
            }
        };
        match self.free.range(..end).next_back() {
            Some((&free, &free_len)) if free + free_len > offset => {
                if free <= offset && end <= free + free_len {
                    Err(Conflict::Free)
                } else {
                    Err(Conflict::Overlaps {
                        offset: free,
                        len: free_len,
                    })
                }
            }
            _ => Ok(()),
        }
    }
}

/// Panics with a [`Invariant::FreeAndReferenced`] violation described by `detail`.
pub(super) fn fail_free(detail: String) -> ! {
    panic!(
        "{}",
        Violation {
            invariant: Invariant::FreeAndReferenced,
            detail,
        }
    )
}

impl SlicedPool {
    /// Checks every page of the pool (named `pool` in messages) against `held`, every slice
    /// the server references (sorted by page, then offset); returns what its pages hold (the
    /// slices of `held` on them, their bytes and the pages' bytes), which its counters equal.
    pub fn check<H: Display>(
        &self,
        pool: &dyn Display,
        held: &[Held<H>],
    ) -> Result<PoolStats, Violation> {
        let mut counted = PoolStats::default();
        for (&id, page) in &self.pages {
            let on_page = on_page(held, id);
            page.check_free_ranges(id)?;
            page.check_referenced(id, on_page)?;
            let held_bytes: u64 = on_page.iter().map(|h| h.slice.size).sum();
            let free_bytes: u64 = page.free.values().sum();
            ensure(
                page.live == on_page.len() as u64 && held_bytes + free_bytes == page.size,
                Invariant::BytesInUse,
                || {
                    format!(
                        "page {} of {pool}: counted live slices {}, free bytes {free_bytes} of {}; referenced slices {} holding {held_bytes} bytes",
                        id.0,
                        page.live,
                        page.size,
                        on_page.len()
                    )
                },
            )?;
            counted.slices += on_page.len() as u64;
            counted.bytes_in_use += held_bytes;
            counted.bytes_reserved += page.size;
        }
        self.stats.check(pool, counted)?;
        Ok(counted)
    }
}

impl Page {
    /// Free ranges are non-empty, inside the page, sorted, disjoint and merged.
    fn check_free_ranges(&self, id: PageId) -> Result<(), Violation> {
        let mut previous: Option<(u64, u64)> = None;
        for (&offset, &len) in &self.free {
            ensure(
                len > 0 && offset.checked_add(len).is_some_and(|end| end <= self.size),
                Invariant::FreeRanges,
                || {
                    format!(
                        "page {} has the free range {}, empty or beyond its {} bytes",
                        id.0,
                        span(offset, len),
                        self.size
                    )
                },
            )?;
            if let Some((before, before_len)) = previous {
                let before_end = before + before_len;
                ensure(offset > before_end, Invariant::FreeRanges, || {
                    let how = if offset == before_end {
                        "touch, unmerged"
                    } else {
                        "overlap"
                    };
                    format!(
                        "page {} has the free ranges {} and {}, which {how}",
                        id.0,
                        span(before, before_len),
                        span(offset, len)
                    )
                })?;
            }
            previous = Some((offset, len));
        }
        Ok(())
    }

    /// Referenced slices (sorted by offset) lie inside the page, clear of free ranges and of
    /// each other.
    fn check_referenced<H: Display>(
        &self,
        id: PageId,
        on_page: &[Held<H>],
    ) -> Result<(), Violation> {
        let mut previous: Option<&Held<H>> = None;
        for held in on_page {
            let (offset, size) = (held.slice.offset, held.slice.size);
            let named = || {
                format!(
                    "{}'s slice {} of page {}",
                    held.holder,
                    span(offset, size),
                    id.0
                )
            };
            self.may_free(offset, size).map_err(|conflict| Violation {
                invariant: Invariant::FreeAndReferenced,
                detail: format!("{} {conflict}", named()),
            })?;
            if let Some(before) = previous {
                let before_end = before.slice.offset + before.slice.size;
                ensure(before_end <= offset, Invariant::FreeAndReferenced, || {
                    format!(
                        "{} overlaps {}'s slice {}",
                        named(),
                        before.holder,
                        span(before.slice.offset, before.slice.size)
                    )
                })?;
            }
            previous = Some(held);
        }
        Ok(())
    }
}

impl ExclusivePool {
    /// As [`SlicedPool::check`]: a page in use is held whole by exactly one slice, a free one by
    /// none.
    pub fn check<H: Display>(
        &self,
        pool: &dyn Display,
        held: &[Held<H>],
    ) -> Result<PoolStats, Violation> {
        let mut counted = PoolStats::default();
        for (&id, &(size, used)) in &self.pages {
            let on_page = on_page(held, id);
            match (used, on_page) {
                (false, []) => {}
                (true, [held]) => {
                    ensure(
                        held.slice.offset == 0 && held.slice.size == size,
                        Invariant::BytesInUse,
                        || {
                            format!(
                                "{} holds {} of page {} of {pool}, which it should hold whole ({size} bytes)",
                                held.holder,
                                span(held.slice.offset, held.slice.size),
                                id.0
                            )
                        },
                    )?;
                    counted.slices += 1;
                    counted.bytes_in_use += size;
                }
                (true, []) => {
                    return Err(Violation {
                        invariant: Invariant::BytesInUse,
                        detail: format!(
                            "page {} of {pool} is in use, but no live slice holds it",
                            id.0
                        ),
                    });
                }
                (false, [held, ..]) => {
                    return Err(Violation {
                        invariant: Invariant::FreeAndReferenced,
                        detail: format!(
                            "{} holds page {} of {pool}, which is free",
                            held.holder, id.0
                        ),
                    });
                }
                (true, [first, second, ..]) => {
                    return Err(Violation {
                        invariant: Invariant::FreeAndReferenced,
                        detail: format!(
                            "{} and {} both hold page {} of {pool}",
                            first.holder, second.holder, id.0
                        ),
                    });
                }
            }
            counted.bytes_reserved += size;
        }
        self.stats.check(pool, counted)?;
        Ok(counted)
    }
}

impl PoolStats {
    /// The counters equal what the pages hold (`counted`; peaks aside).
    fn check(&self, pool: &dyn Display, counted: PoolStats) -> Result<(), Violation> {
        ensure(
            (self.slices, self.bytes_in_use, self.bytes_reserved)
                == (counted.slices, counted.bytes_in_use, counted.bytes_reserved),
            Invariant::BytesInUse,
            || {
                format!(
                    "{pool}: counted slices {}, bytes in use {}, bytes reserved {}; its pages hold slices {}, bytes in use {}, bytes reserved {}",
                    self.slices,
                    self.bytes_in_use,
                    self.bytes_reserved,
                    counted.slices,
                    counted.bytes_in_use,
                    counted.bytes_reserved
                )
            },
        )
    }
}
