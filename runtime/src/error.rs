//! Typed errors. [`DeviceError`] is what a [`Device`](crate::Device) reports; [`ServerError`] is
//! what a user of [`ComputeClient`](crate::ComputeClient) sees; [`IoError`] is bad input refused
//! at the call, before anything is enqueued.

use thiserror::Error;

use crate::collective::CollectiveError;
use crate::ids::DeviceId;
use crate::kernel::{ElemType, KernelError};
use crate::stream::StreamId;

/// A failure reported by a device: what the runtime cannot anticipate.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DeviceError {
    /// The device has no memory left for an allocation. The runtime frees its cached pages and
    /// retries once before reporting it (as [`OutOfMemoryReason::Device`]).
    #[error("out of device memory: requested {requested_bytes} bytes, {available_bytes} available")]
    OutOfMemory {
        /// Size of the refused allocation, in bytes.
        requested_bytes: u64,
        /// Bytes the device reported free when it refused (0 where it cannot tell, as on wgpu).
        available_bytes: u64,
    },
    /// One allocation larger than the device can make at all, however much memory is free: split
    /// the data over several handles.
    #[error(
        "allocation of {requested_bytes} bytes exceeds the device's largest allocation ({max_bytes} bytes)"
    )]
    AllocationTooLarge {
        /// Size of the refused allocation, in bytes.
        requested_bytes: u64,
        /// The largest allocation the device makes, in bytes
        /// ([`DeviceProperties`](crate::DeviceProperties)).
        max_bytes: u64,
    },
    /// The device can no longer run anything (a driver reset, a sticky CUDA error, a broken runtime
    /// invariant). It is fatal ([`is_fatal`](Self::is_fatal)): every later call fails, and only a
    /// new device recovers.
    #[error("device lost: {reason}")]
    Lost {
        /// What the device or the runtime reported, for a person to read.
        reason: String,
    },
    /// No such device here: no adapter, no driver library, no GPU.
    #[error("device unavailable: {reason}")]
    Unavailable {
        /// Why: the missing library, adapter or GPU, for a person to read.
        reason: String,
    },
    /// A copy between host and device failed (a mapping or staging failure): the data read or
    /// written is lost, the device stays usable.
    #[error("transfer failed: {reason}")]
    TransferFailed {
        /// What the device reported.
        reason: String,
    },
    /// The device faulted while running a launch or a copy (an illegal address, a trap). On CUDA a
    /// sticky fault is reported as [`Lost`](Self::Lost) instead.
    #[error("device fault while executing `{operation}`: {reason}")]
    ExecutionFault {
        /// The operation that faulted (a kernel's name, or the copy's kind).
        operation: String,
        /// What the device reported.
        reason: String,
    },
    /// The device's compiler refused a kernel that passed the runtime's validation: a bug of a
    /// lowering, worth reporting with the log.
    #[error("kernel `{kernel}` failed to compile:\n{log}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// The compiler's log, verbatim.
        log: String,
    },
    /// The device does not implement an operation (collectives or peer copies on a backend
    /// without them, timestamps on an adapter without them), or not in the state asked (CUDA:
    /// the elapsed time of a timestamp not yet completed). [`Features`](crate::Features) says
    /// what a device supports.
    #[error("`{operation}` is not supported by this device")]
    Unsupported {
        /// The operation refused.
        operation: String,
    },
    /// The device could not capture, instantiate or replay a graph.
    #[error("graph capture failed: {reason}")]
    Capture {
        /// What the device reported.
        reason: String,
    },
    /// A collective's failure (a peer timeout, a mismatched peer, a communicator failure).
    #[error(transparent)]
    Collective(CollectiveError),
    /// A call that breaks the [`Device`](crate::Device) contract: the runtime validates first
    /// and never makes one, so this is a bug of code that drives a device directly. Every
    /// device makes the same checks (`lockstep::device::contract`) and refuses the call before
    /// it touches anything; the device stays usable.
    #[error("{operation} breaks the device contract: {violation}")]
    Contract {
        /// The device call that was refused.
        operation: String,
        /// The precondition it broke.
        violation: ContractViolation,
    },
}

