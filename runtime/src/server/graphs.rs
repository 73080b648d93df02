//! The graphs a server owns: captured ones, and dropped ones waiting for their last replay.

use super::streams::AfterStreams;
use crate::device::Device;
use crate::ids::BufferId;
use crate::stream::StreamId;

/// A captured graph. Its buffers stay alive (see `BufferState::graph_refs`) until the graph is
/// destroyed and every replay of it has completed.
pub(crate) struct GraphState<D: Device> {
    pub raw: D::Graph,
    pub stream: StreamId,
    pub buffers: Vec<(BufferId, bool)>,
    pub checked: bool,
}

/// A dropped graph waiting for its last replay (on its capture stream) to complete.
pub(crate) struct PendingGraphDestroy<D: Device> {
    pub raw: D::Graph,
    pub after: AfterStreams<D>,
    pub buffers: Vec<BufferId>,
}
