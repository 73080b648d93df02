//! Several devices on one client API: enumeration, copies between clients, and collectives.
//!
//! **API Boundary:** collectives run on the calling client's stream, ordered like a launch that
//! reads its source and writes its destination: they see every earlier operation of the stream
//! (and of other streams that touched their buffers), and later work sees their results. Their
//! failures, a peer that never arrives included, surface at the stream's next
//! `flush`/`sync`/read; what is wrong with the call itself is returned at the call.

use super::ComputeClient;
use crate::block_on::block_on;
use crate::collective::Collective;
use crate::collective::{CollectiveError, ReduceOperation, validate_devices};
use crate::device::Device;
use crate::error::{IoError, ServerError};
use crate::handle::Handle;
use crate::ids::{BufferRange, DeviceId};
use crate::kernel::ElemType;
use crate::layout::{CopyDescriptor, contiguous_strides, dense_bytes, extent_bytes};

/// What a device says about its backend's devices, read once when its client starts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peers {
    /// `DeviceId { TYPE_ID, ordinal }`: the id collectives know this device by.
    id: DeviceId,
    count: u32,
    collectives: bool,
    /// The devices this one can meet in a communicator (`Device::peer_group`).
    group: u64,
}

impl Peers {
    pub(super) fn of<D: Device>(device: &D) -> Self {
        Self {
            id: DeviceId {
                type_id: D::TYPE_ID,
                index: device.ordinal(),
            },
            count: device.device_count(),
            collectives: device.supports_collectives(),
            group: device.peer_group(),
        }
    }
}

/// Whether a tensor of `shape` laid out with `strides` is dense row-major (dimensions of one
/// element may have any stride).
fn is_dense(shape: &[usize], strides: &[usize]) -> bool {
    let dense = contiguous_strides(shape);
    shape
        .iter()
        .zip(strides)
        .zip(&dense)
        .all(|((&dim, &stride), &expected)| dim <= 1 || stride == expected)
}

impl<D: Device> ComputeClient<D> {
    /// This device's id among the devices of its backend, `DeviceId { type_id, index:
    /// ordinal }`: one of [`enumerate_devices`](Self::enumerate_devices), and the id that
    /// collectives name it by. Distinct from [`device_id`](Self::device_id), which tells
    /// clients (and the handles they made) apart.
    pub fn peer_id(&self) -> DeviceId {
        self.shared.peers.id
    }

    /// Whether this device runs collectives; without them, `all_reduce` is refused with
    /// [`CollectiveError::Unsupported`] and copies between clients read, then write.
    pub fn supports_collectives(&self) -> bool {
        self.shared.peers.collectives
    }

    /// Get all devices of a specific type available to this runtime.
    pub fn enumerate_devices(&self, type_id: u16) -> Vec<DeviceId> {
        if type_id != D::TYPE_ID {
            return Vec::new();
        }
        (0..self.shared.peers.count)
            .map(|index| DeviceId { type_id, index })
            .collect()
    }

    /// Get all devices available to this runtime (a client drives one backend).
    pub fn enumerate_all_devices(&self) -> Vec<DeviceId> {
        self.enumerate_devices(D::TYPE_ID)
    }

    /// Get the number of devices of a specific type available to this runtime.
    pub fn device_count(&self, type_id: u16) -> usize {
        self.enumerate_devices(type_id).len()
    }

    /// Get the number of devices available to this runtime.
    pub fn device_count_total(&self) -> usize {
        self.enumerate_all_devices().len()
    }

    /// Checks that this device can join a collective over `devices`.
    pub(super) fn check_collective(&self, devices: &[DeviceId]) -> Result<(), ServerError> {
        let peers = &self.shared.peers;
        if !peers.collectives {
            return Err(self.refused(CollectiveError::Unsupported { device: peers.id }));
        }
        validate_devices(devices, peers.id, peers.count).map_err(|err| self.refused(err))
    }

    /// A collective refused at a call on this client's stream.
    pub(super) fn refused(&self, error: CollectiveError) -> ServerError {
        ServerError::Collective {
            stream: self.stream_id(),
            error,
        }
    }

