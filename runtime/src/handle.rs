//! Handles: user-held references to device memory.

use std::sync::Arc;

use crate::device::DeviceId;
use crate::error::IoError;
use crate::server::{BufferId, BufferRange};

/// Returns an allocation to its server; called once, when the last handle to it drops.
pub(crate) type Release = Box<dyn Fn(BufferId) + Send + Sync>;

/// One server allocation; dropped (and so released) with the last [`Handle`] that views it.
struct Allocation {
    device: DeviceId,
    buffer: BufferId,
    release: Release,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        (self.release)(self.buffer);
    }
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
    pub(crate) fn new(device: DeviceId, buffer: BufferId, size: u64, release: Release) -> Self {
        Self {
            allocation: Arc::new(Allocation {
                device,
                buffer,
                release,
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
        Ok(BufferRange {
            buffer: self.allocation.buffer,
            offset: self.offset + offset,
            len,
        })
    }
}
