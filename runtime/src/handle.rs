//! Handles: user-held references to device memory.
//!
//! **Registration at first use.** An allocation served at the call from the stream's own pools
//! (`memory/books.rs`) is not announced to the actor until its handle is first used: the first
//! [`Handle::sub_range_on`] (every call that enqueues work with a handle asks for its range
//! first) queues the registration, before the task that uses the range. A handle dropped before
//! any use never reached the actor, so its slice goes back to the books at the drop, and an
//! `empty` + drop costs the calling thread two short locks and no task. Invariant: a buffer
//! that any task names was registered by a task queued before it.

use std::sync::{Arc, Once};

use crate::error::IoError;
use crate::ids::{BufferId, BufferRange, DeviceId};
use crate::stream::StreamId;

/// The client side of a device, as an allocation needs it: registering it at its first use,
/// and returning it when its last handle drops.
pub(crate) trait Owner: Send + Sync {
    /// Queues the registration of `buffer` (`size` bytes, allocated on `stream`).
    fn register(&self, stream: StreamId, buffer: BufferId, size: u64);
    /// Queues the release of registered `buffer`, allocated on `stream`.
    fn release(&self, stream: StreamId, buffer: BufferId);
    /// Returns `buffer`, never registered, to the books.
    fn give_back_unused(&self, buffer: BufferId);
}

/// One server allocation; dropped (and so released) with the last [`Handle`] that views it.
struct Allocation {
    device: DeviceId,
    buffer: BufferId,
    stream: StreamId,
    size: u64,
    owner: Arc<dyn Owner>,
    /// Completed once the registration is queued (at once, or at the first use).
    registered: Once,
}

impl Allocation {
    /// Queues the registration if this is the first use; returns once it is queued (another
    /// thread's concurrent first use waits for it, so no use is queued before it).
    fn register(&self) {
        self.registered
            .call_once(|| self.owner.register(self.stream, self.buffer, self.size));
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.registered.is_completed() {
            self.owner.release(self.stream, self.buffer);
        } else {
            self.owner.give_back_unused(self.buffer);
        }
    }
}

/// Where an allocation lives and who owns it: what [`Handle::new`] needs.
pub(crate) struct Placement {
    pub device: DeviceId,
    pub buffer: BufferId,
    pub stream: StreamId,
    pub owner: Arc<dyn Owner>,
    /// The actor already knows the buffer (it allocated it, or its registration is queued).
    pub registered: bool,
}

/// A range of device memory. Cloning shares it; the memory is released (after every operation
/// already submitted with it has completed) when the last clone drops.
///
/// **API Boundary:** a handle is valid only with clients of the device that created it; using it
/// elsewhere returns [`IoError::WrongDevice`].
#[derive(Clone)]
pub struct Handle {
    allocation: Arc<Allocation>,
    offset: u64,
    size: u64,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("device", &self.allocation.device)
            .field("buffer", &self.allocation.buffer)
            .field("offset", &self.offset)
            .field("size", &self.size)
            .finish()
    }
}

impl Handle {
    pub(crate) fn new(placement: Placement, size: u64) -> Self {
        let registered = Once::new();
        if placement.registered {
            registered.call_once(|| ());
        }
        Self {
            allocation: Arc::new(Allocation {
                device: placement.device,
                buffer: placement.buffer,
                stream: placement.stream,
                size,
                owner: placement.owner,
                registered,
            }),
            offset: 0,
            size,
        }
    }

    /// A handle on `size` bytes at `offset` of this one's memory (packed tensors). Callers keep
    /// the range inside this handle.
    pub(crate) fn view(&self, offset: u64, size: u64) -> Self {
        debug_assert!(offset + size <= self.size, "a view stays inside its handle");
        Self {
            allocation: self.allocation.clone(),
            offset: self.offset + offset,
            size,
        }
    }

    /// A handle on `size` bytes at byte `offset` of this one, sharing its memory (which lives
    /// while either handle does): what a caller that places its own tensors in one allocation
    /// binds. Views compose: a slice of a slice is a slice of the allocation.
    ///
    /// ```
    /// use lockstep::{Bytes, ComputeClient};
    /// use lockstep_sim::{SimConfig, SimDevice};
    ///
    /// let client = ComputeClient::new(SimDevice::new(SimConfig::new(0)));
    /// let whole = client.create(Bytes::from_elems(&[1u32, 2, 3, 4]))?;
    /// let tail = whole.slice(8, 8)?;
    /// assert_eq!(client.read_one(tail)?.to_elems::<u32>(), vec![3, 4]);
    /// assert_eq!(
    ///     whole.slice(8, 16).unwrap_err(),
    ///     lockstep::IoError::OutOfRange { offset: 8, len: 16, size: 16 }
    /// );
    /// # Ok::<(), lockstep::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`IoError::OutOfRange`] if the range does not fit in this handle (or overflows).
    pub fn slice(&self, offset: u64, size: u64) -> Result<Handle, IoError> {
        if offset.checked_add(size).is_none_or(|end| end > self.size) {
            return Err(IoError::OutOfRange {
                offset,
                len: size,
                size: self.size,
            });
        }
        Ok(self.view(offset, size))
    }

    /// Size in bytes of the range this handle views.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The device whose memory this handle views: only that device's client accepts it.
    pub fn device(&self) -> DeviceId {
        self.allocation.device
    }

    /// The handle's whole range, after checking it belongs to `device`.
    pub(crate) fn range_on(&self, device: DeviceId) -> Result<BufferRange, IoError> {
        self.sub_range_on(device, 0, self.size)
    }

    /// `len` bytes from `offset` within the handle, after checking the device and the bounds.
    /// The caller is about to enqueue work with it: the allocation's registration is queued
    /// first if it was not yet (module documentation).
    pub(crate) fn sub_range_on(
        &self,
        device: DeviceId,
        offset: u64,
        len: u64,
    ) -> Result<BufferRange, IoError> {
        if self.allocation.device != device {
            return Err(IoError::WrongDevice {
                expected: device,
                actual: self.allocation.device,
            });
        }
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(IoError::OutOfRange {
                offset,
                len,
                size: self.size,
            });
        }
        self.allocation.register();
        Ok(BufferRange {
            buffer: self.allocation.buffer,
            offset: self.offset + offset,
            len,
        })
    }
}
