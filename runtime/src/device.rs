//! The narrow hardware interface every backend implements (`SimDevice`, `WgpuDevice`,
//! `CudaDevice`). Everything that can be wrong in a runtime (ordering across streams, liveness,
//! pool reuse, error routing, capture rules) lives above this trait, in the server, so that the
//! conformance suite tests the same logic on every device.
//!
//! # Who guarantees what
//!
//! The trait is safe to call: no precondition of a call rests on its caller. The runtime
//! validates everything before it reaches a device, so under it none of the checks below
//! fails; code that drives a device directly gets typed errors instead of reaching memory it
//! must not touch. Every device makes the same checks ([`contract`]) before touching anything,
//! and refuses a call that breaks one with [`DeviceError::Contract`], the same value on every
//! device, leaving the device usable (the simulator also reports each refusal to its
//! sanitizer, so that a runtime that breaks the contract fails the suite):
//!
//! - every byte range (writes, reads, both sides of a copy, launch bindings, indirect counts,
//!   collectives) lies inside a buffer of this device;
//! - every stream was created by this device;
//! - a launch gives one binding per declared binding (then the fault record in checked mode),
//!   each starting on a 4-byte word, and parameters of the declared types;
//! - a replayed graph was captured on this device and uses no buffer freed since;
//! - allocations hold at least one byte; collectives name a communicator this device created,
//!   over existing devices that include it.
//!
//! `free` of another device's buffer leaves its memory alone. Events, reads, timestamps and
//! kernels go back only to the device that made them; no device's memory safety depends on it
//! (CUDA refuses a kernel or timestamp of another GPU's context with
//! [`ContractViolation::ForeignHandle`](crate::ContractViolation::ForeignHandle); a foreign one
//! is a bug the simulator may panic on).
//!
//! # Contract
//!
//! Each clause below is a sentence a conformance property or a `SimDevice` assertion checks.
//!
//! - A device is driven from exactly one thread, the device's actor; every method takes
//!   `&mut self` and no method blocks on another thread.
//! - Work enqueued on one stream executes in enqueue order.
//! - Work on different streams is unordered unless an event orders it: work enqueued on stream B
//!   after `wait_event(B, e)` starts only after the work that preceded `record_event(A) -> e` on
//!   stream A has completed.
//! - An event can only be waited on after it was recorded.
//! - `write` copies `data` before returning; the caller may reuse its bytes at once.
//! - `write_bytes` owns its bytes: the device may read them after returning, and drops them
//!   only once no copy reads them any more.
//! - `read` enqueues a copy to the host; its bytes are the buffer's contents after every earlier
//!   operation of that stream, and `wait_read` blocks until they are available.
//! - A pooled block a read returns belongs to the `Bytes` until it drops, on any thread, also
//!   after the device and its client are gone; no copy of the device writes it meanwhile.
//! - `free` is only called by the runtime once every operation that uses the buffer has
//!   completed (the runtime waits for events first). No device lets an early free reach memory
//!   that queued work still uses: CUDA waits for its streams before freeing, wgpu keeps the
//!   memory until submitted work that uses it completes, and the simulator, which treats it as
//!   a runtime bug, reports it loudly (`SanitizerReport::FreeWhileInUse`).
//! - Asynchronous failures (a faulting copy or kernel) are reported on the stream they happened
//!   on, by `take_errors` once the failing operation has executed; `synchronize` waits for
//!   everything enqueued on the stream so that, after it, `take_errors` holds every failure of
//!   that work.
//! - A fatal error (`DeviceError::Lost`) is returned by every later call that can fail; no call
//!   blocks forever after it.
//! - Allocation beyond capacity or beyond `max_allocation_bytes` returns an error; it never
//!   panics and never succeeds partially.
//! - Graph capture records the launches enqueued on the stream between `begin_capture` and
//!   `end_capture` instead of executing them; `replay` executes them again, in order, on the
//!   stream it is given, against the buffers they were recorded with.
//! - The runtime calls `label_stream` once per stream, right after `create_stream`; the id it
//!   passes changes nothing a device does, only what it reports (the simulator reports a second
//!   label of one stream as `ContractViolation::StreamLabelledTwice`).
//! - A device names itself `DeviceId { type_id: TYPE_ID, index: ordinal() }`; the indices
//!   `0..device_count()` are the devices of its backend this process can open together, and
//!   only devices of one `peer_group` meet in a communicator.
//! - A device without collectives returns [`DeviceError::Unsupported`] from every collective
//!   method and says so in `supports_collectives`.
//! - `create_communicator` is called once per id, before any collective on it, by every device
//!   of `peers` with the same list; a device's rank is its position in the list.
//! - A collective (`all_reduce`, `send`, `recv`) is enqueued on a stream like a copy: it reads
//!   its source after every earlier operation of that stream, and later operations of the
//!   stream see what it wrote.
//! - Collectives of one communicator are matched across its devices in the order each device
//!   enqueues them; every device of the communicator enqueues the same sequence.
//! - A collective whose peer never arrives fails on its stream with
//!   [`CollectiveError::PeerTimeout`](crate::CollectiveError::PeerTimeout) where the device
//!   can tell; it never leaves a device call blocked after its peers are gone.

