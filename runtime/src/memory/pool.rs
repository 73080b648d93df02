//! Pools carve device pages into slices. They know nothing of devices: the server allocates a
//! page when a pool asks for one ([`NeedPage`]) and frees the pages a pool gives up.
//!
//! Invariants:
//! - Every slice offset and size is a multiple of the pool's alignment, so every slice can be
//!   bound to a kernel on its own.
//! - A page's free ranges never overlap each other or a live slice, and adjacent free ranges
//!   are always merged.
//! - `bytes_in_use` is the sum of live slice sizes, `bytes_reserved` the sum of page sizes.

use std::collections::BTreeMap;

mod check;

use super::config::PoolLayout;
use super::report::{PoolKind, PoolReport, PoolStats};
use crate::invariant::span;
use crate::stream::StreamId;

pub(crate) use check::Held;
use check::{Conflict, fail_free};

/// One device allocation owned by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PageId(pub u64);

/// Which pool of a stream a slice belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolRef {
    Sliced(usize),
    Exclusive,
    /// The device-wide persistent pool (weights, graph capture).
    Persistent,
}

/// Where a slice lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SliceLocation {
    /// The stream whose pools handed the slice out (for the persistent pool: the stream that
    /// asked).
    pub stream: StreamId,
    pub page: PageId,
    pub offset: u64,
    /// Rounded up to the alignment; what the slice occupies.
    pub size: u64,
    pub pool: PoolRef,
}

/// The pool needs a new page of `bytes` to serve the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NeedPage {
    pub pool: PoolRef,
    pub bytes: u64,
}

#[derive(Debug)]
struct Page {
    size: u64,
    /// Free ranges by offset: offset → length.
    free: BTreeMap<u64, u64>,
    live: u64,
}

/// Pages of one size carved into slices, first fit.
#[derive(Debug)]
pub(crate) struct SlicedPool {
    pub layout: PoolLayout,
    pages: BTreeMap<PageId, Page>,
    pub stats: PoolStats,
}

impl SlicedPool {
    pub fn new(layout: PoolLayout) -> Self {
        Self {
            layout,
            pages: BTreeMap::new(),
            stats: PoolStats::default(),
        }
    }

    /// Carves `size` bytes (already aligned) from the first page with room.
    pub fn try_alloc(
        &mut self,
        size: u64,
        index: usize,
        stream: StreamId,
    ) -> Option<SliceLocation> {
        for (&page_id, page) in &mut self.pages {
            let Some((&offset, &len)) = page.free.iter().find(|&(_, &len)| len >= size) else {
                continue;
            };
            page.free.remove(&offset);
            if len > size {
                page.free.insert(offset + size, len - size);
            }
            page.live += 1;
            self.stats.slice_added(size);
            return Some(SliceLocation {
                stream,
                page: page_id,
                offset,
                size,
                pool: PoolRef::Sliced(index),
            });
        }
        None
    }

    /// Whether one more page stays under the pool's cap.
    pub fn can_grow(&self) -> bool {
        self.stats.bytes_reserved + self.layout.page_bytes <= self.layout.cap_bytes
    }

    pub fn add_page(&mut self, page: PageId) {
        let size = self.layout.page_bytes;
        self.pages.insert(
            page,
            Page {
                size,
                free: BTreeMap::from([(0, size)]),
                live: 0,
            },
        );
        self.stats.page_added(size);
    }

    /// Returns a slice's range to its page, merging it with free neighbours.
    ///
    /// # Panics
    /// Naming `Invariant::FreeAndReferenced`, if the range is not this pool's to take back:
    /// its page is not here, it leaves the page, or some of it is free already (a double free,
    /// or an overlapping range). Nothing changes then. Only a bug in the runtime frees so.
    pub fn free(&mut self, slice: SliceLocation) {
        let Some(page) = self.pages.get_mut(&slice.page) else {
            fail_free(format!(
                "freeing {} of page {}, which this pool does not hold",
                span(slice.offset, slice.size),
                slice.page.0
            ));
        };
        if let Err(conflict) = page.may_free(slice.offset, slice.size) {
            let double = matches!(conflict, Conflict::Free).then_some(" already (a double free)");
            fail_free(format!(
                "freeing {} of page {}, which {conflict}{}",
                span(slice.offset, slice.size),
                slice.page.0,
                double.unwrap_or_default()
            ));
        }
        let (mut offset, mut len) = (slice.offset, slice.size);
        if let Some((&prev, &prev_len)) = page.free.range(..offset).next_back()
            && prev + prev_len == offset
        {
            page.free.remove(&prev);
            offset = prev;
            len += prev_len;
        }
        if let Some(next_len) = page.free.remove(&(slice.offset + slice.size)) {
            len += next_len;
        }
        page.free.insert(offset, len);
        page.live -= 1;
        self.stats.slice_removed(slice.size);
    }

    pub fn holds_page(&self, page: PageId) -> bool {
        self.pages.contains_key(&page)
    }

