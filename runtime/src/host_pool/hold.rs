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

impl<A: HostAllocator> Released<A> {
    fn give_back(self) {
        self.pool.give(self.block, self.capacity);
    }
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
        let released = self
            .arrived
            .wait_while(self.lock(), |released| released.is_none())
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(released) = released {
            read(&released.block.as_slice()[..self.len]);
            released.give_back();
        }
    }
}

impl<A: HostAllocator> Drop for Hold<A> {
    /// Unread: the block goes back to its pool now.
    fn drop(&mut self) {
        if let Some(released) = self.lock().take() {
            released.give_back();
        }
    }
}