pub mod contract;

use std::fmt::Debug;

use crate::bytes::Bytes;
use crate::collective::ReduceOperation;
use crate::error::DeviceError;
use crate::host_pool::HostPoolStats;
use crate::ids::CommunicatorId;
pub use crate::ids::DeviceId;
use crate::kernel::{CompileOptions, ElemType, KernelDef, Scalar};
pub use crate::properties::{DeviceProperties, Features, GraphSupport};
use crate::stream::StreamId;

/// A byte range of a device buffer, as bound to a kernel or targeted by a copy.
#[derive(Debug)]
pub struct BufferSlice<'a, B> {
    /// The allocation the range lies in.
    pub buffer: &'a B,
    /// Byte offset of the range in the buffer.
    pub offset: u64,
    /// Length of the range, in bytes.
    pub len: u64,
}

/// How many workgroups a launch runs.
#[derive(Debug)]
pub enum LaunchCount<'a, B> {
    /// Workgroups along x, y and z, within [`DeviceProperties::max_workgroups`] (the runtime
    /// skips a launch with a zero count and never passes one).
    Static([u32; 3]),
    /// Three little-endian `u32` workgroup counts read from device memory when the launch
    /// executes (indirect dispatch). Counts with a zero, or above
    /// [`DeviceProperties::max_workgroups`] in any dimension, make the launch do nothing.
    Dynamic(BufferSlice<'a, B>),
}

