//! A lent block held past its drop, so that another thread can read it: the recorder hashes a
//! large pinned write on its writer thread this way, while the calling thread goes on and the
//! copy engine reads the same bytes ([`PinnedMemory::hold`](crate::PinnedMemory::hold)).
//!
//! **Invariant:** a held block goes back to its pool exactly once, after it was read or when
//! the hold itself drops unread; until then the pool counts it as lent, so nothing lends it
//! again or writes it.

use std::sync::{Arc, Condvar, Mutex};

use super::{HostAllocator, HostBlock, HostPool};
use crate::bytes::HeldBytes;

/// What a [`PooledBlock`](super::PooledBlock) leaves to its hold when it drops.
pub(super) struct Released<A: HostAllocator> {
    pub(super) block: A::Block,
    pub(super) capacity: usize,
    pub(super) pool: Arc<HostPool<A>>,
}

/// The hold on one lent block of `len` bytes in use.
pub(super) struct Hold<A: HostAllocator> {
    released: Mutex<Option<Released<A>>>,
    arrived: Condvar,
    len: usize,
}

impl<A: HostAllocator> Hold<A> {
    pub(super) fn new(len: usize) -> Self {
        Self {
            released: Mutex::new(None),
            arrived: Condvar::new(),
            len,
        }
    }

    /// The block's owner dropped it: it waits here for its reader.
    pub(super) fn release(&self, released: Released<A>) {
        *self.lock() = Some(released);
        self.arrived.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Released<A>>> {
        self.released
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<A: HostAllocator> HeldBytes for Hold<A> {
    fn read_released(&self, read: &mut dyn FnMut(&[u8])) {
        let mut released = self.lock();
        while released.is_none() {
            released = self
                .arrived
                .wait(released)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        let Some(Released {
            block,
            capacity,
            pool,
        }) = released.take()
        else {
            unreachable!("waited until released");
        };
        drop(released);
        read(&block.as_slice()[..self.len]);
        pool.give(block, capacity);
    }
}

impl<A: HostAllocator> Drop for Hold<A> {
    /// Unread: the block goes back to its pool now.
    fn drop(&mut self) {
        if let Some(Released {
            block,
            capacity,
            pool,
        }) = self.lock().take()
        {
            pool.give(block, capacity);
        }
    }
}
