//! Graph capture: the per-stream capture state machine and the graphs the server owns.
//!
//! Idle → `graph_prepare` → Prepared → `start_capture` → Capturing → `stop_capture` → Idle.
//! A call out of that order is a typed error that changes nothing. While capturing, launches
//! are recorded by the device instead of executed; the server notes the buffers they touch
//! (which the capture keeps alive from then on), and orders them against other streams at each
//! replay, when the work really runs.
//!
//! **Invariant:** the runtime never records an event into a capturing stream. Other streams
//! order after it with the event recorded when its capture started; frees and graph
//! destructions that follow it record their event when its capture ends.

use std::collections::BTreeMap;

use super::Server;
use super::buffers::BufferId;
use super::streams::AfterStreams;
use crate::device::Device;
use crate::stream::StreamId;

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

impl<D: Device> Server<D> {
    /// Events after the work `streams` enqueued so far (see [`AfterStreams`]). A failure to
    /// record is queued on its stream.
    pub(super) fn events_after(&mut self, streams: Vec<StreamId>) -> AfterStreams<D> {
        let (mut events, mut awaiting_capture, mut unrecorded) =
            (Vec::new(), Vec::new(), Vec::new());
        for &stream in &streams {
            let state = &self.streams[&stream];
            if state.capturing() && self.options.capture_aware_events {
                awaiting_capture.push(stream);
                continue;
            }
            match self.device.record_event(state.raw) {
                Ok(event) => events.push(event),
                Err(err) => {
                    unrecorded.push(stream);
                    self.push_device_error(stream, err);
                }
            }
        }
        AfterStreams {
            streams,
            events,
            awaiting_capture,
            unrecorded,
        }
    }

    /// `stream`'s capture ended: records the events that pending frees and graph destructions
    /// deferred until then.
    pub(super) fn record_events_awaiting_capture(&mut self, stream: StreamId) {
        let raw = self.streams[&stream].raw;
        let waiting = self
            .pending_frees
            .iter_mut()
            .map(|free| &mut free.after)
            .chain(self.pending_graph_destroys.iter_mut().map(|g| &mut g.after))
            .filter(|after| after.awaiting_capture.contains(&stream));
        let mut failures = Vec::new();
        for after in waiting {
            after.awaiting_capture.retain(|&s| s != stream);
            match self.device.record_event(raw) {
                Ok(event) => after.events.push(event),
                Err(err) => {
                    after.unrecorded.push(stream);
                    failures.push(err);
                }
            }
        }
        for err in failures {
            self.push_device_error(stream, err);
        }
    }

    /// A graph (or a capture that made none) lets go of `buffers`; each is released once no
    /// graph keeps it and its handles are gone.
    pub(super) fn unref_graph_buffers(&mut self, buffers: impl IntoIterator<Item = BufferId>) {
        for buffer in buffers {
            let state = self
                .buffers
                .get_mut(&buffer)
                .expect("graphs and captures keep their buffers");
            state.graph_refs -= 1;
            if state.graph_refs == 0 && state.released {
                self.release(buffer);
            }
        }
    }
}
