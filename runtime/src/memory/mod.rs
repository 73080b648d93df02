//! Device memory above the `Device` trait: per-stream pools of pages carved into slices, a
//! device-wide persistent pool, layouts users install, and the reports they read.

mod books;
mod budget;
mod config;
mod pool;
mod report;
mod usage;

pub use books::AllocationPaths;
#[cfg_attr(loom, allow(unused_imports, reason = "the server and client use them"))]
#[cfg_attr(loom, allow(unused_imports, reason = "the server and client use them"))]
pub(crate) use books::{AtCall, Books, take_at_call};
pub(crate) use budget::Budget;
pub use budget::MemoryBudgetError;
pub use config::{
    InstallMemoryPoolsError, LayoutError, MemoryConfiguration, MemoryPoolsConfig, PoolLayout,
    PoolPreset,
};
use std::collections::BTreeMap;
use std::fmt::Display;

use pool::{ExclusivePool, SlicedPool};
pub(crate) use pool::{Held, NeedPage, PageId, PoolRef, SliceLocation};
use report::PoolStats;

use crate::error::OutOfMemoryReason;
use crate::invariant::{Invariant, Violation, ensure};
use crate::stream::StreamId;
pub use report::{MemoryReport, PoolKind, PoolReport};
pub use usage::MemoryUsage;

/// Where a stream's allocations go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryAllocationMode {
    /// Routed by size through the stream's pools.
    #[default]
    Auto,
    /// From the device-wide persistent pool: for weights and graph capture.
    Persistent,
}

/// One stream's pools.
#[derive(Debug)]
struct StreamPools {
    sliced: Vec<SlicedPool>,
    exclusive: ExclusivePool,
    /// Open persistent-allocation windows; the stream allocates persistently while above zero.
    persistent_depth: u32,
}

impl StreamPools {
    fn new(config: &MemoryConfiguration, persistent_depth: u32) -> Self {
        Self {
            sliced: config.pools.iter().map(|&l| SlicedPool::new(l)).collect(),
            exclusive: ExclusivePool::new(PoolRef::Exclusive),
            persistent_depth,
        }
    }

    fn live_slices(&self) -> u64 {
        self.sliced.iter().map(|p| p.stats.slices).sum::<u64>() + self.exclusive.stats.slices
    }

    fn stats(&self) -> impl Iterator<Item = &PoolStats> {
        self.sliced
            .iter()
            .map(|p| &p.stats)
            .chain(std::iter::once(&self.exclusive.stats))
    }
}

/// Every pool of one device: per-stream pools built from the layout in force when the stream
/// was first used, and the device-wide persistent pool.
///
/// Invariant: a page belongs to exactly one pool; a slice is handed out by exactly one pool and
/// returned to the same one.
#[derive(Debug)]
pub(crate) struct DeviceMemory {
    /// The layout streams created from now on get.
    config: MemoryConfiguration,
    streams: BTreeMap<StreamId, StreamPools>,
    persistent: ExclusivePool,
    alignment_bytes: u64,
    /// Bounds the pages of every pool together.
    budget: Budget,
}

impl DeviceMemory {
    pub fn new(config: MemoryConfiguration, alignment_bytes: u64) -> Self {
        Self {
            config,
            streams: BTreeMap::new(),
            persistent: ExclusivePool::new(PoolRef::Persistent),
            alignment_bytes,
            budget: Budget::default(),
        }
    }

    fn pools(&mut self, stream: StreamId) -> &mut StreamPools {
        let config = &self.config;
        self.streams
            .entry(stream)
            .or_insert_with(|| StreamPools::new(config, 0))
    }

    /// The bytes a request of `bytes` occupies: at least one alignment unit, whole units.
    /// `None` when rounding up to whole units overflows: no device can serve such a request.
    pub fn slot_bytes(&self, bytes: u64) -> Option<u64> {
        bytes.max(1).checked_next_multiple_of(self.alignment_bytes)
    }

    /// Sets the stream's mode, closing any open persistent windows.
    pub fn set_mode(&mut self, stream: StreamId, mode: MemoryAllocationMode) {
        self.pools(stream).persistent_depth = u32::from(mode == MemoryAllocationMode::Persistent);
    }

    /// Opens (`true`) or closes a persistent-allocation window on `stream`; windows nest.
    pub fn persistent_window(&mut self, stream: StreamId, open: bool) {
        let pools = self.pools(stream);
        pools.persistent_depth = if open {
            pools.persistent_depth + 1
        } else {
            pools.persistent_depth.saturating_sub(1)
        };
    }

