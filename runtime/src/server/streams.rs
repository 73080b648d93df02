//! Per-stream state: the device stream, the error queue, the fault record, where the stream is
//! in a capture, and what it has already waited for on other streams.

use std::collections::{BTreeMap, VecDeque};

use crate::ids::BufferId;

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
    pub capture: CaptureState,
    /// While capturing: an event recorded just before the capture began. Every access of this
    /// stream that the access history names precedes it (captured launches are not in the
    /// history), so other streams wait on it instead of recording into the capture.
    pub capture_start: Option<D::Event>,
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
            capture: CaptureState::Idle,
            capture_start: None,
        }
    }

    pub fn capturing(&self) -> bool {
        matches!(self.capture, CaptureState::Capturing { .. })
    }

    /// Whether work enqueued on this stream from now on is already ordered after operation
    /// `seq` of stream `other`.
    pub fn ordered_after(&self, other: StreamId, seq: u64) -> bool {
        self.waited.get(&other).is_some_and(|&waited| waited >= seq)
    }
}

/// Events that complete once the work the listed streams had enqueued at one point has. A
/// stream that was capturing at that point gets its event when its capture ends: nothing may be
/// recorded into a capture, and captured work runs only at replays, which are ordered then.
pub(crate) struct AfterStreams<D: Device> {
    /// Every stream followed, recorded or awaiting its capture's end.
    pub streams: Vec<StreamId>,
    pub events: Vec<D::Event>,
    /// Capturing streams whose event is recorded when their capture ends.
    pub awaiting_capture: Vec<StreamId>,
    /// Streams whose event could not be recorded; the failure was queued on each.
    pub unrecorded: Vec<StreamId>,
}

impl<D: Device> AfterStreams<D> {
    /// Whether the work followed has completed. A stream whose event could not be recorded
    /// (its failure was queued on it) is not waited for.
    pub fn complete(&self, device: &mut D) -> bool {
        self.awaiting_capture.is_empty() && self.events.iter().all(|e| device.event_complete(e))
    }
}

/// Where a stream is in the capture state machine (see `capture.rs`): Idle → `graph_prepare`
/// → Prepared → `start_capture` → Capturing → `stop_capture` → Idle.
#[derive(Debug, Default)]
pub(crate) enum CaptureState {
    #[default]
    Idle,
    /// `graph_prepare` ran: the stream allocates persistently for the warm-up run.
    Prepared,
    Capturing {
        /// Buffers the recorded launches touch, and whether any of them writes each.
        buffers: BTreeMap<BufferId, bool>,
        /// A write was attempted in the window; `stop_capture` fails.
        refused_write: bool,
        /// Memory was allocated in the window (fatal for hardware graphs).
        allocated: bool,
        /// A checked kernel was recorded: replays write the stream's fault record.
        checked: bool,
    },
}