/// Which precondition of a [`Device`](crate::Device) call was broken (see
/// [`DeviceError::Contract`]).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ContractViolation {
    /// `len` bytes from `offset` do not fit in the buffer (or their end overflows `u64`).
    #[error("{len} bytes at offset {offset} are outside the buffer's {buffer_bytes} bytes")]
    OutOfBounds {
        /// Byte offset of the range in the buffer.
        offset: u64,
        /// Length of the range, in bytes.
        len: u64,
        /// Size of the buffer, in bytes.
        buffer_bytes: u64,
    },
    /// A binding or indirect count that does not start on a word.
    #[error("offset {offset} is not a multiple of {alignment_bytes} bytes")]
    Misaligned {
        /// The byte offset given.
        offset: u64,
        /// The alignment required, in bytes.
        alignment_bytes: u64,
    },
    /// Fewer bytes than the operation reads (a fault record, indirect workgroup counts).
    #[error("{len} bytes given, at least {min_bytes} needed")]
    TooShort {
        /// Bytes given.
        len: u64,
        /// Bytes the operation reads at least.
        min_bytes: u64,
    },
    /// A buffer another device allocated.
    #[error("the buffer was allocated by another device")]
    ForeignBuffer,
    /// A graph this device did not capture.
    #[error("the graph was captured on another device")]
    ForeignGraph,
    /// A kernel or timestamp of a device that cannot use it here (CUDA: another GPU's context).
    #[error("the {handle} belongs to a device on another GPU")]
    ForeignHandle {
        /// What kind of handle it is (`kernel`, `timestamp`), for the message.
        handle: &'static str,
    },
    /// A graph replayed after a buffer it uses was freed.
    #[error("a buffer the graph uses was freed after its capture")]
    FreedBuffer,
    /// A stream this device did not create.
    #[error("stream {index} was not created by this device")]
    UnknownStream {
        /// The device's index of the stream.
        index: u32,
    },
    /// `label_stream` called twice for one stream.
    #[error("stream {index} already has its runtime's id")]
    StreamLabelledTwice {
        /// The device's index of the stream.
        index: u32,
    },
    /// An allocation of zero bytes: the runtime serves empty handles without one.
    #[error("allocations hold at least one byte")]
    EmptyAllocation,
    /// A launch with a different number of bindings than the kernel declares.
    #[error("{given} bindings given, the kernel takes {expected}")]
    BindingCount {
        /// Bindings passed.
        given: usize,
        /// Bindings the kernel declares.
        expected: usize,
    },
    /// A launch whose scalar parameters differ in number or type from the kernel's declaration.
    #[error("parameters {given:?} given, the kernel declares {declared:?}")]
    ParamTypes {
        /// Parameter types passed, in order.
        given: Vec<ElemType>,
        /// Parameter types the kernel declares, in order.
        declared: Vec<ElemType>,
    },
    /// An all-reduce whose source and destination differ in length, hold a partial element,
    /// or overlap without being the same range.
    #[error(
        "source {src_offset}+{src_bytes} and destination {dst_offset}+{dst_bytes} must be equal whole {elem_bytes}-byte elements, the same range or disjoint"
    )]
    ReduceRanges {
        /// Byte offset of the source range.
        src_offset: u64,
        /// Length of the source range, in bytes.
        src_bytes: u64,
        /// Byte offset of the destination range.
        dst_offset: u64,
        /// Length of the destination range, in bytes.
        dst_bytes: u64,
        /// Size of one element of the reduction, in bytes.
        elem_bytes: u64,
    },
    /// A communicator id this device never created (or already destroyed).
    #[error("communicator {id} was not created on this device")]
    UnknownCommunicator {
        /// The communicator's id.
        id: u64,
    },
    /// A communicator whose device list leaves this device out or names a device that does
    /// not exist.
    #[error("device {ordinal} must be one of the peers {peers:?}, each below {device_count}")]
    Peers {
        /// This device's ordinal.
        ordinal: u32,
        /// The ordinals of the communicator's devices.
        peers: Vec<u32>,
        /// Number of devices present.
        device_count: u32,
    },
}

