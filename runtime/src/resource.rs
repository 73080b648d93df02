//! [`ComputeClient::get_resource`]: the device buffer behind a handle, for code outside the
//! runtime (a vendor library, a hand-written kernel), kept alive by a guard.

use crate::client::ComputeClient;
use crate::client::call_span;
use crate::device::Device;
use crate::error::ServerError;
use crate::handle::Handle;
use crate::ids::BufferRange;

/// The device memory of a handle, held for use outside the runtime. The memory stays
/// allocated while the guard lives, even after every other handle to it dropped.
///
/// **API Boundary:** when [`get_resource`](ComputeClient::get_resource) returns, every
/// operation submitted before it that touches the memory has completed, and later work of
/// other streams on it waits for the guard's stream. Ordering outside work against later work
/// of the runtime is the caller's: sync the guard's stream's outside work before submitting
/// more.
#[derive(Debug)]
pub struct Resource<D: Device> {
    client: ComputeClient<D>,
    handle: Handle,
    range: BufferRange,
    offset_bytes: u64,
}

impl<D: Device> Resource<D> {
    /// The handle this guard keeps alive.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Byte offset of the handle's first byte in its device buffer (pools carve several
    /// handles out of one buffer).
    pub fn offset_bytes(&self) -> u64 {
        self.offset_bytes
    }

    /// Length in bytes of the handle's range.
    pub fn len_bytes(&self) -> u64 {
        self.range.len
    }

    /// Runs `f` on the device's thread with the device buffer (e.g. a `CudaBuffer`, whose
    /// `device_ptr` an outside library takes) and [`offset_bytes`](Self::offset_bytes). The
    /// buffer cannot escape `f`.
    pub fn with_buffer<R: Send + 'static>(
        &self,
        f: impl FnOnce(&D::Buffer, u64) -> R + Send + 'static,
    ) -> Result<R, ServerError> {
        let range = self.range;
        self.client
            .call(move |server, _| server.with_buffer(range, f))
    }
}

impl<D: Device> ComputeClient<D> {
    /// The device memory of `handle`, for use outside the runtime: waits until every operation
    /// submitted before on this client's stream, and every conflicting one of other streams,
    /// has completed, then returns a guard that keeps the memory alive.
    ///
    /// # Errors
    /// A handle of another device ([`IoError::WrongDevice`](crate::IoError::WrongDevice)); the
    /// stream's oldest pending failure, as `sync` returns it; refused while the stream captures
    /// a graph.
    pub fn get_resource(&self, handle: Handle) -> Result<Resource<D>, ServerError> {
        let _span = call_span!(self, "get_resource", bytes = handle.size());
        let range = self.range(&handle)?;
        let offset_bytes =
            self.call(move |server, stream| server.prepare_resource(stream, range))?;
        Ok(Resource {
            client: self.clone(),
            handle,
            range,
            offset_bytes,
        })
    }
}
