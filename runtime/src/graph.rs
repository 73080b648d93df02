//! `Graph`: a captured launch sequence that replays against the buffers it was captured with.

use crate::actor::ActorHandle;
use crate::device::Device;
use crate::ids::GraphId;
use crate::record::{DeviceRecorder, Op};
use crate::server::Server;
use crate::stream::StreamId;
use crate::sync::Arc;

/// Releases the server's graph when the last clone of a [`Graph`] drops.
struct GraphOwner<D: Device> {
    id: GraphId,
    stream: StreamId,
    actor: ActorHandle<Server<D>>,
    /// Its recorder and the number of the `stop_capture` that made it, if its client records.
    recorded: Option<(DeviceRecorder, u64)>,
}

impl<D: Device> GraphOwner<D> {
    /// Records `op` of this graph, if its client records.
    fn record(&self, op: impl FnOnce(u64) -> Op) {
        if let Some((recorder, graph)) = self.recorded {
            recorder.call(self.stream, op(graph), None);
        }
    }
}

impl<D: Device> Drop for GraphOwner<D> {
    fn drop(&mut self) {
        self.record(|graph| Op::GraphRelease { graph });
        let id = self.id;
        // The server destroys the graph only after every replay already enqueued has
        // completed, and only then lets the graph's buffers go.
        self.actor
            .submit(self.stream, move |server| server.destroy_graph(id));
    }
}

/// A captured graph, from [`ComputeClient::stop_capture`](crate::ComputeClient::stop_capture).
/// Cheap to clone.
///
/// **Liveness.** The graph keeps every buffer its launches captured alive, whether or not the
/// user still holds their handles, and dropping the graph never disturbs a replay already
/// enqueued: the buffers are released after the last replay completes. So `replay` is safe.
///
/// **Ordering.** Replays run on the capture stream, in order with that stream's other work, and
/// are ordered against other streams' use of the captured buffers like any launch. Refresh
/// inputs with `write` and read outputs between replays, from any stream.
pub struct Graph<D: Device> {
    owner: Arc<GraphOwner<D>>,
}

impl<D: Device> Clone for Graph<D> {
    fn clone(&self) -> Self {
        Self {
            owner: self.owner.clone(),
        }
    }
}

impl<D: Device> std::fmt::Debug for Graph<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("id", &self.owner.id)
            .field("stream", &self.owner.stream)
            .finish()
    }
}

impl<D: Device> Graph<D> {
    pub(crate) fn new(
        id: GraphId,
        stream: StreamId,
        actor: ActorHandle<Server<D>>,
        recorded: Option<(DeviceRecorder, u64)>,
    ) -> Self {
        let owner = GraphOwner {
            id,
            stream,
            actor,
            recorded,
        };
        Self {
            owner: Arc::new(owner),
        }
    }

    /// Enqueues one replay of the captured launches on the capture stream. Non-blocking; a
    /// failure surfaces at that stream's next `flush`/`sync`/read.
    pub fn replay(&self) {
        let _span = tracing::debug_span!("replay", stream = %self.owner.stream).entered();
        self.owner.record(|graph| Op::GraphReplay { graph });
        let id = self.owner.id;
        self.owner
            .actor
            .submit(self.owner.stream, move |server| server.replay(id));
    }

    /// The stream the graph was captured on and replays on.
    pub fn stream(&self) -> StreamId {
        self.owner.stream
    }
}
