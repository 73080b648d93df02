//! A device that misbehaves on purpose: it forwards every call to the device it wraps, except
//! where its [`Behaviour`] says otherwise. The self-tests' misbehaving devices
//! (`explorer/tests/explore_self_test.rs`,
//! `conformance/tests/check_faults_self_test.rs`) are each a `Behaviour`, so the
//! forwarding is written once, here.
//!
//! What the wrapper keeps of the trait's defaults: it is never `SIMULATED` (the runtime's
//! per-task invariant checks stay as on a real device), and it has no pinned host memory and
//! no host pool statistics, as the self-tests' devices never had.

use std::sync::Arc;

use lockstep::collective::CommunicatorId;
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{CompileOptions, ElemType, KernelDef, Scalar};
use lockstep::{Bytes, Device, DeviceError, DeviceProperties, ReduceOperation, StreamId};

/// What a [`Misbehaving`] device does differently from the device it wraps. Each hook is given
/// the wrapped device and defaults to forwarding the call to it (or to doing nothing).
pub trait Behaviour<D: Device>: Send + 'static {
    /// Whether the device offers the wrapped device's ordinal, peers and collectives; without,
    /// it keeps the trait's defaults (device 0 of 1, no collectives).
    const COLLECTIVES: bool;

    /// `allocate`.
    fn allocate(&mut self, inner: &mut D, bytes: u64) -> Result<D::Buffer, DeviceError> {
        inner.allocate(bytes)
    }

    /// Runs before `buffer` is freed; it must let go of any clone of `buffer` it holds.
    fn freeing(&mut self, inner: &mut D, buffer: &Arc<D::Buffer>) {
        let _ = (inner, buffer);
    }

    /// `write`.
    fn write(
        &mut self,
        inner: &mut D,
        stream: D::Stream,
        dst: &Arc<D::Buffer>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        inner.write(stream, dst, offset, data)
    }

    /// Runs after any other operation was enqueued on `stream` (a read, copy, launch, event,
    /// timestamp, replay or collective), if it was.
    fn enqueued(&mut self, inner: &mut D, stream: D::Stream) -> Result<(), DeviceError> {
        let _ = (inner, stream);
        Ok(())
    }

    /// Runs before `stream` is flushed or synchronized (by the default [`synchronize`]) or
    /// begins a capture.
    ///
    /// [`synchronize`]: Behaviour::synchronize
    fn draining(&mut self, inner: &mut D, stream: D::Stream) -> Result<(), DeviceError> {
        let _ = (inner, stream);
        Ok(())
    }

    /// `wait_event`.
    fn wait_event(
        &mut self,
        inner: &mut D,
        stream: D::Stream,
        event: &D::Event,
    ) -> Result<(), DeviceError> {
        inner.wait_event(stream, event)
    }

    /// `event_complete`.
    fn event_complete(&mut self, inner: &mut D, event: &D::Event) -> bool {
        inner.event_complete(event)
    }

    /// `synchronize`, after [`draining`](Behaviour::draining).
    fn synchronize(&mut self, inner: &mut D, stream: D::Stream) -> Result<(), DeviceError> {
        self.draining(inner, stream)?;
        inner.synchronize(stream)
    }

    /// `take_errors`.
    fn take_errors(&mut self, inner: &mut D, stream: D::Stream) -> Vec<DeviceError> {
        inner.take_errors(stream)
    }
}

/// `inner`, misbehaving as `behaviour` says. Its buffers are the wrapped device's, shared so
/// that a behaviour can hold one back (a write enqueued late).
#[derive(Debug)]
pub struct Misbehaving<D, B> {
    /// The device wrapped.
    pub inner: D,
    /// What it does differently.
    pub behaviour: B,
}

impl<D: Device, B: Behaviour<D>> Misbehaving<D, B> {
    /// Makes `op`'s call on the wrapped device, then tells the behaviour it was enqueued.
    fn enqueue<T>(
        &mut self,
        stream: D::Stream,
        op: impl FnOnce(&mut D) -> Result<T, DeviceError>,
    ) -> Result<T, DeviceError> {
        let out = op(&mut self.inner)?;
        self.behaviour.enqueued(&mut self.inner, stream)?;
        Ok(out)
    }
}

/// The wrapped device's slices of `slices`.
fn unwrap_slices<'a, B>(slices: &[BufferSlice<'a, Arc<B>>]) -> Vec<BufferSlice<'a, B>> {
    slices
        .iter()
        .map(|s| BufferSlice {
            buffer: &**s.buffer,
            offset: s.offset,
            len: s.len,
        })
        .collect()
}

/// The wrapped device's slice of `slice`.
fn unwrap_slice<'a, B>(slice: BufferSlice<'a, Arc<B>>) -> BufferSlice<'a, B> {
    unwrap_slices(std::slice::from_ref(&slice)).remove(0)
}

/// What a device without collectives answers (the trait's default).
fn unsupported(operation: &str) -> DeviceError {
    DeviceError::Unsupported {
        operation: operation.to_owned(),
    }
}

impl<D: Device<Buffer: Sync>, B: Behaviour<D>> Device for Misbehaving<D, B> {
    type Buffer = Arc<D::Buffer>;
    type Stream = D::Stream;
    type Event = D::Event;
    type Kernel = D::Kernel;
    type PendingRead = D::PendingRead;
    type Graph = D::Graph;
    type Timestamp = D::Timestamp;
    const TYPE_ID: u16 = D::TYPE_ID;