/// The hardware interface. See the module documentation for the contract.
pub trait Device: Send + 'static {
    /// A raw device allocation.
    type Buffer: Debug + Send;
    /// A device queue. Cheap to copy; valid for the device's life.
    type Stream: Copy + Eq + Debug + Send;
    /// A point in a stream's work, used to order other streams after it.
    type Event: Debug + Send;
    /// A compiled kernel.
    type Kernel: Debug + Send;
    /// A read in flight to the host.
    type PendingRead: Debug + Send;
    /// A captured graph.
    type Graph: Debug + Send;
    /// A device timestamp recorded on a stream.
    type Timestamp: Debug + Send;

    /// Identifies the backend in [`DeviceId`]s (simulator 0, wgpu 1, CUDA 2).
    const TYPE_ID: u16;

    /// The device is a simulator. The server then checks its invariants after every task, in
    /// release builds too: next to simulated work the check is cheap, and a simulation exists
    /// to find the runtime's bugs (elsewhere only builds with debug assertions check after
    /// every task).
    const SIMULATED: bool = false;

    /// What the device is and can do; constant for the device's life.
    fn properties(&self) -> &DeviceProperties;

    /// Creates a new stream. Streams are never destroyed before the device.
    fn create_stream(&mut self) -> Result<Self::Stream, DeviceError>;

    /// Tells the device the runtime's id of `stream` (the [`StreamId`] users see), so that what
    /// it reports can name the stream as users know it: error messages, traces, and the
    /// simulator's faults aimed at one stream. Diagnostics only: a device behaves the same
    /// whatever the id. The default ignores it; a device that wraps another forwards it.
    fn label_stream(&mut self, stream: Self::Stream, id: StreamId) {
        let _ = (stream, id);
    }

    /// Allocates `bytes` (at least 1) of device memory, aligned to `alignment_bytes`. Its
    /// contents are unspecified until written.
    fn allocate(&mut self, bytes: u64) -> Result<Self::Buffer, DeviceError>;

    /// Returns an allocation. Every operation using it has completed: the runtime frees a
    /// buffer only once the events of every stream that used it have completed
    /// (`Server::release` and `Server::reclaim`, `server/mod.rs`); see the module
    /// documentation for what a device does otherwise. A buffer of another device is left
    /// alone.
    fn free(&mut self, buffer: Self::Buffer);

    /// Enqueues a host-to-device copy of `data` to `dst` at `offset`.
    fn write(
        &mut self,
        stream: Self::Stream,
        dst: &Self::Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError>;

    /// Enqueues a host-to-device copy of `data`, which the device now owns. The default copies
    /// through [`write`](Self::write) and frees the bytes (large ones off this thread). A
    /// device whose copy engine reads pinned memory in place overrides it to copy straight from
    /// the bytes it pinned ([`alloc_pinned_host`](Self::alloc_pinned_host)), keeping them
    /// alive until that copy has completed.
    fn write_bytes(
        &mut self,
        stream: Self::Stream,
        dst: &Self::Buffer,
        offset: u64,
        data: Bytes,
    ) -> Result<(), DeviceError> {
        let result = self.write(stream, dst, offset, &data);
        crate::bytes::free_in_background(data);
        result
    }

    /// Allocates `bytes` of page-locked host memory the device transfers from at full speed,
    /// as pinned [`Bytes`] (contents unspecified). `Ok(None)` where the device has no such
    /// memory (the default); staging is then a no-op.
    fn alloc_pinned_host(&mut self, bytes: usize) -> Result<Option<Bytes>, DeviceError> {
        let _ = bytes;
        Ok(None)
    }

    /// Enqueues a device-to-host copy of `len` bytes of `src` from `offset`.
    fn read(
        &mut self,
        stream: Self::Stream,
        src: &Self::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<Self::PendingRead, DeviceError>;

    /// Blocks until a read's bytes are on the host, and returns them where they landed: a
    /// device with page-locked memory lends the block its copy engine wrote (a
    /// [`HostPool`](crate::HostPool) block, back in the pool when the `Bytes` drops), so no
    /// copy follows the transfer; others return heap bytes.
    fn wait_read(&mut self, read: Self::PendingRead) -> Result<Bytes, DeviceError>;

    /// What the device's pool of host blocks (reads, staged writes) holds, for
    /// [`MemoryReport`](crate::MemoryReport); `None` where the device has none (the default).
    fn host_pool_stats(&self) -> Option<HostPoolStats> {
        None
    }

    /// Enqueues a device-to-device copy.
    fn copy(
        &mut self,
        stream: Self::Stream,
        src: BufferSlice<'_, Self::Buffer>,
        dst: &Self::Buffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError>;

    /// Compiles a validated kernel. A compiler failure returns [`DeviceError::Compile`] with the
    /// compiler's log.
    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<Self::Kernel, DeviceError>;

    /// Enqueues a kernel launch. `bindings` match the kernel's declared bindings in order,
    /// followed in checked mode by the stream's fault record; `params` match its parameters.
    fn launch(
        &mut self,
        stream: Self::Stream,
        kernel: &Self::Kernel,
        count: LaunchCount<'_, Self::Buffer>,
        bindings: &[BufferSlice<'_, Self::Buffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError>;

    /// Records an event after all work enqueued on `stream` so far.
    fn record_event(&mut self, stream: Self::Stream) -> Result<Self::Event, DeviceError>;

    /// Makes later work on `stream` wait until `event` has completed.
    fn wait_event(&mut self, stream: Self::Stream, event: &Self::Event) -> Result<(), DeviceError>;

    /// Whether the work before `event` has completed. Never blocks.
    fn event_complete(&mut self, event: &Self::Event) -> bool;

    /// Submits batched work of `stream` to the hardware without waiting for it.
    fn flush(&mut self, stream: Self::Stream) -> Result<(), DeviceError>;

    /// Blocks until all work enqueued on `stream` has completed.
    fn synchronize(&mut self, stream: Self::Stream) -> Result<(), DeviceError>;

    /// Drains the asynchronous failures observed so far on `stream`, oldest first.
    fn take_errors(&mut self, stream: Self::Stream) -> Vec<DeviceError>;

    /// Records a timestamp after all work enqueued on `stream` so far.
    fn record_timestamp(&mut self, stream: Self::Stream) -> Result<Self::Timestamp, DeviceError>;

    /// Nanoseconds between two completed timestamps.
    fn elapsed_ns(
        &mut self,
        start: &Self::Timestamp,
        end: &Self::Timestamp,
    ) -> Result<u64, DeviceError>;

    /// Starts recording launches of `stream` into a graph.
    fn begin_capture(&mut self, stream: Self::Stream) -> Result<(), DeviceError>;

    /// Ends recording and returns the graph.
    fn end_capture(&mut self, stream: Self::Stream) -> Result<Self::Graph, DeviceError>;

    /// Enqueues one execution of `graph` on `stream`.
    fn replay(&mut self, stream: Self::Stream, graph: &Self::Graph) -> Result<(), DeviceError>;

    /// Destroys a graph. Replays still in flight complete first: a device keeps what they use
    /// until then.
    fn destroy_graph(&mut self, graph: Self::Graph);

    // ---- several devices and collectives (defaults: one device, no collectives) ----------

    /// This device's index among the devices of its backend in this process.
    fn ordinal(&self) -> u32 {
        0
    }

    /// How many devices of this backend this process can open, this one included.
    fn device_count(&self) -> u32 {
        1
    }

    /// Which devices of this backend this one can meet in a communicator: those with the same
    /// value. Devices of different groups never share a collective, so a copy between them
    /// (`ComputeClient::to_client`) goes through the host. By default every device of the
    /// backend in this process is one group (as CUDA's GPUs are); the simulator's clusters
    /// are a group each.
    fn peer_group(&self) -> u64 {
        0
    }

    /// The runtime gave the device up for `reason` (its books broke an invariant, or the device
    /// itself reported `Lost`): it calls nothing more but `free` and the teardown. A device
    /// with collectives must not leave a peer waiting for it: the simulator leaves its hub, as
    /// a lost device does, so a peer's collective fails with `PeerTimeout` instead of hanging.
    /// By default nothing (CUDA's peers are bounded by their collective timeout).
    fn abandon(&mut self, reason: &str) {
        let _ = reason;
    }

    /// Whether the collective methods below are implemented.
    fn supports_collectives(&self) -> bool {
        false
    }

    /// Creates communicator `id` over the devices whose ordinals `peers` lists, in rank order
    /// (this device among them).
    fn create_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        let _ = (id, peers);
        Err(unsupported("create_communicator"))
    }

    /// Enqueues an all-reduce of `src` over communicator `comm` into `dst` (same length, a
    /// whole number of `elem`s; `src` and `dst` are the same range or do not overlap).
    fn all_reduce(
        &mut self,
        stream: Self::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        dst: BufferSlice<'_, Self::Buffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        let _ = (stream, comm, src, dst, elem, op);
        Err(unsupported("all_reduce"))
    }

    /// Enqueues a send of `src`'s bytes to rank `peer` of `comm`, matched by that peer's
    /// `recv` of the same length.
    fn send(
        &mut self,
        stream: Self::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let _ = (stream, comm, src, peer);
        Err(unsupported("send"))
    }

    /// Enqueues a receive into `dst` of the bytes rank `peer` of `comm` sends.
    fn recv(
        &mut self,
        stream: Self::Stream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let _ = (stream, comm, dst, peer);
        Err(unsupported("recv"))
    }
}

fn unsupported(operation: &str) -> DeviceError {
    DeviceError::Unsupported {
        operation: operation.to_owned(),
    }
}
