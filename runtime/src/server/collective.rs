//! Collectives on the server: communicators created on first use, and collectives ordered
//! against other streams' use of their buffers exactly like launches (the source is read, the
//! destination written), so cross-stream waits and deferred frees need nothing new.

use super::{BufferId, BufferRange, Server, raw_slice};
use crate::collective::{CommunicatorId, ReduceOperation};
use crate::device::{Device, DeviceId};
use crate::error::DeviceError;
use crate::kernel::ElemType;
use crate::stream::StreamId;

/// One collective operation of this device, as the client validated it.
#[derive(Clone, Debug)]
pub(crate) enum Collective {
    AllReduce {
        src: BufferRange,
        dst: BufferRange,
        elem: ElemType,
        op: ReduceOperation,
    },
    /// Sends `src`'s bytes to device `to` of the communicator.
    Send { src: BufferRange, to: DeviceId },
    /// Receives into `dst` what device `from` of the communicator sends.
    Recv { dst: BufferRange, from: DeviceId },
}

impl Collective {
    fn name(&self) -> &'static str {
        match self {
            Collective::AllReduce { .. } => "all_reduce",
            Collective::Send { .. } => "send",
            Collective::Recv { .. } => "recv",
        }
    }

    /// The buffers it touches, and whether it writes them.
    fn accesses(&self) -> Vec<(BufferId, bool)> {
        match self {
            Collective::AllReduce { src, dst, .. } => vec![(src.buffer, false), (dst.buffer, true)],
            Collective::Send { src, .. } => vec![(src.buffer, false)],
            Collective::Recv { dst, .. } => vec![(dst.buffer, true)],
        }
    }
}

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