    /// Creates this device's communicator over `device_ids` (in rank order) if it does not
    /// exist yet. Every device of the list must do the same (collectives do it on first use).
    /// Non-blocking: a failure of the device surfaces at the stream's next blocking call.
    ///
    /// # Errors
    /// [`ServerError::Collective`] at once, naming this client's stream, if the device has no
    /// collectives ([`CollectiveError::Unsupported`]) or the list is invalid (another backend,
    /// a device twice, a device that does not exist, this one absent). A failure to create the
    /// communicator surfaces at the stream's next blocking call.
    pub fn ensure_init_collective(&self, device_ids: Vec<DeviceId>) -> Result<(), ServerError> {
        let _span = call_span!(self, "ensure_init_collective", devices = ?device_ids);
        self.record_other("ensure_init_collective", &[]);
        self.check_collective(&device_ids)?;
        self.enqueue(move |server, stream| server.init_collective(stream, &device_ids));
        Ok(())
    }

    /// Waits for the collectives enqueued by this client's stream. Collectives run on the
    /// stream itself (there is no separate communication stream), so this is
    /// [`sync`](Self::sync): it returns the stream's oldest failure, exactly once.
    ///
    /// # Errors
    /// As [`sync`](Self::sync).
    pub fn sync_collective(&self) -> Result<(), ServerError> {
        self.sync()
    }

    /// Perform an `all_reduce` operation on the given devices: `dst` becomes the element-wise
    /// `op` of every device's `src`. Each device of `device_ids` (in rank order, this one
    /// among them) must call it with buffers of the same size, the same `elem` and `op`.
    /// `src` and `dst` may be the same handle (in place). Non-blocking.
    ///
    /// Example: [Collectives](Self#collectives).
    ///
    /// # Errors
    /// At the call: [`ServerError::Collective`] as for
    /// [`ensure_init_collective`](Self::ensure_init_collective), or
    /// ([`CollectiveError::Mismatch`]) when the size is not whole elements or `src` and `dst`
    /// partly overlap; [`IoError::SizeMismatch`] when the sizes differ,
    /// [`IoError::WrongDevice`] for a handle of another client (both as [`ServerError::Io`]).
    /// Failures of the collective itself ([`CollectiveError::PeerTimeout`] for a peer that
    /// never arrives, [`CollectiveError::Mismatch`] for mismatched peers,
    /// [`CollectiveError::CommunicatorFailed`]) surface at the stream's next blocking call, as
    /// [`ServerError::Collective`] naming the stream.
    pub fn all_reduce(
        &self,
        src: Handle,
        dst: Handle,
        elem: ElemType,
        device_ids: Vec<DeviceId>,
        op: ReduceOperation,
    ) -> Result<(), ServerError> {
        let _span = call_span!(self, "all_reduce", devices = ?device_ids, ?op);
        self.record_other("all_reduce", &[&dst]);
        self.check_collective(&device_ids)?;
        let (src_range, dst_range) = (self.range(&src)?, self.range(&dst)?);
        if src_range.len != dst_range.len {
            return Err(IoError::SizeMismatch {
                what: "all_reduce destination",
                expected: src_range.len,
                actual: dst_range.len,
            }
            .into());
        }
        let mismatch = |reason: String| CollectiveError::Mismatch { reason };
        if !src_range.len.is_multiple_of(elem.size_bytes() as u64) {
            return Err(self.refused(mismatch(format!(
                "all_reduce of {} bytes is not a whole number of {elem} elements",
                src_range.len
            ))));
        }
        let overlap = src_range.buffer == dst_range.buffer
            && src_range != dst_range
            && src_range.offset < dst_range.offset + dst_range.len
            && dst_range.offset < src_range.offset + src_range.len;
        if overlap {
            return Err(self.refused(mismatch(
                "all_reduce source and destination overlap without being the same range".to_owned(),
            )));
        }
        let collective = Collective::AllReduce {
            src: src_range,
            dst: dst_range,
            elem,
            op,
        };
        self.enqueue(move |server, stream| server.collective(stream, &device_ids, collective));
        // Dropped here, after the collective is queued: if these are the last handles, their
        // release runs after it, and the server orders the memory's reuse after its completion.
        drop((src, dst));
        Ok(())
    }

    /// Transfer data from one client to another: a new handle on `dst_client`'s device holding
    /// `src`'s bytes (a whole number of `elem`s). See [`to_client_tensor`](Self::to_client_tensor).
    ///
    /// # Errors
    /// As [`to_client_tensor`](Self::to_client_tensor).
    pub fn to_client(
        &self,
        src: Handle,
        dst_client: &Self,
        elem: ElemType,
    ) -> Result<Handle, ServerError> {
        let len = src.size() as usize;
        let descriptor = CopyDescriptor::new(src, vec![len], vec![1], 1);
        self.to_client_tensor(descriptor, dst_client, elem)
    }

