//! Device allocations the server owns, who touched them last, and frees waiting for the work
//! that used them to complete.

use crate::device::Device;
use crate::stream::StreamId;

/// Server-side identity of a device allocation. Never reused within one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(pub u64);

/// A stream's access to a buffer: the stream and its operation count right after the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub stream: StreamId,
    pub seq: u64,
}

pub(crate) struct BufferState<D: Device> {
    pub raw: D::Buffer,
    pub size_bytes: u64,
    /// The last write, on any stream.
    pub last_write: Option<Access>,
    /// Reads since the last write, at most one (the latest) per stream.
    pub reads: Vec<Access>,
}

impl<D: Device> BufferState<D> {
    pub fn new(raw: D::Buffer, size_bytes: u64) -> Self {
        Self {
            raw,
            size_bytes,
            last_write: None,
            reads: Vec::new(),
        }
    }

    /// Accesses that an access of the given kind must be ordered after: the last write for a
    /// read (read-after-write); the last write and every read since for a write
    /// (write-after-write, write-after-read).
    pub fn conflicts(&self, write: bool) -> Vec<Access> {
        let mut deps: Vec<Access> = self.last_write.into_iter().collect();
        if write {
            deps.extend(self.reads.iter().copied());
        }
        deps
    }

    pub fn record(&mut self, access: Access, write: bool) {
        if write {
            self.last_write = Some(access);
            self.reads.clear();
        } else if let Some(read) = self.reads.iter_mut().find(|r| r.stream == access.stream) {
            *read = access;
        } else {
            self.reads.push(access);
        }
    }

    /// Streams whose work may still use the buffer.
    pub fn users(&self) -> Vec<StreamId> {
        let mut users: Vec<StreamId> = self.last_write.iter().map(|a| a.stream).collect();
        for read in &self.reads {
            if !users.contains(&read.stream) {
                users.push(read.stream);
            }
        }
        users
    }
}

/// A released buffer whose memory returns to the device once `events` have completed.
pub(crate) struct PendingFree<D: Device> {
    pub raw: D::Buffer,
    pub size_bytes: u64,
    pub events: Vec<D::Event>,
}