    /// Serves `size` (a slot size) on `stream`, or says which page is needed first.
    pub fn try_alloc(&mut self, stream: StreamId, size: u64) -> Result<SliceLocation, NeedPage> {
        let pools = self.pools(stream);
        if pools.persistent_depth > 0 {
            return self.persistent.try_alloc(size, stream).ok_or(NeedPage {
                pool: PoolRef::Persistent,
                bytes: size,
            });
        }
        match pools
            .sliced
            .iter()
            .position(|p| size <= p.layout.max_slice_bytes)
        {
            Some(index) => {
                let pool = &mut pools.sliced[index];
                pool.try_alloc(size, index, stream).ok_or(NeedPage {
                    pool: PoolRef::Sliced(index),
                    bytes: pool.layout.page_bytes,
                })
            }
            None => pools.exclusive.try_alloc(size, stream).ok_or(NeedPage {
                pool: PoolRef::Exclusive,
                bytes: size,
            }),
        }
    }

    /// Whether the page `need` asks for stays under its pool's cap and the device budget, or
    /// which limit it would cross.
    pub fn can_grow(&mut self, stream: StreamId, need: NeedPage) -> Result<(), OutOfMemoryReason> {
        if let PoolRef::Sliced(pool) = need.pool {
            let sliced = &self.pools(stream).sliced[pool];
            if !sliced.can_grow() {
                return Err(OutOfMemoryReason::PoolCap {
                    pool,
                    max_slice_bytes: sliced.layout.max_slice_bytes,
                    cap_bytes: sliced.layout.cap_bytes,
                });
            }
        }
        self.budget.admits(need.bytes, self.usage().bytes_reserved)
    }

    /// Sets the device budget, unless the pools already reserve more than it.
    pub fn set_budget(&mut self, budget_bytes: Option<u64>) -> Result<(), MemoryBudgetError> {
        let bytes_reserved = self.usage().bytes_reserved;
        if let Some(budget_bytes) = budget_bytes
            && bytes_reserved > budget_bytes
        {
            return Err(MemoryBudgetError::BelowReserved {
                budget_bytes,
                bytes_reserved,
            });
        }
        self.budget = Budget {
            bytes: budget_bytes,
        };
        Ok(())
    }

    /// Adds a freshly allocated `page` for `need` and serves `size` from it.
    pub fn grow(
        &mut self,
        stream: StreamId,
        need: NeedPage,
        page: PageId,
        size: u64,
    ) -> SliceLocation {
        match need.pool {
            PoolRef::Sliced(i) => {
                let pool = &mut self.pools(stream).sliced[i];
                pool.add_page(page);
                pool.try_alloc(size, i, stream)
                    .expect("a fresh page fits any slice its pool serves")
            }
            PoolRef::Exclusive => self
                .pools(stream)
                .exclusive
                .add_page_in_use(page, size, stream),
            PoolRef::Persistent => self.persistent.add_page_in_use(page, size, stream),
        }
    }

    /// Returns a slice to the pool that handed it out.
    pub fn free(&mut self, slice: SliceLocation) {
        match slice.pool {
            PoolRef::Sliced(i) => self.pools(slice.stream).sliced[i].free(slice),
            PoolRef::Exclusive => self.pools(slice.stream).exclusive.free(slice),
            PoolRef::Persistent => self.persistent.free(slice),
        }
    }

    /// Removes every page without live slices, from every pool, and returns them.
    pub fn take_empty_pages(&mut self) -> Vec<PageId> {
        let mut pages = Vec::new();
        for pools in self.streams.values_mut() {
            for pool in &mut pools.sliced {
                for page in pool.empty_pages() {
                    pool.remove_page(page);
                    pages.push(page);
                }
            }
            take_empty(&mut pools.exclusive, &mut pages);
        }
        take_empty(&mut self.persistent, &mut pages);
        pages
    }

    /// Installs `config` for streams created from now on and, if nothing is live in them,
    /// rebuilds `stream`'s pools with it (returning their pages to free).
    pub fn install(
        &mut self,
        stream: StreamId,
        config: MemoryConfiguration,
    ) -> Result<Vec<PageId>, InstallMemoryPoolsError> {
        self.config = config;
        let pools = self.pools(stream);
        let live_slices = pools.live_slices();
        if live_slices > 0 {
            return Err(InstallMemoryPoolsError::PoolsInUse {
                live_slices,
                bytes_in_use: pools.stats().map(|s| s.bytes_in_use).sum(),
            });
        }
        let depth = pools.persistent_depth;
        let fresh = StreamPools::new(&self.config, depth);
        let old = std::mem::replace(self.pools(stream), fresh);
        let mut pages = Vec::new();
        for mut pool in old.sliced {
            for page in pool.empty_pages() {
                pool.remove_page(page);
                pages.push(page);
            }
        }
        let mut exclusive = old.exclusive;
        take_empty(&mut exclusive, &mut pages);
        Ok(pages)
    }

    /// The report of `stream`'s pools, then the persistent pool, and the device's budget.
    pub fn report(&mut self, stream: StreamId) -> MemoryReport {
        let persistent = self.persistent.report();
        let device_bytes_reserved = self.usage().bytes_reserved;
        let budget_bytes = self.budget.bytes;
        let pools = self.pools(stream);
        MemoryReport {
            pools: pools
                .sliced
                .iter()
                .map(SlicedPool::report)
                .chain([pools.exclusive.report(), persistent])
                .collect(),
            budget_bytes,
            device_bytes_reserved,
            host_pool: None,
        }
    }

