//! Collectives on the server: communicators created on first use, and collectives ordered
//! against other streams' use of their buffers exactly like launches (the source is read, the
//! destination written), so cross-stream waits and deferred frees need nothing new.

use super::{Server, raw_slice};
use crate::collective::Collective;
use crate::device::Device;
use crate::error::DeviceError;
use crate::ids::{BufferRange, CommunicatorId, DeviceId};
use crate::stream::StreamId;

/// The rank of `device` in `devices`; the client checked that it is there.
fn rank_of(devices: &[DeviceId], device: DeviceId) -> u32 {
    devices
        .iter()
        .position(|d| *d == device)
        .expect("the client checks that both ends of a peer copy are in the communicator")
        as u32
}

impl<D: Device> Server<D> {
    /// The device's communicator over `devices`, created on first use.
    fn communicator(&mut self, devices: &[DeviceId]) -> Result<CommunicatorId, DeviceError> {
        if let Some(&id) = self.communicators.get(devices) {
            return Ok(id);
        }
        let id = CommunicatorId(self.communicators.len() as u64);
        let ordinals: Vec<u32> = devices.iter().map(|d| d.index).collect();
        let created = self.device.create_communicator(id, &ordinals);
        self.noted(created)?;
        self.communicators.insert(devices.to_vec(), id);
        Ok(id)
    }

    /// Creates the communicator over `devices` if it does not exist yet; a failure surfaces at
    /// the stream's next blocking call.
    pub fn init_collective(&mut self, stream: StreamId, devices: &[DeviceId]) {
        if self.lost.is_some() || self.stream(stream).is_err() {
            return;
        }
        let _ =
            self.enqueue_or_queue_error(stream, |server| server.communicator(devices).map(|_| ()));
    }

    /// Enqueues `collective` on `stream` over the communicator of `devices`; failures surface
    /// at the stream's next blocking call.
    pub fn collective(&mut self, stream: StreamId, devices: &[DeviceId], collective: Collective) {
        if self.lost.is_some() || self.stream(stream).is_err() {
            return;
        }
        // A graph records launches only; a collective in the window is refused, and the
        // refusal surfaces once the window closes.
        if let Err(err) = self.refuse_in_capture(stream, collective.name()) {
            self.push_error(stream, err);
            return;
        }
        let accessed = collective.accesses();
        let _ = self.enqueue_or_queue_error(stream, |server| {
            let comm = server.communicator(devices)?;
            for &(buffer, write) in &accessed {
                server.order_before_access(stream, buffer, write)?;
            }
            let raw_stream = server.streams[&stream].raw;
            let slice = |range: &BufferRange| raw_slice(&server.buffers, &server.pages, range);
            match &collective {
                Collective::AllReduce { src, dst, elem, op } => {
                    let (src, dst) = (slice(src), slice(dst));
                    server
                        .device
                        .all_reduce(raw_stream, comm, src, dst, *elem, *op)
                }
                Collective::Send { src, to } => {
                    let src = slice(src);
                    server
                        .device
                        .send(raw_stream, comm, src, rank_of(devices, *to))
                }
                Collective::Recv { dst, from } => {
                    let dst = slice(dst);
                    server
                        .device
                        .recv(raw_stream, comm, dst, rank_of(devices, *from))
                }
            }
        });
        self.after_access(stream, &accessed);
    }
}
