//! Typed errors. [`DeviceError`] is what a [`Device`](crate::Device) reports; [`ServerError`] is
//! what a user of [`ComputeClient`](crate::ComputeClient) sees; [`IoError`] is bad input refused
//! at the call, before anything is enqueued.

use thiserror::Error;

use crate::collective::CollectiveError;
use crate::device::DeviceId;
use crate::kernel::{ElemType, KernelError};
use crate::stream::StreamId;

/// A failure reported by a device: what the runtime cannot anticipate.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DeviceError {
    #[error("out of device memory: requested {requested_bytes} bytes, {available_bytes} available")]
    OutOfMemory {
        requested_bytes: u64,
        available_bytes: u64,
    },
    #[error(
        "allocation of {requested_bytes} bytes exceeds the device's largest allocation ({max_bytes} bytes)"
    )]
    AllocationTooLarge {
        requested_bytes: u64,
        max_bytes: u64,
    },
    #[error("device lost: {reason}")]
    Lost { reason: String },
    /// No such device here: no adapter, no driver library, no GPU.
    #[error("device unavailable: {reason}")]
    Unavailable { reason: String },
    #[error("transfer failed: {reason}")]
    TransferFailed { reason: String },
    #[error("device fault while executing `{operation}`: {reason}")]
    ExecutionFault { operation: String, reason: String },
    #[error("kernel `{kernel}` failed to compile:\n{log}")]
    Compile { kernel: String, log: String },
    #[error("`{operation}` is not supported by this device")]
    Unsupported { operation: String },
    #[error("graph capture failed: {reason}")]
    Capture { reason: String },
    #[error(transparent)]
    Collective(CollectiveError),
    /// A call that breaks the [`Device`](crate::Device) contract: the runtime validates first
    /// and never makes one, so this is a bug of code that drives a device directly. Every
    /// device makes the same checks (`lockstep::device::contract`) and refuses the call before
    /// it touches anything; the device stays usable.
    #[error("{operation} breaks the device contract: {violation}")]
    Contract {
        operation: String,
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
        offset: u64,
        len: u64,
        buffer_bytes: u64,
    },
    /// A binding or indirect count that does not start on a word.
    #[error("offset {offset} is not a multiple of {alignment_bytes} bytes")]
    Misaligned { offset: u64, alignment_bytes: u64 },
    /// Fewer bytes than the operation reads (a fault record, indirect workgroup counts).
    #[error("{len} bytes given, at least {min_bytes} needed")]
    TooShort { len: u64, min_bytes: u64 },
    #[error("the buffer was allocated by another device")]
    ForeignBuffer,
    #[error("the graph was captured on another device")]
    ForeignGraph,
    /// A kernel or timestamp of a device that cannot use it here (CUDA: another GPU's context).
    #[error("the {handle} belongs to a device on another GPU")]
    ForeignHandle { handle: &'static str },
    /// A graph replayed after a buffer it uses was freed.
    #[error("a buffer the graph uses was freed after its capture")]
    FreedBuffer,
    #[error("stream {index} was not created by this device")]
    UnknownStream { index: u32 },
    /// `label_stream` called twice for one stream.
    #[error("stream {index} already has its runtime's id")]
    StreamLabelledTwice { index: u32 },
    #[error("allocations hold at least one byte")]
    EmptyAllocation,
    #[error("{given} bindings given, the kernel takes {expected}")]
    BindingCount { given: usize, expected: usize },
    #[error("parameters {given:?} given, the kernel declares {declared:?}")]
    ParamTypes {
        given: Vec<ElemType>,
        declared: Vec<ElemType>,
    },
    /// An all-reduce whose source and destination differ in length, hold a partial element,
    /// or overlap without being the same range.
    #[error(
        "source {src_offset}+{src_bytes} and destination {dst_offset}+{dst_bytes} must be equal whole {elem_bytes}-byte elements, the same range or disjoint"
    )]
    ReduceRanges {
        src_offset: u64,
        src_bytes: u64,
        dst_offset: u64,
        dst_bytes: u64,
        elem_bytes: u64,
    },
    #[error("communicator {id} was not created on this device")]
    UnknownCommunicator { id: u64 },
    /// A communicator whose device list leaves this device out or names a device that does
    /// not exist.
    #[error("device {ordinal} must be one of the peers {peers:?}, each below {device_count}")]
    Peers {
        ordinal: u32,
        peers: Vec<u32>,
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
    #[error("range {offset}..{end} is outside the handle's {size} bytes", end = offset.saturating_add(*len))]
    OutOfRange { offset: u64, len: u64, size: u64 },
    #[error("{what}: expected {expected} bytes, got {actual}")]
    SizeMismatch {
        what: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("invalid shape or strides: {reason}")]
    InvalidLayout { reason: String },
    #[error("handle belongs to device {actual}, but this client drives device {expected}")]
    WrongDevice {
        expected: DeviceId,
        actual: DeviceId,
    },
    #[error("invalid launch of kernel `{kernel}`: {reason}")]
    InvalidLaunch { kernel: String, reason: String },
    #[error(transparent)]
    InvalidKernel(#[from] KernelError),
}

/// A graph-capture call out of order, or an operation the capture window cannot hold.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CaptureError {
    #[error(
        "`{operation}` is refused while {stream} captures a graph: call it before start_capture or after stop_capture"
    )]
    Refused {
        operation: &'static str,
        stream: StreamId,
    },
    #[error(
        "start_capture on {stream} without graph_prepare: call graph_prepare, run the warm-up, then start_capture"
    )]
    NotPrepared { stream: StreamId },
    #[error("{stream} is already capturing a graph: call stop_capture first")]
    AlreadyCapturing { stream: StreamId },
    #[error("stop_capture on {stream}, which is not capturing")]
    NotCapturing { stream: StreamId },
    #[error(
        "a write on {stream} inside the capture window cannot be recorded into a graph: write inputs between replays"
    )]
    WriteInCapture { stream: StreamId },
    #[error(
        "an allocation on {stream} inside the capture window cannot be owned by a hardware graph: allocate during the warm-up run"
    )]
    AllocationInCapture { stream: StreamId },
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
    /// `binding` is the fault record's word: a binding's number, or a shared array's (see
    /// [`FaultRecord`](crate::kernel::FaultRecord)).
    #[error(
        "kernel `{kernel}` accessed {} out of range at index {index} on {stream} (checked mode)",
        crate::kernel::FaultRecord::array_of_word(*binding)
    )]
    KernelFault {
        kernel: String,
        binding: u32,
        index: u32,
        stream: StreamId,
    },
    #[error("device lost: {reason}")]
    DeviceLost { reason: String },
    #[error(transparent)]
    OutOfMemory(#[from] OutOfMemoryError),
    /// A failure the device reported for work of `stream`, or for a call made on it.
    #[error("{error} (on {stream})")]
    Device {
        stream: StreamId,
        error: DeviceError,
    },
    #[error("a task on {stream} panicked: {message}")]
    TaskPanicked { stream: StreamId, message: String },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("the device's actor is gone: {reason}")]
    ActorGone { reason: String },
    /// A collective refused at a call made on `stream`, or failed in its work.
    #[error("{error} (on {stream})")]
    Collective {
        stream: StreamId,
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
    pub requested_bytes: u64,
    pub stream: StreamId,
    /// Why the request was refused, after the runtime reclaimed what it could.
    pub reason: OutOfMemoryReason,
    pub bytes_reserved: u64,
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
        pool: usize,
        max_slice_bytes: u64,
        cap_bytes: u64,
    },
    /// A new page would take the bytes every pool of the device reserves over the budget set
    /// with `ComputeClient::set_memory_budget`.
    #[error(
        "a {page_bytes}-byte page would exceed the device budget of {budget_bytes} bytes, {bytes_reserved} of them reserved"
    )]
    Budget {
        page_bytes: u64,
        budget_bytes: u64,
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
