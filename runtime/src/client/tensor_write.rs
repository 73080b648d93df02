//! `write_tensor`: the strided counterpart of `read_tensor`. Dense row-major bytes go to a
//! tensor laid out with its strides (the pitched rows `create_tensor` returns, or any layout
//! whose elements do not overlap), a device copy per run of consecutive elements.

use super::ComputeClient;
use crate::bytes::Bytes;
use crate::device::Device;
use crate::error::IoError;
use crate::ids::BufferRange;
use crate::layout::{CopyDescriptor, Runs, check_disjoint, extent_bytes, num_elems, runs};

impl<D: Device> ComputeClient<D> {
    /// Writes `data`, a tensor's elements in dense row-major order, to `descriptor`'s handle
    /// laid out with its strides: element `[i, j, …]` goes to element offset
    /// `i * strides[0] + j * strides[1] + …` of the handle. Bytes between the elements (a
    /// pitched tensor's row padding, the other columns of a column block) are not touched. The
    /// inverse of [`read_tensor`](Self::read_tensor), and the way to refill a tensor from
    /// [`create_tensor`](Self::create_tensor), whose rows may be pitched: [`write`](Self::write)
    /// copies bytes as they are.
    ///
    /// Non-blocking, on this client's stream, like `write`: each run of consecutive elements
    /// (a whole dense tensor, each row of a pitched one) is one device copy, all enqueued by
    /// one task. A layout whose innermost stride is not 1 copies element by element.
    ///
    /// ```
    /// use lockstep::{Bytes, ComputeClient, CopyDescriptor};
    /// use lockstep_sim::{SimConfig, SimDevice};
    ///
    /// let client = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    /// // 2 x 3 u32s: the simulator pitches rows to 16 bytes, so the strides are [4, 1].
    /// let layout = client.empty_tensor(&[2, 3], 4)?;
    /// assert_eq!(layout.strides, vec![4, 1]);
    /// let tensor = CopyDescriptor::new(layout.memory, vec![2, 3], layout.strides, 4);
    /// client.write_tensor(tensor.clone(), Bytes::from_elems(&[1u32, 2, 3, 4, 5, 6]))?;
    /// let read = client.read_one_tensor_async(tensor);
    /// assert_eq!(lockstep::block_on(read)?.to_elems::<u32>(), vec![1, 2, 3, 4, 5, 6]);
    /// # Ok::<(), lockstep::Error>(())
    /// ```
    ///
    /// # Errors
    /// Refused at the call, with nothing enqueued:
    /// [`IoError::InvalidLayout`] if the shape and strides differ in rank, the element size is
    /// zero, the extent overflows, or two elements would share a place (strides must nest:
    /// taken by increasing stride, each reaches past what the smaller ones span);
    /// [`IoError::SizeMismatch`] if `data` is not `elements × elem_size` bytes;
    /// [`IoError::OutOfRange`] if the tensor's extent runs past the handle;
    /// [`IoError::WrongDevice`] for another device's handle. Failures of the copies surface at
    /// the stream's next `flush`/`sync`/read.
    pub fn write_tensor(&self, descriptor: CopyDescriptor, data: Bytes) -> Result<(), IoError> {
        self.write_tensors(vec![(descriptor, data)])
    }

    /// Writes several tensors; see [`write_tensor`](Self::write_tensor). Every tensor is
    /// checked before anything is enqueued, so a refusal writes none of them.
    ///
    /// # Errors
    /// As [`write_tensor`](Self::write_tensor), for the first tensor that is refused.
    pub fn write_tensors(&self, tensors: Vec<(CopyDescriptor, Bytes)>) -> Result<(), IoError> {
        let _span = call_span!(self, "write_tensor", tensors = tensors.len());
        let planned = tensors
            .iter()
            .map(|(descriptor, data)| self.plan_tensor_write(descriptor, data))
            .collect::<Result<Vec<_>, _>>();
        let planned = self.refusing("write_tensor", planned)?;
        let mut writes = Vec::new();
        let mut handles = Vec::with_capacity(tensors.len());
        for ((descriptor, data), (range, runs)) in tensors.into_iter().zip(planned) {
            handles.push(descriptor.handle);
            // A lazy read must run here: on the actor it would wait for the actor.
            let data = self.resident(data).map_err(super::lazy::lazy_read_failed);
            let data = self.refusing("write_tensor", data)?;
            writes.extend(copies(range, &runs, data));
        }
        for (range, bytes) in &mut writes {
            self.record_write(*range, bytes);
        }
        if !writes.is_empty() {
            self.enqueue(move |server, stream| {
                for (range, bytes) in writes {
                    server.write(stream, range, bytes);
                }
            });
        }
        // Dropped after the writes are queued: if these are the last handles, their release
        // runs after them (the actor's queue is FIFO).
        drop(handles);
        Ok(())
    }

    /// Checks one tensor write: the tensor's range of its handle, and its runs.
    fn plan_tensor_write(
        &self,
        descriptor: &CopyDescriptor,
        data: &Bytes,
    ) -> Result<(BufferRange, Runs), IoError> {
        let CopyDescriptor {
            handle,
            shape,
            strides,
            elem_size,
        } = descriptor;
        let extent = extent_bytes(shape, strides, *elem_size)?;
        check_disjoint(shape, strides)?;
        let expected =
            num_elems(shape)?
                .checked_mul(*elem_size)
                .ok_or_else(|| IoError::InvalidLayout {
                    reason: format!("shape {shape:?} of {elem_size}-byte elements overflows"),
                })? as u64;
        if data.len() as u64 != expected {
            return Err(IoError::SizeMismatch {
                what: "tensor data",
                expected,
                actual: data.len() as u64,
            });
        }
        let range = handle.sub_range_on(self.shared.id, 0, extent)?;
        Ok((range, runs(shape, strides, *elem_size)))
    }
}

/// The copies that put dense `data` into the `runs` of a tensor at `range`: `data` itself for a
/// tensor of one run, a slice of it per run otherwise.
fn copies(range: BufferRange, runs: &Runs, data: Bytes) -> Vec<(BufferRange, Bytes)> {
    let at = |offset: u64| BufferRange {
        offset: range.offset + offset,
        len: runs.run_bytes,
        ..range
    };
    match runs.offsets_bytes[..] {
        [] => Vec::new(),
        [offset] => vec![(at(offset), data)],
        _ => runs
            .offsets_bytes
            .iter()
            .zip(data.chunks_exact(runs.run_bytes as usize))
            .map(|(&offset, run)| (at(offset), Bytes::from(run)))
            .collect(),
    }
}