impl DeviceError {
    /// A fatal error leaves the whole device unusable; every stream then refuses new work.
    pub fn is_fatal(&self) -> bool {
        matches!(self, DeviceError::Lost { .. })
    }
}

/// Bad input to a client call, refused before anything reaches the device. Nothing was written
/// and the stream stays usable.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum IoError {
    /// A byte range that does not fit in a handle: `offset + len` exceeds the handle's size (or
    /// overflows). Shorten the range or use a larger handle.
    #[error("range {offset}..{end} is outside the handle's {size} bytes", end = offset.saturating_add(*len))]
    OutOfRange {
        /// Byte offset of the range, from the start of the handle.
        offset: u64,
        /// Length of the range, in bytes.
        len: u64,
        /// The handle's size, in bytes.
        size: u64,
    },
    /// Data whose length differs from what the call needs (tensor data of a shape, an all-reduce
    /// destination for its source).
    #[error("{what}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        /// What was measured, for the message (`"tensor data"`, `"all_reduce destination"`, ...).
        what: &'static str,
        /// Bytes the call needs.
        expected: u64,
        /// Bytes given.
        actual: u64,
    },
    /// A shape and strides the call cannot use: ranks that differ, a size that overflows, a
    /// zero element size, or (for a write) two elements at one offset.
    #[error("invalid shape or strides: {reason}")]
    InvalidLayout {
        /// What is wrong, for a person to read.
        reason: String,
    },
    /// A handle of another device, passed to this device's client: read or launch it on its own
    /// device's client, or copy the data through the host.
    #[error("handle belongs to device {actual}, but this client drives device {expected}")]
    WrongDevice {
        /// The device this client drives.
        expected: DeviceId,
        /// The device the handle belongs to.
        actual: DeviceId,
    },
    /// Launch arguments that do not fit the kernel or the device: a binding or parameter count,
    /// a parameter's type, a binding of partial elements, a writable binding that aliases
    /// another, more workgroups than the device runs. Fix the call.
    #[error("invalid launch of kernel `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel's name.
        kernel: String,
        /// What does not match, for a person to read.
        reason: String,
    },
    /// A kernel that fails validation (or does not fit the device's shared memory).
    #[error(transparent)]
    InvalidKernel(#[from] KernelError),
    /// The data to write is a lazy read ([`read_lazy`](crate::ComputeClient::read_lazy)) whose
    /// deferred read failed when the write read it: there are no bytes to write. The error is
    /// the read's.
    #[error("the data is a lazy read that failed: {source}")]
    LazyReadFailed {
        /// Why the deferred read failed.
        source: Box<ServerError>,
    },
}

/// A graph-capture call out of order, or an operation the capture window cannot hold.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CaptureError {
    /// A call the capture window cannot record (a read, a sync, a memory operation): make it before
    /// `start_capture` or after `stop_capture`.
    #[error(
        "`{operation}` is refused while {stream} captures a graph: call it before start_capture or after stop_capture"
    )]
    Refused {
        /// The call refused.
        operation: &'static str,
        /// The capturing stream.
        stream: StreamId,
    },
    /// `start_capture` without a `graph_prepare` first on the stream.
    #[error(
        "start_capture on {stream} without graph_prepare: call graph_prepare, run the warm-up, then start_capture"
    )]
    NotPrepared {
        /// The stream that called `start_capture`.
        stream: StreamId,
    },
    /// `start_capture` on a stream that already captures.
    #[error("{stream} is already capturing a graph: call stop_capture first")]
    AlreadyCapturing {
        /// The capturing stream.
        stream: StreamId,
    },
    /// `stop_capture` on a stream that does not capture.
    #[error("stop_capture on {stream}, which is not capturing")]
    NotCapturing {
        /// The stream that called `stop_capture`.
        stream: StreamId,
    },
    /// A host write inside the capture window: a graph replays device work only, so write inputs
    /// between replays instead.
    #[error(
        "a write on {stream} inside the capture window cannot be recorded into a graph: write inputs between replays"
    )]
    WriteInCapture {
        /// The capturing stream.
        stream: StreamId,
    },
    /// A new allocation inside the capture window: allocate every handle the graph uses during the
    /// warm-up run, before `start_capture`.
    #[error(
        "an allocation on {stream} inside the capture window cannot be owned by a hardware graph: allocate during the warm-up run"
    )]
    AllocationInCapture {
        /// The capturing stream.
        stream: StreamId,
    },
}

