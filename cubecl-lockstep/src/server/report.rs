//! Lockstep's memory reports and allocation modes in cubecl's terms (pure mappings).

use cubecl_environment::stream::StreamId;
use cubecl_runtime::memory_management::{
    MemoryAllocationMode, MemoryPoolKind, MemoryPoolReport, MemoryPoolsReport, MemoryUsage,
    StreamMemoryReport,
};
use lockstep::{MemoryReport, PoolKind, PoolReport};

/// cubecl's report of `stream`'s pools from Lockstep's: its sliced and exclusive pools are
/// cubecl's dynamic pools, its persistent pool cubecl's; Lockstep has no dedicated pool.
pub fn stream_report(stream: StreamId, report: &MemoryReport) -> StreamMemoryReport {
    let mut pools = MemoryPoolsReport {
        dynamic: Vec::new(),
        persistent: empty_pool(MemoryPoolKind::Persistent),
        dedicated: empty_pool(MemoryPoolKind::Direct),
    };
    for pool in &report.pools {
        match pool.kind {
            PoolKind::Persistent => pools.persistent = pool_report(pool),
            PoolKind::Sliced | PoolKind::Exclusive => pools.dynamic.push(pool_report(pool)),
        }
    }
    StreamMemoryReport {
        stream,
        pools,
        auxiliary: Vec::new(),
    }
}

fn pool_report(pool: &PoolReport) -> MemoryPoolReport {
    MemoryPoolReport {
        kind: pool_kind(pool),
        usage: MemoryUsage {
            number_allocs: pool.slices,
            bytes_in_use: pool.bytes_in_use,
            bytes_padding: 0,
            bytes_reserved: pool.bytes_reserved,
        },
        pages: pool.pages,
        pages_peak: pool.pages,
        pages_unmapped: 0,
        largest_alloc: pool.max_slice_bytes.unwrap_or(0),
    }
}

fn pool_kind(pool: &PoolReport) -> MemoryPoolKind {
    match pool.kind {
        PoolKind::Sliced => MemoryPoolKind::Sliced {
            page_size: pool.page_bytes.unwrap_or(0),
            max_slice_size: pool.max_slice_bytes.unwrap_or(0),
        },
        PoolKind::Exclusive => MemoryPoolKind::Exclusive {
            max_alloc_size: pool.max_slice_bytes.unwrap_or(0),
        },
        PoolKind::Persistent => MemoryPoolKind::Persistent,
    }
}

fn empty_pool(kind: MemoryPoolKind) -> MemoryPoolReport {
    MemoryPoolReport {
        kind,
        usage: MemoryUsage::default(),
        pages: 0,
        pages_peak: 0,
        pages_unmapped: 0,
        largest_alloc: 0,
    }
}

/// Lockstep's allocation mode for cubecl's: `Dedicated` (an allocation of its own, outside
/// the pools) has no Lockstep counterpart and allocates as `Auto` does.
pub fn allocation_mode(mode: MemoryAllocationMode) -> lockstep::MemoryAllocationMode {
    match mode {
        MemoryAllocationMode::Persistent => lockstep::MemoryAllocationMode::Persistent,
        MemoryAllocationMode::Auto | MemoryAllocationMode::Dedicated => {
            lockstep::MemoryAllocationMode::Auto
        }
    }
}
