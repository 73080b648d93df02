//! A pool of host memory blocks that a device lends as [`Bytes`]: a read lands in a block and
//! is returned to the caller without a copy, a large write is staged through one, and a
//! block goes back to its pool when the `Bytes` holding it drops, on whichever thread.
//!
//! On CUDA the blocks are page-locked (the copy engine reaches only pinned memory at full
//! speed, and pinning costs far more than a copy, so blocks are reused); the simulator lends
//! heap blocks through the same pool, so the suite and the explorer drive the pooled path.
//!
//! **Invariants.**
//! - A block is in exactly one place: lent to one [`PooledBlock`] (held by a `Bytes`, a pending
//!   read or a write in flight), or kept by the pool. The pool's counters say how many of each.
//! - A kept block may still be used by a copy the device enqueued (a write that reads it): the
//!   pool lends it again only once [`HostBlock::is_idle`] says that copy completed, or after
//!   [`HostBlock::wait_idle`] waited for it, and frees it only after `wait_idle`.
//! - A request is served by a block of its class or of a larger one up to twice that, so a
//!   read of a new size reuses what is kept rather than pinning more.
//! - The pool keeps at most `cap_bytes` of blocks; a block returned past it is freed on the
//!   returning thread. Lent blocks are not bounded: they are what callers hold. When what is
//!   lent and kept together reaches the cap, a request waits for a kept block of its class
//!   whose copy is still in flight rather than allocating one more.
//! - A block whose `Bytes` a recorder holds ([`PinnedMemory::hold`]) goes back to its pool once
//!   it was read after its drop (`hold.rs`), still counted as lent until then.
//! - Every `PooledBlock` holds an `Arc` of its pool, which holds the allocator: the pool (and
//!   what freeing a block needs, e.g. a CUDA context) outlives every block it lent, the device
//!   and the client included.

use std::collections::BTreeMap;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::bytes::{Bytes, HeldBytes, PinnedMemory};
use crate::error::DeviceError;

/// Smallest block: shorter requests share this class.
pub const CLASS_BYTES_MIN: usize = 4 << 10;

/// The capacity of the block that serves `len` bytes: [`CLASS_BYTES_MIN`] up to it, then four
/// classes per doubling (1, 1.25, 1.5 and 1.75 times a power of two), so a block wastes at most
/// a fifth of itself. Lengths too large for the next power of two are their own class.
pub fn class_of(len: usize) -> usize {
    if len <= CLASS_BYTES_MIN {
        return CLASS_BYTES_MIN;
    }
    match len.checked_next_power_of_two() {
        Some(power) => {
            let step = power / 8;
            len.div_ceil(step) * step
        }
        None => len,
    }
}

/// One block of host memory a [`HostAllocator`] made. Dropping it frees it; the pool waits for
/// [`wait_idle`](Self::wait_idle) first.
pub trait HostBlock: Send + Sync + RefUnwindSafe + UnwindSafe + 'static {
    /// Every byte of the block (initialised, contents unspecified). No copy engine writes them
    /// while the slice lives: a read's block is lent only after its copy completed.
    fn as_slice(&self) -> &[u8];
    /// Every byte of the block, for writing: waits first for a copy in flight that reads it.
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// Whether no copy the device enqueued uses the block any more. Never blocks.
    fn is_idle(&mut self) -> bool {
        true
    }
    /// Blocks until no copy the device enqueued uses the block.
    fn wait_idle(&mut self) {}
}

/// Makes the blocks of one [`HostPool`].
pub trait HostAllocator: Send + Sync + RefUnwindSafe + UnwindSafe + 'static {
    /// The memory this allocator hands out (pinned memory on CUDA, heap memory on the
    /// simulator); freed when dropped.
    type Block: HostBlock;
    /// A block of exactly `capacity` bytes (at least [`CLASS_BYTES_MIN`]).
    ///
    /// # Errors
    /// The device's failure to allocate (out of pinned memory, a lost device).
    fn allocate(&self, capacity: usize) -> Result<Self::Block, DeviceError>;
}

