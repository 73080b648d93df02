//! Point-to-point copies between devices of different processes: `send_to` on the source's
//! client, `receive_from` on the destination's.
//!
//! In one process `to_client` does both halves, since it holds both clients. Across processes
//! each process holds only its own, so each calls its half, naming the other end by its
//! `DeviceId` (its global rank, `lockstep::distributed`). Both halves run over the communicator
//! of every device the client enumerates (the world, across processes), on the caller's
//! stream, ordered like a launch that reads the source or writes the destination; a failure
//! (a peer that never calls its half) surfaces at the stream's next blocking call.

use super::ComputeClient;
use crate::collective::Collective;
use crate::collective::CollectiveError;
use crate::device::Device;
use crate::error::ServerError;
use crate::handle::Handle;
use crate::ids::DeviceId;

impl<D: Device> ComputeClient<D> {
    /// Sends `src`'s bytes to device `to`, whose client must call
    /// [`receive_from`](Self::receive_from) with this device and the same length. Non-blocking;
    /// an empty `src` sends nothing.
    ///
    /// # Errors
    /// At the call: [`ServerError::Collective`] if the device has no collectives, or `to` is
    /// this device or not one of [`enumerate_all_devices`](Self::enumerate_all_devices);
    /// [`IoError::WrongDevice`](crate::IoError::WrongDevice) for a handle of another client.
    /// A failure of the send surfaces at the stream's next blocking call.
    pub fn send_to(&self, src: Handle, to: DeviceId) -> Result<(), ServerError> {
        let _span = call_span!(self, "send_to", %to);
        self.record_other("send_to", &[]);
        let devices = self.peer_devices(to)?;
        let src_range = self.range(&src)?;
        if src_range.len > 0 {
            let send = Collective::Send { src: src_range, to };
            self.enqueue(move |server, stream| server.collective(stream, &devices, send));
        }
        // Released, if this was its last handle, after the send is queued.
        drop(src);
        Ok(())
    }

    /// A new handle of `len` bytes holding what device `from` sends with
    /// [`send_to`](Self::send_to). Non-blocking: later work of this stream sees the bytes.
    ///
    /// # Errors
    /// As [`send_to`](Self::send_to), and [`ServerError::OutOfMemory`] for the new buffer.
    pub fn receive_from(&self, from: DeviceId, len: usize) -> Result<Handle, ServerError> {
        let _span = call_span!(self, "receive_from", %from, len);
        let devices = self.peer_devices(from)?;
        let out = self.empty(len)?;
        self.record_other("receive_from", &[&out]);
        if len > 0 {
            let recv = Collective::Recv {
                dst: self.range(&out)?,
                from,
            };
            self.enqueue(move |server, stream| server.collective(stream, &devices, recv));
        }
        Ok(out)
    }

    /// The communicator a point-to-point copy with `peer` runs on: every device this client
    /// enumerates, checked to hold `peer` besides this one.
    fn peer_devices(&self, peer: DeviceId) -> Result<Vec<DeviceId>, ServerError> {
        let devices = self.enumerate_all_devices();
        self.check_collective(&devices)?;
        if peer == self.peer_id() {
            return Err(self.refused(CollectiveError::InvalidDevices {
                devices,
                reason: format!("{peer} cannot copy to itself"),
            }));
        }
        if !devices.contains(&peer) {
            return Err(self.refused(CollectiveError::NotInCommunicator {
                device: peer,
                devices,
            }));
        }
        Ok(devices)
    }
}