impl CaptureError {
    /// The stream whose capture refused.
    pub fn stream(&self) -> StreamId {
        match self {
            CaptureError::Refused { stream, .. }
            | CaptureError::NotPrepared { stream }
            | CaptureError::AlreadyCapturing { stream }
            | CaptureError::NotCapturing { stream }
            | CaptureError::WriteInCapture { stream }
            | CaptureError::AllocationInCapture { stream } => *stream,
        }
    }
}

/// What a client call or a later `flush`/`sync` returns when something went wrong.
///
/// Every failure of work names the stream it happened on ([`stream`](Self::stream)): the
/// stream whose next blocking call returns it. `DeviceLost` and `ActorGone` are the whole
/// device's, and `Io` is bad input refused at the call, before anything reached a stream.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ServerError {
    /// A checked-mode launch indexed an array out of range (the access did nothing; the
    /// stream's first one is recorded): fix the kernel's indexing or its grid. `binding` is the
    /// fault record's word: a binding's number, or a shared array's (see
    /// [`FaultRecord`](crate::kernel::FaultRecord)).
    #[error(
        "kernel `{kernel}` accessed {} out of range at index {index} on {stream} (checked mode)",
        crate::kernel::FaultRecord::array_of_word(*binding)
    )]
    KernelFault {
        /// The kernel's name.
        kernel: String,
        /// The fault record's array word (see above).
        binding: u32,
        /// The out-of-range element index the kernel used.
        index: u32,
        /// The stream the launch ran on.
        stream: StreamId,
    },
    /// The device is lost (see [`DeviceError::Lost`]): every later call returns this; create a new
    /// client on a new device to continue.
    #[error("device lost: {reason}")]
    DeviceLost {
        /// What the device or the runtime reported.
        reason: String,
    },
    /// An allocation refused even after the runtime reclaimed what it could.
    #[error(transparent)]
    OutOfMemory(#[from] OutOfMemoryError),
    /// A failure the device reported for work of `stream`, or for a call made on it.
    #[error("{error} (on {stream})")]
    Device {
        /// The stream the work or the call belonged to.
        stream: StreamId,
        /// What the device reported.
        error: DeviceError,
    },
    /// A task of the actor panicked (a bug): the device stays usable unless the panic broke a
    /// runtime invariant, in which case it is lost.
    #[error("a task on {stream} panicked: {message}")]
    TaskPanicked {
        /// The stream the task ran for.
        stream: StreamId,
        /// The panic's message.
        message: String,
    },
    /// Bad input refused at the call (returned by calls that also wait for the device).
    #[error(transparent)]
    Io(#[from] IoError),
    /// The host could not allocate what a read returns: a tensor gathered dense, such as a
    /// broadcast view (stride 0) of far more elements than its handle holds. Nothing else
    /// failed; read the tensor in parts.
    #[error(
        "the host cannot allocate the {bytes} bytes a read on {stream} returns: read the tensor in parts"
    )]
    HostOutOfMemory {
        /// Bytes of the dense tensor.
        bytes: u64,
        /// The stream the read was made on.
        stream: StreamId,
    },
    /// A graph-capture call out of order, or a call the capture window cannot record.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// The device's actor cannot answer: its thread is gone, or (for a lazy read) an earlier
    /// access panicked while loading the bytes.
    #[error("the device's actor is gone: {reason}")]
    ActorGone {
        /// Why, for a person to read.
        reason: String,
    },
    /// A collective refused at a call made on `stream`, or failed in its work.
    #[error("{error} (on {stream})")]
    Collective {
        /// The stream of the call or of the failed work.
        stream: StreamId,
        /// What failed.
        error: CollectiveError,
    },
}