/// What a pool holds and has done, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostPoolStats {
    /// Most bytes of blocks the pool keeps.
    pub cap_bytes: u64,
    /// Blocks lent out now (held by a `Bytes` or a transfer in flight).
    pub blocks_lent: u64,
    /// The capacity, in bytes, of the blocks lent out now.
    pub bytes_lent: u64,
    /// Blocks returned and kept for reuse (some may still be read by a copy in flight).
    pub blocks_kept: u64,
    /// The capacity, in bytes, of the blocks kept for reuse (at most `cap_bytes`).
    pub bytes_kept: u64,
    /// Blocks allocated since the pool was made.
    pub allocations: u64,
    /// Requests served by a kept block.
    pub reuses: u64,
    /// Blocks freed since the pool was made (returned past the cap).
    pub frees: u64,
}

/// Kept blocks by class, and the counters.
struct Kept<B> {
    blocks: BTreeMap<usize, Vec<B>>,
    stats: HostPoolStats,
}

/// A device's pool of host blocks. See the module documentation for the invariants.
pub struct HostPool<A: HostAllocator> {
    allocator: A,
    kept: Mutex<Kept<A::Block>>,
}

impl<A: HostAllocator> std::fmt::Debug for HostPool<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostPool")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<A: HostAllocator> HostPool<A> {
    /// A pool that keeps at most `cap_bytes` of returned blocks.
    pub fn new(allocator: A, cap_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            allocator,
            kept: Mutex::new(Kept {
                blocks: BTreeMap::new(),
                stats: HostPoolStats {
                    cap_bytes: cap_bytes as u64,
                    ..HostPoolStats::default()
                },
            }),
        })
    }

    /// What makes this pool's blocks (the device's pinned-memory allocator, for one).
    pub fn allocator(&self) -> &A {
        &self.allocator
    }

    /// The pool's counters now: what it lends and keeps, and what it allocated, reused and
    /// freed since it was made.
    pub fn stats(&self) -> HostPoolStats {
        self.lock().stats
    }

    /// Lends a block for `len` bytes: a kept block whose copies completed, of its class (see
    /// [`class_of`]) or a larger one up to twice that, smallest first; else, while what is
    /// lent and kept stays under the cap, a fresh block of its class; else a kept one of those
    /// classes once its copy completed (a fresh one if none is kept).
    ///
    /// # Errors
    /// The allocator's, when a fresh block is needed and cannot be made.
    pub fn lend(self: &Arc<Self>, len: usize) -> Result<PooledBlock<A>, DeviceError> {
        let class = class_of(len);
        let (block, capacity) = match self.take_kept(class) {
            Some(kept) => kept,
            None => {
                let fresh = self.allocator.allocate(class);
                (fresh.inspect_err(|_| self.forget(class))?, class)
            }
        };
        Ok(PooledBlock {
            block: Some(block),
            len,
            capacity,
            pool: self.clone(),
            hold: None,
        })
    }

    /// A kept block serving `class`, with its own class, waiting for one in flight only when
    /// the pool is at its cap; `None` when a fresh block of `class` is to be allocated. Either
    /// is counted as lent here.
    fn take_kept(&self, class: usize) -> Option<(A::Block, usize)> {
        let mut kept = self.lock();
        let at_cap =
            kept.stats.bytes_lent + kept.stats.bytes_kept + class as u64 > kept.stats.cap_bytes;
        let served = class..=class.saturating_mul(2);
        let ready = kept
            .blocks
            .range_mut(served.clone())
            .find_map(|(&size, blocks)| {
                let at = blocks.iter_mut().position(HostBlock::is_idle)?;
                Some((size, blocks.swap_remove(at)))
            });
        // At the cap, rather than allocate: the oldest in flight, the likeliest to be done.
        let in_flight = match ready {
            None if at_cap => kept
                .blocks
                .range_mut(served)
                .find(|(_, blocks)| !blocks.is_empty())
                .map(|(&size, blocks)| (size, blocks.remove(0))),
            _ => None,
        };
        let must_wait = in_flight.is_some();
        let taken = ready.or(in_flight);
        let stats = &mut kept.stats;
        let lent_bytes = match &taken {
            Some((size, _)) => {
                stats.reuses += 1;
                stats.blocks_kept -= 1;
                stats.bytes_kept -= *size as u64;
                *size
            }
            None => {
                stats.allocations += 1;
                class
            }
        };
        stats.blocks_lent += 1;
        stats.bytes_lent += lent_bytes as u64;
        drop(kept);
        taken.map(|(size, mut block)| {
            if must_wait {
                block.wait_idle();
            }
            (block, size)
        })
    }

    /// Takes back a lent block of `class`: kept if the pool has room, else freed here.
    fn give(&self, mut block: A::Block, class: usize) {
        let mut kept = self.lock();
        let stats = &mut kept.stats;
        stats.blocks_lent -= 1;
        stats.bytes_lent -= class as u64;
        if stats.bytes_kept + class as u64 <= stats.cap_bytes {
            stats.blocks_kept += 1;
            stats.bytes_kept += class as u64;
            kept.blocks.entry(class).or_default().push(block);
            return;
        }
        stats.frees += 1;
        drop(kept);
        block.wait_idle();
        drop(block);
    }

    /// A failed allocation was counted as lent by `take_kept`: uncount it.
    fn forget(&self, class: usize) {
        let mut kept = self.lock();
        kept.stats.blocks_lent -= 1;
        kept.stats.bytes_lent -= class as u64;
        kept.stats.allocations -= 1;
    }

    /// Every critical section leaves the counters consistent before anything can panic.
    fn lock(&self) -> MutexGuard<'_, Kept<A::Block>> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<A: HostAllocator> Drop for HostPool<A> {
    fn drop(&mut self) {
        let kept = std::mem::take(&mut self.lock().blocks);
        for mut block in kept.into_values().flatten() {
            block.wait_idle();
        }
    }
}

