//! Pool layouts: what users install with `install_memory_pools`, and the default derived from
//! the device.

use thiserror::Error;

use crate::properties::DeviceProperties;

/// Most dynamic pools one stream may have.
pub const MAX_POOLS: usize = 8;

/// One dynamic pool: pages of `page_bytes` carved into slices of at most `max_slice_bytes`; it
/// reserves at most `cap_bytes` from the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLayout {
    /// Size of each page the pool allocates from the device, in bytes (at least 1).
    pub page_bytes: u64,
    /// Largest request the pool serves, in bytes (at most `page_bytes`); larger requests go to the
    /// next pool in routing order.
    pub max_slice_bytes: u64,
    /// Most bytes of pages the pool reserves on one stream (at least one page); a request that
    /// would need more is [`OutOfMemoryReason::PoolCap`](crate::OutOfMemoryReason::PoolCap).
    pub cap_bytes: u64,
}

/// A named layout, resolved against the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolPreset {
    /// The default: small, medium and large sliced pools scaled to the device.
    Default,
    /// No sliced pools: every allocation gets a page of its own (exact sizes, no sharing).
    ExclusivePages,
    /// One pool of 1 GiB pages for slices up to 256 MiB, for large-model workloads. Unavailable
    /// on devices whose largest allocation is under 1 GiB.
    LargePages,
}

/// What `install_memory_pools` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryPoolsConfig {
    /// A named layout, resolved against the device when installed.
    Preset(PoolPreset),
    /// Pools in routing order: a request goes to the first pool whose `max_slice_bytes` fits it;
    /// larger requests get exclusive pages.
    Pools(Vec<PoolLayout>),
}

/// Why a layout cannot be honoured on a device. `install_memory_pools` returns it
/// ([`InstallMemoryPoolsError::InvalidLayout`]) and changes nothing.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LayoutError {
    /// An empty pool list.
    #[error("the pool list is empty; use PoolPreset::ExclusivePages for no sliced pools")]
    Empty,
    /// More pools than a stream may have (8).
    #[error("{count} pools given, at most {MAX_POOLS} are allowed")]
    TooManyPools {
        /// Pools given.
        count: usize,
    },
    /// A pool whose `page_bytes` is zero.
    #[error("pool {pool} has a page size of zero")]
    ZeroPageSize {
        /// The pool's index in the list.
        pool: usize,
    },
    /// A pool whose `max_slice_bytes` exceeds its `page_bytes`.
    #[error(
        "pool {pool} allows slices of {slice_bytes} bytes, larger than its {page_bytes}-byte pages"
    )]
    SliceLargerThanPage {
        /// The pool's index in the list.
        pool: usize,
        /// The pool's `max_slice_bytes`.
        slice_bytes: u64,
        /// The pool's `page_bytes`.
        page_bytes: u64,
    },
    /// A pool whose `cap_bytes` is under one page: it could never allocate.
    #[error("pool {pool} is capped at {cap_bytes} bytes, less than one {page_bytes}-byte page")]
    CapSmallerThanPage {
        /// The pool's index in the list.
        pool: usize,
        /// The pool's `cap_bytes`.
        cap_bytes: u64,
        /// The pool's `page_bytes`.
        page_bytes: u64,
    },
    /// A pool whose pages are larger than the device's largest allocation.
    #[error(
        "pool {pool} has {page_bytes}-byte pages, but the device's largest allocation is {max_bytes} bytes"
    )]
    PageTooLarge {
        /// The pool's index in the list.
        pool: usize,
        /// The pool's `page_bytes`.
        page_bytes: u64,
        /// The device's largest allocation, in bytes.
        max_bytes: u64,
    },
    /// A preset the device cannot serve (as [`PoolPreset::LargePages`] on a small device).
    #[error("preset {preset:?} is unavailable on this device: {reason}")]
    UnavailablePreset {
        /// The preset asked for.
        preset: PoolPreset,
        /// What the device lacks, for a person to read.
        reason: String,
    },
}

/// Why `install_memory_pools` left the calling stream's pools as they were.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum InstallMemoryPoolsError {
    /// Something is still live in the stream's pools. Nothing was disturbed; the layout still
    /// applies to streams created afterwards; retry once the work drains.
    #[error("the stream's pools still hold {live_slices} live slices ({bytes_in_use} bytes)")]
    PoolsInUse {
        /// Slices still referenced (by handles or by queued work).
        live_slices: u64,
        /// Bytes of those slices.
        bytes_in_use: u64,
    },
    /// The stream has a pending failure; it surfaces at the next flush or sync.
    #[error("the stream is in an error state")]
    StreamUnavailable,
    /// The layout cannot be honoured on this device; nothing changed.
    #[error("invalid memory pools configuration: {0}")]
    InvalidLayout(#[from] LayoutError),
    /// The runtime has no configurable pools.
    #[error("this runtime has no configurable memory pools")]
    Unsupported,
}