    /// Totals over every pool of the device.
    pub fn usage(&self) -> MemoryUsage {
        let all = self
            .streams
            .values()
            .flat_map(StreamPools::stats)
            .chain(std::iter::once(&self.persistent.stats));
        let mut usage = MemoryUsage::default();
        for stats in all {
            usage.bytes_in_use += stats.bytes_in_use;
            usage.bytes_reserved += stats.bytes_reserved;
            usage.allocations += stats.slices;
        }
        usage
    }
}

impl DeviceMemory {
    /// Checks every pool against `held`, every slice the server references (sorted here by
    /// page, then offset): [`Invariant::FreeRanges`], [`Invariant::BytesInUse`] and
    /// [`Invariant::FreeAndReferenced`]; then the pools' pages against the budget
    /// ([`Invariant::WithinBudget`]).
    pub fn check_invariants<H: Display>(&self, held: &mut [Held<H>]) -> Result<(), Violation> {
        // What the pages of every pool hold, equal to the pools' counters (checked there):
        // `usage()`, without a second walk over the pools.
        let bytes_reserved = self.check_pools(held)?.bytes_reserved;
        ensure(
            self.budget.bytes.is_none_or(|b| bytes_reserved <= b),
            Invariant::WithinBudget,
            || {
                format!(
                    "the pools reserve {bytes_reserved} bytes, over the device budget of {} bytes",
                    self.budget.bytes.unwrap_or_default()
                )
            },
        )
    }

    /// Checks every pool against `held` (sorted here) and that every slice of `held` lies on
    /// a pool's page; returns what the pools' pages hold, all pools together.
    fn check_pools<H: Display>(&self, held: &mut [Held<H>]) -> Result<PoolStats, Violation> {
        held.sort_unstable_by_key(|h| (h.slice.page, h.slice.offset));
        let mut on_pages = PoolStats::default();
        let mut add = |counted: PoolStats| {
            on_pages.slices += counted.slices;
            on_pages.bytes_in_use += counted.bytes_in_use;
            on_pages.bytes_reserved += counted.bytes_reserved;
        };
        for (stream, pools) in &self.streams {
            for (index, pool) in pools.sliced.iter().enumerate() {
                add(pool.check(&format_args!("{stream}'s pool {index}"), held)?);
            }
            add(pools
                .exclusive
                .check(&format_args!("{stream}'s exclusive pool"), held)?);
        }
        add(self.persistent.check(&"the persistent pool", held)?);
        if on_pages.slices == held.len() as u64 {
            return Ok(on_pages);
        }
        let strays = held.iter().filter(|h| !self.holds_page(h.slice.page));
        let detail = match strays.map(|h| (h.slice.page, &h.holder)).next() {
            Some((page, holder)) => {
                format!(
                    "{holder}'s slice lies on page {}, which no pool holds",
                    page.0
                )
            }
            None => format!(
                "{} slices are referenced, but the pools' pages hold {}: a page is in two pools",
                held.len(),
                on_pages.slices
            ),
        };
        Err(Violation {
            invariant: Invariant::FreeAndReferenced,
            detail,
        })
    }

    fn holds_page(&self, page: PageId) -> bool {
        self.streams.values().any(|pools| {
            pools.sliced.iter().any(|p| p.holds_page(page)) || pools.exclusive.holds_page(page)
        }) || self.persistent.holds_page(page)
    }

    /// Self-test hook (`PlantedDefect::SplitFreeRange`): splits a free range of a sliced pool
    /// in two. Returns whether one was long enough.
    pub fn split_free_range(&mut self) -> bool {
        let unit = self.alignment_bytes;
        self.sliced_pools().any(|pool| pool.split_free_range(unit))
    }

    /// Self-test hook (`PlantedDefect::MiscountBytesInUse`): counts one alignment unit more in
    /// use in the first sliced pool with a page. Returns whether there was one.
    pub fn miscount_bytes_in_use(&mut self) -> bool {
        let unit = self.alignment_bytes;
        let pool = self.sliced_pools().find(|p| p.stats.bytes_reserved > 0);
        pool.map(|pool| pool.stats.bytes_in_use += unit).is_some()
    }

    /// Self-test hook (`PlantedDefect::TightenBudget`): sets the budget one byte under what the
    /// pools reserve, bypassing [`set_budget`](Self::set_budget)'s refusal. Returns whether
    /// they reserve anything.
    pub fn tighten_budget(&mut self) -> bool {
        let tighter = self.usage().bytes_reserved.checked_sub(1);
        tighter
            .map(|bytes| self.budget.bytes = Some(bytes))
            .is_some()
    }

    fn sliced_pools(&mut self) -> impl Iterator<Item = &mut SlicedPool> {
        self.streams
            .values_mut()
            .flat_map(|pools| &mut pools.sliced)
    }
}

fn take_empty(pool: &mut ExclusivePool, pages: &mut Vec<PageId>) {
    for page in pool.empty_pages() {
        pool.remove_page(page);
        pages.push(page);
    }
}