    /// Transfer data from one client to another: a new handle on `dst_client`'s device holding
    /// the tensor `src_descriptor` describes, dense row-major.
    ///
    /// A dense tensor of at least one byte between two different devices with collectives, of
    /// one peer group (see [`Device::peer_group`]), moves by a send on this client's stream and
    /// a receive on `dst_client`'s stream; otherwise it is read here and written there. Either way the copy sees every earlier operation of this stream on the
    /// source, and later work of `dst_client`'s stream sees the copied bytes. A peer copy's
    /// failure surfaces at either stream's next blocking call.
    ///
    /// # Errors
    /// At the call, as [`ServerError::Io`]: [`IoError::InvalidLayout`] or
    /// [`IoError::OutOfRange`] for a descriptor that does not fit its handle,
    /// [`IoError::WrongDevice`] for a handle of another client; [`ServerError::Collective`]
    /// ([`CollectiveError::Mismatch`]) for a size that is not a whole number of `elem`s. For the
    /// read-then-write path, the read's errors ([`read_tensor_async`](Self::read_tensor_async))
    /// and `dst_client`'s [`create`](Self::create)'s; for the peer path,
    /// [`ServerError::OutOfMemory`] from `dst_client`,
    /// [`CaptureError::Refused`](crate::CaptureError::Refused) at once while either stream
    /// captures a graph, and failures of the send or the receive at either stream's next
    /// blocking call.
    pub fn to_client_tensor(
        &self,
        src_descriptor: CopyDescriptor,
        dst_client: &Self,
        elem: ElemType,
    ) -> Result<Handle, ServerError> {
        let _span = call_span!(self, "to_client", to = %dst_client.stream_id());
        let CopyDescriptor {
            handle,
            shape,
            strides,
            elem_size,
        } = &src_descriptor;
        let extent = extent_bytes(shape, strides, *elem_size)?;
        let range = handle.sub_range_on(self.shared.id, 0, extent)?;
        let len = dense_bytes(shape, *elem_size)? as u64;
        if !len.is_multiple_of(elem.size_bytes() as u64) {
            return Err(self.refused(CollectiveError::Mismatch {
                reason: format!("a copy of {len} bytes is not a whole number of {elem} elements"),
            }));
        }
        let (src_peer, dst_peer) = (self.peer_id(), dst_client.peer_id());
        let (src_peers, dst_peers) = (&self.shared.peers, &dst_client.shared.peers);
        let peer_copy = len > 0
            && is_dense(shape, strides)
            && src_peers.collectives
            && dst_peers.collectives
            && (src_peers.group == dst_peers.group
                || !self.shared.options.peer_copies_within_group)
            && src_peer != dst_peer;
        if !peer_copy {
            let bytes = block_on(self.read_tensor_async(vec![src_descriptor]))?.remove(0);
            return dst_client.create(bytes);
        }
        // Both halves or neither: a half refused inside a capture window (it is no launch)
        // would leave the other waiting, or pair the next copy's receive with this send.
        for client in [self, dst_client] {
            client.call(|server, stream| server.refuse_in_capture(stream, "to_client"))?;
        }
        let devices = vec![src_peer, dst_peer];
        self.ensure_init_collective(devices.clone())?;
        dst_client.ensure_init_collective(devices.clone())?;
        let out = dst_client.empty(len as usize)?;
        // The copy without a peer path is a read and a create, recorded as such.
        dst_client.record_other("to_client", &[&out]);
        let dst_range = dst_client.range(&out)?;
        // `peer_copy_view_offsets` off re-introduces a known defect for the explorer to find.
        let offset = match self.shared.options.peer_copy_view_offsets {
            true => range.offset,
            false => 0,
        };
        let send = Collective::Send {
            src: BufferRange {
                len,
                offset,
                ..range
            },
            to: dst_peer,
        };
        let recv = Collective::Recv {
            dst: dst_range,
            from: src_peer,
        };
        let send_devices = devices.clone();
        self.enqueue(move |server, stream| server.collective(stream, &send_devices, send));
        dst_client.enqueue(move |server, stream| server.collective(stream, &devices, recv));
        // The source's handle is released (if this was its last) after the send is queued.
        drop(src_descriptor);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::is_dense;

    #[test]
    fn density_ignores_strides_of_single_element_dimensions() {
        assert!(is_dense(&[2, 3], &[3, 1]));
        assert!(is_dense(&[1, 3], &[99, 1]));
        assert!(!is_dense(&[2, 3], &[4, 1]));
        assert!(!is_dense(&[2, 2], &[1, 2]));
    }
}
