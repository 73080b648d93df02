//! Graph capture: the per-stream capture state machine and the graphs the server owns.
//!
//! Idle → `graph_prepare` → Prepared → `start_capture` → Capturing → `stop_capture` → Idle.
//! A call out of that order is a typed error that changes nothing. While capturing, launches
//! are recorded by the device instead of executed; the server notes the buffers they touch, and
//! orders them against other streams at each replay, when the work really runs.

use std::collections::BTreeMap;

use super::buffers::BufferId;
use crate::device::Device;

/// Identifies a graph of one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphId(pub u64);

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

/// A captured graph. Its buffers stay alive (see `BufferState::graph_refs`) until the graph is
/// destroyed and every replay of it has completed.
pub(crate) struct GraphState<D: Device> {
    pub raw: D::Graph,
    pub stream: crate::stream::StreamId,
    pub buffers: Vec<(BufferId, bool)>,
    pub checked: bool,
}

/// A dropped graph waiting for its last replay to complete.
pub(crate) struct PendingGraphDestroy<D: Device> {
    pub raw: D::Graph,
    /// The capture stream, whose replays `event` follows.
    pub stream: crate::stream::StreamId,
    pub event: Option<D::Event>,
    pub buffers: Vec<BufferId>,
}