/// A block lent by a [`HostPool`]: its first `len` bytes are the data. Dropping it returns the
/// block to its pool (see the module invariants).
pub struct PooledBlock<A: HostAllocator> {
    /// `Some` until the drop gives it back.
    block: Option<A::Block>,
    len: usize,
    capacity: usize,
    pool: Arc<HostPool<A>>,
    /// Where the drop leaves the block instead, if another thread is to read it first.
    hold: Option<Arc<hold::Hold<A>>>,
}

impl<A: HostAllocator> std::fmt::Debug for PooledBlock<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBlock")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<A: HostAllocator> PooledBlock<A> {
    /// The block, for the device that lent it (to enqueue copies from or into it).
    pub fn block(&self) -> &A::Block {
        self.block.as_ref().expect("present until dropped")
    }

    /// The block, mutably, for the device that lent it (to fill it before a copy).
    pub fn block_mut(&mut self) -> &mut A::Block {
        self.block.as_mut().expect("present until dropped")
    }

    /// The bytes in use: what was asked for, at most the block's capacity.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No bytes in use.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block's capacity: what it counts for in the pool's bytes lent, and kept once
    /// returned.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The pool the block returns to.
    pub fn pool(&self) -> &Arc<HostPool<A>> {
        &self.pool
    }

    /// The block as [`Bytes`] of its first `len` bytes, returned to the pool when they drop.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_pinned(Box::new(self))
    }
}

impl<A: HostAllocator> PinnedMemory for PooledBlock<A> {
    fn as_slice(&self) -> &[u8] {
        &self.block().as_slice()[..self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.block_mut().as_mut_slice()[..len]
    }

    fn hold(&mut self) -> Option<Arc<dyn HeldBytes>> {
        if self.hold.is_some() {
            return None;
        }
        let hold = Arc::new(hold::Hold::new(self.len));
        self.hold = Some(hold.clone());
        Some(hold)
    }
}

impl<A: HostAllocator> Drop for PooledBlock<A> {
    fn drop(&mut self) {
        let Some(block) = self.block.take() else {
            return;
        };
        match self.hold.take() {
            Some(hold) => hold.release(hold::Released {
                block,
                capacity: self.capacity,
                pool: self.pool.clone(),
            }),
            None => self.pool.give(block, self.capacity),
        }
    }
}

/// Heap blocks: what a device without page-locked memory lends (the simulator). Every byte is
/// zeroed when allocated; nothing but the holder touches them.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapAllocator;

/// A heap block of [`HeapAllocator`].
#[derive(Debug)]
pub struct HeapBlock(Box<[u8]>);

impl HostBlock for HeapBlock {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl HostAllocator for HeapAllocator {
    type Block = HeapBlock;

    fn allocate(&self, capacity: usize) -> Result<HeapBlock, DeviceError> {
        Ok(HeapBlock(vec![0; capacity].into_boxed_slice()))
    }
}

mod hold;
#[cfg(test)]
mod tests;