    /// Self-test hook (`PlantedDefect::SplitFreeRange`): splits the first free range of two
    /// `unit`s or more in two touching ranges. Returns whether there was one.
    pub fn split_free_range(&mut self, unit: u64) -> bool {
        for page in self.pages.values_mut() {
            if let Some((&offset, &len)) = page.free.iter().find(|&(_, &len)| len >= 2 * unit) {
                page.free.insert(offset, unit);
                page.free.insert(offset + unit, len - unit);
                return true;
            }
        }
        false
    }

    /// Pages without live slices, which can go back to the device.
    pub fn empty_pages(&self) -> Vec<PageId> {
        self.pages
            .iter()
            .filter(|(_, p)| p.live == 0)
            .map(|(&id, _)| id)
            .collect()
    }

    pub fn remove_page(&mut self, page: PageId) {
        let removed = self
            .pages
            .remove(&page)
            .expect("removing a page of this pool");
        debug_assert_eq!(removed.live, 0, "only empty pages are removed");
        self.stats.page_removed(removed.size);
    }

    pub fn report(&self) -> PoolReport {
        PoolReport::new(
            PoolKind::Sliced,
            Some(self.layout),
            self.pages.len() as u64,
            self.stats,
        )
    }
}

/// Pages holding one slice each. Freed pages are kept for reuse by a request that fills at least
/// half of one, until cleanup or memory pressure returns them.
#[derive(Debug)]
pub(crate) struct ExclusivePool {
    kind: PoolRef,
    /// Page → (size, in use).
    pages: BTreeMap<PageId, (u64, bool)>,
    pub stats: PoolStats,
}

impl ExclusivePool {
    pub fn new(kind: PoolRef) -> Self {
        Self {
            kind,
            pages: BTreeMap::new(),
            stats: PoolStats::default(),
        }
    }

    /// Reuses the smallest free page that fits `size` without wasting more than half of it.
    pub fn try_alloc(&mut self, size: u64, stream: StreamId) -> Option<SliceLocation> {
        let (&page, &(page_size, _)) = self
            .pages
            .iter()
            .filter(|(_, (page_size, used))| !used && *page_size >= size && *page_size / 2 <= size)
            .min_by_key(|(_, (page_size, _))| *page_size)?;
        self.pages.insert(page, (page_size, true));
        self.stats.slice_added(page_size);
        Some(SliceLocation {
            stream,
            page,
            offset: 0,
            size: page_size,
            pool: self.kind,
        })
    }

    /// Adds a page of `size` bytes and hands it out at once.
    pub fn add_page_in_use(&mut self, page: PageId, size: u64, stream: StreamId) -> SliceLocation {
        self.pages.insert(page, (size, true));
        self.stats.page_added(size);
        self.stats.slice_added(size);
        SliceLocation {
            stream,
            page,
            offset: 0,
            size,
            pool: self.kind,
        }
    }

    /// Frees a page for reuse.
    ///
    /// # Panics
    /// Naming `Invariant::FreeAndReferenced`, if the page is not this pool's or is free
    /// already (a double free). Nothing changes then.
    pub fn free(&mut self, slice: SliceLocation) {
        let Some(entry) = self.pages.get_mut(&slice.page) else {
            fail_free(format!(
                "freeing page {}, which this pool does not hold",
                slice.page.0
            ));
        };
        if !entry.1 {
            fail_free(format!(
                "freeing page {}, which is free already (a double free)",
                slice.page.0
            ));
        }
        entry.1 = false;
        self.stats.slice_removed(entry.0);
    }

    pub fn holds_page(&self, page: PageId) -> bool {
        self.pages.contains_key(&page)
    }

    pub fn empty_pages(&self) -> Vec<PageId> {
        self.pages
            .iter()
            .filter(|(_, (_, used))| !used)
            .map(|(&id, _)| id)
            .collect()
    }

    pub fn remove_page(&mut self, page: PageId) {
        let (size, used) = self
            .pages
            .remove(&page)
            .expect("removing a page of this pool");
        debug_assert!(!used, "only free pages are removed");
        self.stats.page_removed(size);
    }

