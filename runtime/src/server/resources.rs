//! The server's side of staging (pinned host memory) and of `get_resource` (raw access to the
//! device buffer behind a handle).

use super::{Server, raw};
use crate::bytes::Bytes;
use crate::device::Device;
use crate::error::ServerError;
use crate::ids::BufferRange;
use crate::stream::StreamId;

impl<D: Device> Server<D> {
    /// One pinned host buffer per size, or none at all where the device has no pinned memory.
    pub fn alloc_pinned(
        &mut self,
        stream: StreamId,
        sizes: &[usize],
    ) -> Result<Vec<Bytes>, ServerError> {
        self.check_alive()?;
        let mut pinned = Vec::with_capacity(sizes.len());
        for &size in sizes {
            let allocated = self.device.alloc_pinned_host(size);
            match self.noted_on(stream, allocated)? {
                Some(bytes) => pinned.push(bytes),
                None => return Ok(Vec::new()),
            }
        }
        Ok(pinned)
    }

    /// Makes `range` ready for use outside the runtime: orders `stream` after other streams'
    /// conflicting work on it, counts the outside use as a write of `stream` (so later work of
    /// other streams waits for it), then syncs `stream` like [`sync`](Self::sync). Returns the
    /// byte offset of the range in its device buffer.
    pub fn prepare_resource(
        &mut self,
        stream: StreamId,
        range: BufferRange,
    ) -> Result<u64, ServerError> {
        self.check_alive()?;
        self.refuse_in_capture(stream, "get_resource")?;
        if let Err(err) = self.order_before_access(stream, range.buffer, true) {
            self.push_device_error(stream, err);
        }
        self.after_access(stream, &[(range.buffer, true)]);
        self.sync(stream)?;
        Ok(raw(&self.buffers, &self.pages, &range).1)
    }

    /// Runs `f` with the device buffer that holds `range` and the range's offset in it.
    pub fn with_buffer<R>(
        &mut self,
        range: BufferRange,
        f: impl FnOnce(&D::Buffer, u64) -> R,
    ) -> Result<R, ServerError> {
        self.check_alive()?;
        let (buffer, offset) = raw(&self.buffers, &self.pages, &range);
        Ok(f(buffer, offset))
    }
}
