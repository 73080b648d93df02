//! Per-stream state: the device stream, the error queue, the fault record, and what this stream
//! has already waited for on other streams.

use std::collections::{BTreeMap, VecDeque};

use crate::device::Device;
use crate::error::ServerError;
use crate::stream::StreamId;

pub(crate) struct StreamState<D: Device> {
    pub raw: D::Stream,
    /// Operations enqueued so far; an access to a buffer is stamped with this count.
    pub seq: u64,
    /// For each other stream, the highest of its `seq` that this stream's later work is already
    /// ordered after (through an event wait).
    pub waited: BTreeMap<StreamId, u64>,
    /// Asynchronous failures not yet returned, oldest first. Each is returned exactly once.
    pub errors: VecDeque<ServerError>,
    /// The stream's fault record (see [`FaultRecord`](crate::kernel::FaultRecord)), allocated
    /// on the first checked launch.
    pub fault_record: Option<D::Buffer>,
    /// A checked kernel ran since the fault record was last inspected.
    pub fault_record_dirty: bool,
    pub capture: super::capture::CaptureState,
}

impl<D: Device> StreamState<D> {
    pub fn new(raw: D::Stream) -> Self {
        Self {
            raw,
            seq: 0,
            waited: BTreeMap::new(),
            errors: VecDeque::new(),
            fault_record: None,
            fault_record_dirty: false,
            capture: super::capture::CaptureState::Idle,
        }
    }

    /// Whether work enqueued on this stream from now on is already ordered after operation
    /// `seq` of stream `other`.
    pub fn ordered_after(&self, other: StreamId, seq: u64) -> bool {
        self.waited.get(&other).is_some_and(|&waited| waited >= seq)
    }
}