    pub fn report(&self) -> PoolReport {
        let kind = if self.kind == PoolRef::Persistent {
            PoolKind::Persistent
        } else {
            PoolKind::Exclusive
        };
        PoolReport::new(kind, None, self.pages.len() as u64, self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: StreamId = StreamId(0);

    fn pool() -> SlicedPool {
        let mut p = SlicedPool::new(PoolLayout {
            page_bytes: 1024,
            max_slice_bytes: 512,
            cap_bytes: 2048,
        });
        p.add_page(PageId(0));
        p
    }

    #[test]
    fn slices_are_carved_first_fit_and_merge_back() {
        let mut p = pool();
        let a = p.try_alloc(256, 0, S).unwrap();
        let b = p.try_alloc(256, 0, S).unwrap();
        let c = p.try_alloc(512, 0, S).unwrap();
        assert_eq!((a.offset, b.offset, c.offset), (0, 256, 512));
        assert!(p.try_alloc(256, 0, S).is_none(), "the page is full");
        p.free(b);
        p.free(a);
        // a and b merged: a 512-byte request fits at offset 0.
        assert_eq!(p.try_alloc(512, 0, S).unwrap().offset, 0);
        assert_eq!(p.stats.bytes_in_use, 1024);
        assert_eq!(p.stats.bytes_in_use_peak, 1024);
    }

    #[test]
    fn empty_pages_are_reported_and_removed() {
        let mut p = pool();
        assert!(p.can_grow());
        p.add_page(PageId(1));
        assert!(!p.can_grow(), "the cap is two pages");
        let a = p.try_alloc(256, 0, S).unwrap();
        assert_eq!(p.empty_pages(), vec![PageId(1)]);
        p.remove_page(PageId(1));
        p.free(a);
        assert_eq!(p.empty_pages(), vec![PageId(0)]);
        assert_eq!(p.stats.bytes_reserved, 1024);
        assert_eq!(p.stats.bytes_reserved_peak, 2048);
    }

    #[test]
    #[should_panic(
        expected = "runtime invariant broken (no slice is both free and referenced): freeing [0, 256) of page 0, which is free already (a double free)"
    )]
    fn a_double_free_panics_naming_the_invariant() {
        let mut p = pool();
        let a = p.try_alloc(256, 0, S).unwrap();
        p.free(a);
        p.free(a);
    }

    #[test]
    #[should_panic(
        expected = "runtime invariant broken (no slice is both free and referenced): freeing [256, 768) of page 0, which overlaps the free range [512, 1024)"
    )]
    fn freeing_over_a_free_range_panics_naming_the_invariant() {
        let mut p = pool();
        let a = p.try_alloc(512, 0, S).unwrap();
        p.free(SliceLocation { offset: 256, ..a });
    }

    #[test]
    fn a_refused_free_changes_nothing() {
        let mut p = pool();
        let a = p.try_alloc(512, 0, S).unwrap();
        let over_free = SliceLocation { offset: 256, ..a };
        let stray = SliceLocation {
            page: PageId(9),
            ..a
        };
        for refused in [over_free, stray] {
            let free = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.free(refused)));
            assert!(free.is_err(), "{refused:?} is not the pool's to take back");
            assert_eq!(check(&p, &[a]), Ok(1));
        }
    }

    #[test]
    #[should_panic(
        expected = "runtime invariant broken (no slice is both free and referenced): freeing page 7, which is free already (a double free)"
    )]
    fn an_exclusive_double_free_panics_naming_the_invariant() {
        let mut p = ExclusivePool::new(PoolRef::Exclusive);
        let a = p.add_page_in_use(PageId(7), 4096, S);
        p.free(a);
        p.free(a);
    }

    /// `pool`'s check against `held` (sorted by offset, all on page 0), as text.
    fn check(pool: &SlicedPool, held: &[SliceLocation]) -> Result<u64, String> {
        let held: Vec<Held<&str>> = held
            .iter()
            .map(|&slice| Held {
                slice,
                holder: "a buffer",
            })
            .collect();
        pool.check(&"the pool", &held)
            .map(|counted| counted.slices)
            .map_err(|v| v.to_string())
    }

    #[test]
    fn a_leaked_slice_breaks_bytes_in_use() {
        let mut p = pool();
        let a = p.try_alloc(256, 0, S).unwrap();
        let b = p.try_alloc(256, 0, S).unwrap();
        assert_eq!(check(&p, &[a, b]), Ok(2));
        assert_eq!(
            check(&p, &[a]),
            Err("runtime invariant broken (bytes in use equal the sum of live slices): page 0 of the pool: counted live slices 2, free bytes 512 of 1024; referenced slices 1 holding 256 bytes".to_owned())
        );
    }

    #[test]
    fn overlapping_referenced_slices_break_free_and_referenced() {
        let mut p = pool();
        let a = p.try_alloc(512, 0, S).unwrap();
        let inside = SliceLocation {
            offset: 256,
            size: 256,
            ..a
        };
        assert_eq!(
            check(&p, &[a, inside]),
            Err("runtime invariant broken (no slice is both free and referenced): a buffer's slice [256, 512) of page 0 overlaps a buffer's slice [0, 512)".to_owned())
        );
    }

    #[test]
    fn exclusive_pages_are_reused_only_when_not_wasteful() {
        let mut p = ExclusivePool::new(PoolRef::Exclusive);
        let a = p.add_page_in_use(PageId(7), 4096, S);
        p.free(a);
        assert!(
            p.try_alloc(1024, S).is_none(),
            "a 4 KiB page for 1 KiB wastes too much"
        );
        assert_eq!(p.try_alloc(3072, S).unwrap().page, PageId(7));
        assert!(p.empty_pages().is_empty());
    }
}
