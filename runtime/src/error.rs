//! Typed errors. [`DeviceError`] is what a [`Device`](crate::Device) reports; [`ServerError`] is
//! what a user of [`ComputeClient`](crate::ComputeClient) sees; [`IoError`] is bad input refused
//! at the call, before anything is enqueued.

use thiserror::Error;

use crate::collective::CollectiveError;
use crate::device::DeviceId;
use crate::kernel::KernelError;
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

/// What a client call or a later `flush`/`sync` returns when something went wrong.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ServerError {
    /// `binding` is the fault record's word: a binding's number, or a shared array's (see
    /// [`FaultRecord`](crate::kernel::FaultRecord)).
    #[error(
        "kernel `{kernel}` accessed {} out of range at index {index} (checked mode)",
        crate::kernel::FaultRecord::array_of_word(*binding)
    )]
    KernelFault {
        kernel: String,
        binding: u32,
        index: u32,
    },
    #[error("device lost: {reason}")]
    DeviceLost { reason: String },
    #[error(transparent)]
    OutOfMemory(#[from] OutOfMemoryError),
    #[error("{0}")]
    Device(DeviceError),
    #[error("a task on {stream} panicked: {message}")]
    TaskPanicked { stream: StreamId, message: String },
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("the device's actor is gone: {reason}")]
    ActorGone { reason: String },
    #[error(transparent)]
    Collective(#[from] CollectiveError),
}

/// An allocation the device could not serve, even after the runtime reclaimed what it could.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "out of memory: cannot allocate {requested_bytes} bytes on {stream} ({reason}); the pools hold {bytes_reserved} bytes of pages, {bytes_in_use} of them in use"
)]
pub struct OutOfMemoryError {
    pub requested_bytes: u64,
    pub stream: StreamId,
    /// Why the device or the pool refused, e.g. the device's own out-of-memory message.
    pub reason: String,
    pub bytes_reserved: u64,
    pub bytes_in_use: u64,
}

impl From<DeviceError> for ServerError {
    fn from(err: DeviceError) -> Self {
        match err {
            DeviceError::Lost { reason } => ServerError::DeviceLost { reason },
            DeviceError::Collective(err) => ServerError::Collective(err),
            other => ServerError::Device(other),
        }
    }
}

impl From<KernelError> for ServerError {
    fn from(err: KernelError) -> Self {
        ServerError::Io(IoError::InvalidKernel(err))
    }
}