    fn properties(&self) -> &DeviceProperties {
        self.inner.properties()
    }
    fn create_stream(&mut self) -> Result<D::Stream, DeviceError> {
        self.inner.create_stream()
    }
    fn label_stream(&mut self, stream: D::Stream, id: StreamId) {
        self.inner.label_stream(stream, id)
    }
    fn allocate(&mut self, bytes: u64) -> Result<Self::Buffer, DeviceError> {
        self.behaviour
            .allocate(&mut self.inner, bytes)
            .map(Arc::new)
    }
    fn free(&mut self, buffer: Self::Buffer) {
        self.behaviour.freeing(&mut self.inner, &buffer);
        let buffer = Arc::try_unwrap(buffer).expect("the behaviour let go of the buffer");
        self.inner.free(buffer);
    }
    fn write(
        &mut self,
        stream: D::Stream,
        dst: &Self::Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        (self.behaviour).write(&mut self.inner, stream, dst, offset, data)
    }
    fn read(
        &mut self,
        stream: D::Stream,
        src: &Self::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<D::PendingRead, DeviceError> {
        self.enqueue(stream, |d| d.read(stream, src, offset, len))
    }
    fn wait_read(&mut self, read: D::PendingRead) -> Result<Bytes, DeviceError> {
        self.inner.wait_read(read)
    }
    fn copy(
        &mut self,
        stream: D::Stream,
        src: BufferSlice<'_, Self::Buffer>,
        dst: &Self::Buffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        let src = unwrap_slice(src);
        self.enqueue(stream, |d| d.copy(stream, src, dst, dst_offset))
    }
    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<D::Kernel, DeviceError> {
        self.inner.compile(kernel, options)
    }
    fn launch(
        &mut self,
        stream: D::Stream,
        kernel: &D::Kernel,
        count: LaunchCount<'_, Self::Buffer>,
        bindings: &[BufferSlice<'_, Self::Buffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        let count = match count {
            LaunchCount::Static(dims) => LaunchCount::Static(dims),
            LaunchCount::Dynamic(s) => LaunchCount::Dynamic(unwrap_slice(s)),
        };
        let bindings = unwrap_slices(bindings);
        self.enqueue(stream, |d| {
            d.launch(stream, kernel, count, &bindings, params)
        })
    }
    fn record_event(&mut self, stream: D::Stream) -> Result<D::Event, DeviceError> {
        self.enqueue(stream, |d| d.record_event(stream))
    }
    fn wait_event(&mut self, stream: D::Stream, event: &D::Event) -> Result<(), DeviceError> {
        (self.behaviour).wait_event(&mut self.inner, stream, event)?;
        self.behaviour.enqueued(&mut self.inner, stream)
    }
    fn event_complete(&mut self, event: &D::Event) -> bool {
        self.behaviour.event_complete(&mut self.inner, event)
    }
    fn flush(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        self.behaviour.draining(&mut self.inner, stream)?;
        self.inner.flush(stream)
    }
    fn synchronize(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        self.behaviour.synchronize(&mut self.inner, stream)
    }
    fn take_errors(&mut self, stream: D::Stream) -> Vec<DeviceError> {
        self.behaviour.take_errors(&mut self.inner, stream)
    }
    fn record_timestamp(&mut self, stream: D::Stream) -> Result<D::Timestamp, DeviceError> {
        self.enqueue(stream, |d| d.record_timestamp(stream))
    }
    fn elapsed_ns(&mut self, start: &D::Timestamp, end: &D::Timestamp) -> Result<u64, DeviceError> {
        self.inner.elapsed_ns(start, end)
    }
    fn begin_capture(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        self.behaviour.draining(&mut self.inner, stream)?;
        self.inner.begin_capture(stream)
    }
    fn end_capture(&mut self, stream: D::Stream) -> Result<D::Graph, DeviceError> {
        self.inner.end_capture(stream)
    }
    fn replay(&mut self, stream: D::Stream, graph: &D::Graph) -> Result<(), DeviceError> {
        self.enqueue(stream, |d| d.replay(stream, graph))
    }
    fn destroy_graph(&mut self, graph: D::Graph) {
        self.inner.destroy_graph(graph)
    }
    fn ordinal(&self) -> u32 {
        if B::COLLECTIVES {
            self.inner.ordinal()
        } else {
            0
        }
    }
    fn device_count(&self) -> u32 {
        if B::COLLECTIVES {
            self.inner.device_count()
        } else {
            1
        }
    }
    fn peer_group(&self) -> u64 {
        self.inner.peer_group()
    }
    fn abandon(&mut self, reason: &str) {
        self.inner.abandon(reason);
    }
    fn supports_collectives(&self) -> bool {
        B::COLLECTIVES && self.inner.supports_collectives()
    }
    fn create_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        if !B::COLLECTIVES {
            return Err(unsupported("create_communicator"));
        }
        self.inner.create_communicator(id, peers)
    }
    fn all_reduce(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        dst: BufferSlice<'_, Self::Buffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        if !B::COLLECTIVES {
            return Err(unsupported("all_reduce"));
        }
        let (src, dst) = (unwrap_slice(src), unwrap_slice(dst));
        self.enqueue(stream, |d| d.all_reduce(stream, comm, src, dst, elem, op))
    }
    fn send(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        if !B::COLLECTIVES {
            return Err(unsupported("send"));
        }
        let src = unwrap_slice(src);
        self.enqueue(stream, |d| d.send(stream, comm, src, peer))
    }
    fn recv(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        if !B::COLLECTIVES {
            return Err(unsupported("recv"));
        }
        let dst = unwrap_slice(dst);
        self.enqueue(stream, |d| d.recv(stream, comm, dst, peer))
    }
}
