//! The ids and small values every layer of the runtime speaks: of devices, buffers (and byte
//! ranges of them), graphs and communicators, and a launch's workgroup count as the server
//! takes it. Streams have theirs in [`crate::stream`].
//!
//! **Architecture Invariant:** this module imports nothing of the runtime, so any layer can
//! name a buffer or a graph without reaching into the server or the pools that issue them.

/// Identifies a device in this process: its backend and an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    /// The backend ([`Device::TYPE_ID`](crate::Device::TYPE_ID)): simulator 0, wgpu 1, CUDA 2.
    pub type_id: u16,
    /// The device's ordinal within its backend, from 0.
    pub index: u32,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.type_id, self.index)
    }
}

/// Server-side identity of a live slice. Never reused within one server: the books issue them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(pub u64);

/// A byte range of a server buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferRange {
    pub buffer: BufferId,
    pub offset: u64,
    pub len: u64,
}

impl BufferRange {
    /// Whether the two ranges share a byte (an empty range shares none).
    pub(crate) fn overlaps(&self, other: &BufferRange) -> bool {
        self.buffer == other.buffer
            && self.offset < other.offset.saturating_add(other.len)
            && other.offset < self.offset.saturating_add(self.len)
    }
}

/// Identifies a graph of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphId(pub u64);

/// A communicator a device created at the runtime's request. The runtime picks the id, unique
/// per device; devices key their communicators by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommunicatorId(pub u64);

/// A workgroup count as the server sees it: static, or read from a buffer range `R`.
#[derive(Clone, Debug)]
pub(crate) enum CountArg<R> {
    Static([u32; 3]),
    Dynamic(R),
}
