//! Lazy reads: [`ComputeClient::read_lazy`] returns [`Bytes`] whose device-to-host copy runs
//! on first access, so many tensors can be serialised one after another with only one of them
//! in host memory at a time.

use std::future::Future;

use super::ComputeClient;
use crate::block_on::block_on;
use crate::bytes::Bytes;
use crate::device::Device;
use crate::error::{IoError, ServerError};
use crate::layout::{CopyDescriptor, num_elems};

impl<D: Device> ComputeClient<D> {
    /// Reads the tensor `descriptor` describes lazily: the returned [`Bytes`] copies it to the
    /// host on first access (dense row-major, as [`read_tensor`](Self::read_tensor) returns it)
    /// and keeps the source memory alive until then. Drain such bytes one after another rather
    /// than holding them all, and host memory holds one tensor at a time.
    ///
    /// The read is issued, at first access, on the stream this client uses now, after whatever
    /// that stream submitted by then: the data reflects the device's state at first access, so
    /// do not change the tensor in between. Access the bytes from any thread except inside a
    /// task of this device (an `exclusive` closure), which the read would wait for.
    ///
    /// # Errors at first access
    /// A failed read (a pending failure of the stream, a bad descriptor, a lost device) is
    /// returned by [`Bytes::materialize`]; `Deref` panics with it instead. Writing lazy bytes
    /// to a device reads them first, on the calling thread.
    pub fn read_lazy(&self, descriptor: CopyDescriptor) -> Bytes {
        let _span = call_span!(self, "read_lazy");
        // An invalid descriptor has no length; its read fails at first access, typed.
        let len = num_elems(&descriptor.shape)
            .ok()
            .and_then(|n| n.checked_mul(descriptor.elem_size))
            .unwrap_or(0);
        let mut client = self.clone();
        client.set_stream(self.stream_id());
        Bytes::lazy(
            len,
            Box::new(move || {
                let mut bytes = block_on(client.read_tensor_async(vec![descriptor]))?;
                Ok(bytes.remove(0))
            }),
        )
    }

    /// [`read_lazy`](Self::read_lazy), as a future: it is ready at once, and yields the lazy
    /// bytes, whose copy still runs at first access.
    ///
    /// # Errors
    /// None at once: the future is ready with the lazy bytes, and a failed read is returned at
    /// first access, as for [`read_lazy`](Self::read_lazy).
    pub fn read_lazy_async(
        &self,
        descriptor: CopyDescriptor,
    ) -> impl Future<Output = Result<Bytes, ServerError>> + Send + use<D> {
        std::future::ready(Ok(self.read_lazy(descriptor)))
    }
}

/// A lazy read that failed when a write read it, as the write's error.
pub(super) fn lazy_read_failed(source: ServerError) -> IoError {
    IoError::LazyReadFailed {
        source: Box::new(source),
    }
}

impl<D: Device> ComputeClient<D> {
    /// `data` as bytes in host memory, a lazy read run here: the read's failure is the
    /// caller's error (or, with the fuzzer's self-test knob off, a panic, as it once was).
    pub(super) fn resident(&self, data: Bytes) -> Result<Bytes, ServerError> {
        let resident = data.into_resident();
        if !self.shared.options.lazy_read_errors_returned {
            return Ok(
                resident.unwrap_or_else(|err| panic!("lazy read failed at first access: {err}"))
            );
        }
        resident
    }
}
