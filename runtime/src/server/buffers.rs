//! Slices the server hands out as buffers, who touched them last, and slices waiting for the
//! work that used them to complete before they return to their pool.

use super::streams::AfterStreams;
use crate::device::Device;
use crate::memory::SliceLocation;
use crate::stream::StreamId;

/// A stream's access to a buffer: the stream and its operation count right after the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub stream: StreamId,
    pub seq: u64,
}

pub(crate) struct BufferState {
    pub slice: SliceLocation,
    /// The last write, on any stream. Allocation counts as a write on the allocating stream:
    /// the memory may have held another slice that stream's earlier work still uses.
    pub last_write: Option<Access>,
    /// Reads since the last write, at most one (the latest) per stream.
    pub reads: Vec<Access>,
    /// Live graphs that captured this buffer. While above zero the buffer outlives its handles.
    pub graph_refs: u32,
    /// Every handle is gone; the buffer is released when `graph_refs` reaches zero.
    pub released: bool,
}

impl BufferState {
    pub fn new(slice: SliceLocation, allocated: Access) -> Self {
        Self {
            slice,
            last_write: Some(allocated),
            reads: Vec::new(),
            graph_refs: 0,
            released: false,
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

/// A released slice that returns to its pool once the work of every stream that used it has
/// completed.
pub(crate) struct PendingFree<D: Device> {
    pub slice: SliceLocation,
    pub after: AfterStreams<D>,
}