impl ServerError {
    /// The error of a device call made for `stream`: a loss is the whole device's, a
    /// collective's failure stays a collective's.
    pub fn device(stream: StreamId, error: DeviceError) -> Self {
        match error {
            DeviceError::Lost { reason } => ServerError::DeviceLost { reason },
            DeviceError::Collective(error) => ServerError::Collective { stream, error },
            error => ServerError::Device { stream, error },
        }
    }

    /// The stream this failure happened on; `None` for the whole device's failures
    /// (`DeviceLost`, `ActorGone`) and for bad input refused at the call (`Io`).
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            ServerError::KernelFault { stream, .. }
            | ServerError::Device { stream, .. }
            | ServerError::TaskPanicked { stream, .. }
            | ServerError::Collective { stream, .. } => Some(*stream),
            ServerError::OutOfMemory(err) => Some(err.stream),
            ServerError::HostOutOfMemory { stream, .. } => Some(*stream),
            ServerError::Capture(err) => Some(err.stream()),
            ServerError::DeviceLost { .. } | ServerError::Io(_) | ServerError::ActorGone { .. } => {
                None
            }
        }
    }
}

/// An allocation the device could not serve, even after the runtime reclaimed what it could.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "out of memory: cannot allocate {requested_bytes} bytes on {stream} ({reason}); the pools hold {bytes_reserved} bytes of pages, {bytes_in_use} of them in use"
)]
pub struct OutOfMemoryError {
    /// Size of the refused request, in bytes.
    pub requested_bytes: u64,
    /// The stream that asked: its next blocking call (or the allocating call itself) returns this.
    pub stream: StreamId,
    /// Why the request was refused, after the runtime reclaimed what it could.
    pub reason: OutOfMemoryReason,
    /// Bytes of pages every pool of the device holds after the reclaim, in use or free.
    pub bytes_reserved: u64,
    /// Bytes of those pages handed out in live slices.
    pub bytes_in_use: u64,
}

/// Why an allocation was refused: a limit of the runtime's (a pool's cap, the device budget),
/// the device's own refusal, or a size no device serves.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum OutOfMemoryReason {
    /// The request's size rounded up to whole alignment units overflows 64 bits.
    #[error("its size rounded up to whole alignment units overflows 64 bits")]
    SizeOverflow,
    /// The stream's sliced pool `pool` (in routing order), which serves the request, reserves
    /// `cap_bytes` at most and has no room left.
    #[error(
        "sliced pool {pool} (slices up to {max_slice_bytes} bytes) reached its cap of {cap_bytes} bytes"
    )]
    PoolCap {
        /// Index of the pool among the stream's pools, in routing order.
        pool: usize,
        /// The largest slice the pool serves, in bytes.
        max_slice_bytes: u64,
        /// The pool's cap, in bytes.
        cap_bytes: u64,
    },
    /// A new page would take the bytes every pool of the device reserves over the budget set
    /// with `ComputeClient::set_memory_budget`.
    #[error(
        "a {page_bytes}-byte page would exceed the device budget of {budget_bytes} bytes, {bytes_reserved} of them reserved"
    )]
    Budget {
        /// Size of the page the pool needed, in bytes.
        page_bytes: u64,
        /// The budget in force, in bytes.
        budget_bytes: u64,
        /// Bytes of pages every pool of the device held, before the page.
        bytes_reserved: u64,
    },
    /// The device refused the page (its memory is full, or the page exceeds its largest
    /// allocation). Boxed: it keeps [`ServerError`] small.
    #[error(transparent)]
    Device(Box<DeviceError>),
}

impl From<KernelError> for ServerError {
    fn from(err: KernelError) -> Self {
        ServerError::Io(IoError::InvalidKernel(err))
    }
}
