//! `memory_report`: the shape and usage of one stream's pools, for a person and for a plan.

use std::fmt;

use super::config::PoolLayout;
use crate::host_pool::HostPoolStats;

/// Which kind of pool a [`PoolReport`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// Pages carved into slices.
    Sliced,
    /// One slice per page, for requests larger than every sliced pool serves.
    Exclusive,
    /// The device-wide pool of persistent allocations (weights, graph capture).
    Persistent,
}

/// One pool's shape, usage and high-water marks (reset when pools are installed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolReport {
    /// Which kind of pool this is.
    pub kind: PoolKind,
    /// Page size, for sliced pools.
    pub page_bytes: Option<u64>,
    /// Largest slice served, for sliced pools.
    pub max_slice_bytes: Option<u64>,
    /// Most bytes of pages the pool may reserve, for sliced pools (the others are bounded by
    /// the device budget only).
    pub cap_bytes: Option<u64>,
    /// Pages the pool holds now.
    pub pages: u64,
    /// Live slices the pool has handed out.
    pub slices: u64,
    /// Bytes of the pool's pages, in use or free.
    pub bytes_reserved: u64,
    /// Bytes of its live slices (at most `bytes_reserved`).
    pub bytes_in_use: u64,
    /// Highest `bytes_reserved` since the pools were installed.
    pub bytes_reserved_peak: u64,
    /// Highest `bytes_in_use` since the pools were installed.
    pub bytes_in_use_peak: u64,
}

/// Usage counters and their high-water marks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PoolStats {
    pub slices: u64,
    pub bytes_in_use: u64,
    pub bytes_reserved: u64,
    pub bytes_in_use_peak: u64,
    pub bytes_reserved_peak: u64,
}

impl PoolStats {
    pub(super) fn slice_added(&mut self, size: u64) {
        self.slices += 1;
        self.bytes_in_use += size;
        self.bytes_in_use_peak = self.bytes_in_use_peak.max(self.bytes_in_use);
    }

    pub(super) fn slice_removed(&mut self, size: u64) {
        self.slices -= 1;
        self.bytes_in_use -= size;
    }

    pub(super) fn page_added(&mut self, bytes: u64) {
        self.bytes_reserved += bytes;
        self.bytes_reserved_peak = self.bytes_reserved_peak.max(self.bytes_reserved);
    }

    pub(super) fn page_removed(&mut self, bytes: u64) {
        self.bytes_reserved -= bytes;
    }
}

impl PoolReport {
    pub(crate) fn new(
        kind: PoolKind,
        layout: Option<PoolLayout>,
        pages: u64,
        stats: PoolStats,
    ) -> Self {
        Self {
            kind,
            page_bytes: layout.map(|l| l.page_bytes),
            max_slice_bytes: layout.map(|l| l.max_slice_bytes),
            cap_bytes: layout.map(|l| l.cap_bytes),
            pages,
            slices: stats.slices,
            bytes_reserved: stats.bytes_reserved,
            bytes_in_use: stats.bytes_in_use,
            bytes_reserved_peak: stats.bytes_reserved_peak,
            bytes_in_use_peak: stats.bytes_in_use_peak,
        }
    }
}

/// The calling stream's pools in routing order, then the device-wide persistent pool, and the
/// device budget that bounds every pool of every stream together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryReport {
    /// One report per pool: the stream's pools in routing order, then the persistent pool.
    pub pools: Vec<PoolReport>,
    /// The device budget (`ComputeClient::set_memory_budget`); `None` when none is set.
    pub budget_bytes: Option<u64>,
    /// Bytes of pages every pool of the device reserves, every stream's: what the budget
    /// bounds.
    pub device_bytes_reserved: u64,
    /// The device's pool of host blocks that reads land in (`Device::host_pool_stats`);
    /// `None` where the device has none.
    pub host_pool: Option<HostPoolStats>,
}

/// Bytes as a person reads them: exact below 1 KiB, else in the largest binary unit with at
/// most one decimal.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for u in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = u;
    }
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<10} {:>9} {:>9} {:>9} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9}",
            "pool",
            "page",
            "max slice",
            "cap",
            "pages",
            "slices",
            "reserved",
            "in use",
            "peak res",
            "peak use"
        )?;
        for p in &self.pools {
            let opt = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), human_bytes);
            writeln!(
                f,
                "{:<10} {:>9} {:>9} {:>9} {:>5} {:>6} {:>9} {:>9} {:>9} {:>9}",
                format!("{:?}", p.kind).to_lowercase(),
                opt(p.page_bytes),
                opt(p.max_slice_bytes),
                opt(p.cap_bytes),
                p.pages,
                p.slices,
                human_bytes(p.bytes_reserved),
                human_bytes(p.bytes_in_use),
                human_bytes(p.bytes_reserved_peak),
                human_bytes(p.bytes_in_use_peak),
            )?;
        }
        let reserved = human_bytes(self.device_bytes_reserved);
        match self.budget_bytes {
            Some(budget) => writeln!(
                f,
                "device budget {}, {reserved} reserved by all streams",
                human_bytes(budget)
            ),
            None => writeln!(f, "no device budget, {reserved} reserved by all streams"),
        }?;
        let Some(host) = &self.host_pool else {
            return Ok(());
        };
        writeln!(
            f,
            "host blocks: {} lent ({}), {} kept ({}) of cap {}; {} allocated, {} reused, {} freed",
            host.blocks_lent,
            human_bytes(host.bytes_lent),
            host.blocks_kept,
            human_bytes(host.bytes_kept),
            human_bytes(host.cap_bytes),
            host.allocations,
            host.reuses,
            host.frees
        )
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1024), "1 KiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(128 << 20), "128 MiB");
    }
}
