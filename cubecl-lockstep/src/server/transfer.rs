//! Reads and writes: cubecl's copy descriptors over views of Lockstep memory.

use cubecl_common::bytes::Bytes;
use cubecl_environment::stream::StreamId;
use cubecl_runtime::server::{CopyDescriptor, ServerError};
use lockstep::{Handle, block_on, contiguous_strides};

use super::LockstepServer;
use super::errors::refused;
use crate::backend::Backend;
use crate::books::StreamKey;
use crate::memory::region;

/// A descriptor's tensor, as Lockstep's read and write take it.
struct Tensor {
    view: Handle,
    shape: Vec<usize>,
    strides: Vec<usize>,
    elem_size: usize,
}

impl Tensor {
    /// Whether the elements lie densely from the view's first byte (then a plain copy of
    /// the first `bytes()` bytes moves them).
    fn is_dense(&self) -> bool {
        self.shape
            .iter()
            .zip(&self.strides)
            .zip(contiguous_strides(&self.shape))
            .all(|((&n, &s), c)| n <= 1 || s == c)
    }

    fn bytes(&self) -> u64 {
        (self.shape.iter().product::<usize>() * self.elem_size) as u64
    }

    fn descriptor(self) -> lockstep::CopyDescriptor {
        lockstep::CopyDescriptor::new(self.view, self.shape, self.strides, self.elem_size)
    }
}

impl<B: Backend> LockstepServer<B> {
    /// A read after every stream's work was drained onto the books: the claim check of every
    /// descriptor first (a claimed buffer fails the whole read, naming each failure once),
    /// then the bytes.
    pub(super) fn read_now(
        &mut self,
        descriptors: Vec<CopyDescriptor>,
        stream: StreamId,
    ) -> Result<Vec<Bytes>, ServerError> {
        self.sweep();
        self.drain_all()?;
        let regions: Vec<_> = descriptors.iter().map(|d| region(&d.handle)).collect();
        self.books.report(&regions)?;
        let key = self.streams.key(stream);
        descriptors
            .into_iter()
            .map(|d| self.read_one(d, key))
            .collect()
    }

    fn read_one(
        &mut self,
        descriptor: CopyDescriptor,
        key: StreamKey,
    ) -> Result<Bytes, ServerError> {
        let Some(tensor) = self.tensor(&descriptor)? else {
            return Ok(Bytes::from_bytes_vec(Vec::new()));
        };
        let client = self.streams.client(key);
        let read = if tensor.is_dense() {
            let view = tensor.view.slice(0, tensor.bytes()).map_err(refused)?;
            client.read_one(view)
        } else {
            block_on(client.read_one_tensor_async(tensor.descriptor()))
        };
        let bytes = read.map_err(|e| self.observe(&e))?;
        Ok(Bytes::from_bytes_vec(bytes.into_vec()))
    }

    /// Host writes, each queued on `stream`'s Lockstep stream: one that Lockstep accepts
    /// rewrites its bytes (ending any claim on them); one it refuses leaves them carrying
    /// the refusal.
    pub(super) fn write_now(
        &mut self,
        descriptors: Vec<(CopyDescriptor, Bytes)>,
        stream: StreamId,
    ) {
        self.sweep();
        let key = self.streams.key(stream);
        for (descriptor, data) in descriptors {
            let written = region(&descriptor.handle);
            match self.write_one(&descriptor, &data, key) {
                Ok(()) => self.books.accepted(key, vec![written]),
                Err(error) => self.books.refused(&[written], error),
            }
        }
    }

    fn write_one(
        &mut self,
        descriptor: &CopyDescriptor,
        data: &[u8],
        key: StreamKey,
    ) -> Result<(), ServerError> {
        self.ensure_alive()?;
        let Some(tensor) = self.tensor(descriptor)? else {
            return Ok(());
        };
        let client = self.streams.client(key);
        let data = lockstep::Bytes::from(data);
        let written = if tensor.is_dense() {
            client.write(&tensor.view, data)
        } else {
            client.write_tensor(tensor.descriptor(), data)
        };
        written.map_err(refused)
    }

    /// The tensor a descriptor names; `None` for one of zero bytes.
    fn tensor(&self, descriptor: &CopyDescriptor) -> Result<Option<Tensor>, ServerError> {
        let view = self.memory.view(&descriptor.handle).map_err(refused)?;
        Ok(view.map(|view| Tensor {
            view,
            shape: descriptor.shape.iter().copied().collect(),
            strides: descriptor.strides.iter().copied().collect(),
            elem_size: descriptor.elem_size,
        }))
    }
}