/// A resolved, valid layout for one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryConfiguration {
    /// Sliced pools in routing order; may be empty (everything exclusive).
    pub pools: Vec<PoolLayout>,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

impl MemoryConfiguration {
    /// The default layout for a device: small (≤ 4 KiB slices in 1 MiB pages) and medium
    /// (≤ 256 KiB in 8 MiB pages) pools, each page capped by the device's largest allocation;
    /// larger requests get exclusive pages of their own size, reused by later requests of
    /// similar size. Large pages shared by large slices strand memory: on a transformer-shaped
    /// trace (see `bench/benches/memory.rs`) 128 MiB pages for ≤ 16 MiB slices reserved
    /// 1.75× the peak live bytes, exclusive pages 1.01×.
    pub fn for_device(properties: &DeviceProperties) -> Self {
        let max = properties.max_allocation_bytes.min(properties.memory_bytes);
        let mut pools: Vec<PoolLayout> = Vec::new();
        for (slice, page) in [(4 * KIB, MIB), (256 * KIB, 8 * MIB)] {
            let page_bytes = page.min(max);
            let max_slice_bytes = slice.min(page_bytes / 4);
            // A pool whose slices would not exceed the previous pool's serves nothing.
            if max_slice_bytes == 0
                || pools
                    .last()
                    .is_some_and(|p| p.max_slice_bytes >= max_slice_bytes)
            {
                continue;
            }
            pools.push(PoolLayout {
                page_bytes,
                max_slice_bytes,
                cap_bytes: properties.memory_bytes.max(page_bytes),
            });
        }
        Self { pools }
    }

    /// Resolves a user's layout against the device, or says what is wrong with it.
    pub fn resolve(
        config: &MemoryPoolsConfig,
        properties: &DeviceProperties,
    ) -> Result<Self, LayoutError> {
        let pools = match config {
            MemoryPoolsConfig::Preset(PoolPreset::Default) => {
                return Ok(Self::for_device(properties));
            }
            MemoryPoolsConfig::Preset(PoolPreset::ExclusivePages) => {
                return Ok(Self { pools: Vec::new() });
            }
            MemoryPoolsConfig::Preset(preset @ PoolPreset::LargePages) => {
                if properties.max_allocation_bytes < GIB || properties.memory_bytes < 2 * GIB {
                    return Err(LayoutError::UnavailablePreset {
                        preset: *preset,
                        reason: format!(
                            "it needs 1 GiB pages and 2 GiB of memory; the device allows {} bytes per allocation and has {} bytes",
                            properties.max_allocation_bytes, properties.memory_bytes
                        ),
                    });
                }
                vec![PoolLayout {
                    page_bytes: GIB,
                    max_slice_bytes: 256 * MIB,
                    cap_bytes: properties.memory_bytes,
                }]
            }
            MemoryPoolsConfig::Pools(pools) => pools.clone(),
        };
        if pools.is_empty() {
            return Err(LayoutError::Empty);
        }
        if pools.len() > MAX_POOLS {
            return Err(LayoutError::TooManyPools { count: pools.len() });
        }
        for (pool, p) in pools.iter().enumerate() {
            if p.page_bytes == 0 {
                return Err(LayoutError::ZeroPageSize { pool });
            }
            if p.max_slice_bytes > p.page_bytes {
                return Err(LayoutError::SliceLargerThanPage {
                    pool,
                    slice_bytes: p.max_slice_bytes,
                    page_bytes: p.page_bytes,
                });
            }
            if p.cap_bytes < p.page_bytes {
                return Err(LayoutError::CapSmallerThanPage {
                    pool,
                    cap_bytes: p.cap_bytes,
                    page_bytes: p.page_bytes,
                });
            }
            if p.page_bytes > properties.max_allocation_bytes {
                return Err(LayoutError::PageTooLarge {
                    pool,
                    page_bytes: p.page_bytes,
                    max_bytes: properties.max_allocation_bytes,
                });
            }
        }
        Ok(Self { pools })
    }
}
