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
use super::graphs::{GraphState, PendingGraphDestroy};
use super::streams::{AfterStreams, CaptureState};
use crate::device::Device;
use crate::error::{CaptureError, ServerError};
use crate::ids::{BufferId, GraphId};
use crate::properties::GraphSupport;
use crate::stream::StreamId;

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

    /// Prepares `stream` for a capture: its allocations become persistent for the warm-up run.
    pub fn graph_prepare(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.check_alive()?;
        let state = self.stream(stream)?;
        match state.capture {
            CaptureState::Capturing { .. } => Err(CaptureError::AlreadyCapturing { stream }.into()),
            CaptureState::Prepared => Ok(()),
            CaptureState::Idle => {
                state.capture = CaptureState::Prepared;
                self.memory().capture_window(stream, true);
                Ok(())
            }
        }
    }

    /// Starts recording `stream`'s launches into a graph.
    pub fn start_capture(&mut self, stream: StreamId) -> Result<(), ServerError> {
        self.check_alive()?;
        match self.stream(stream)?.capture {
            CaptureState::Idle => return Err(CaptureError::NotPrepared { stream }.into()),
            CaptureState::Capturing { .. } => {
                return Err(CaptureError::AlreadyCapturing { stream }.into());
            }
            CaptureState::Prepared => {}
        }
        // The fault record is written when created: that cannot happen inside the window.
        if self.options.kernel_checks.is_checked() && self.ensure_fault_record(stream).is_none() {
            return self.surface_errors(stream, None);
        }
        let raw = self.streams[&stream].raw;
        // Recorded while it still can be: other streams order after this stream with it.
        let start = self.device.record_event(raw);
        let start = self.noted_on(stream, start)?;
        let begun = self.device.begin_capture(raw);
        self.noted_on(stream, begun)?;
        let state = self.streams.get_mut(&stream).expect("stream exists");
        state.capture_start = Some(start);
        state.capture = CaptureState::Capturing {
            buffers: BTreeMap::new(),
            refused_write: false,
            allocated: false,
            checked: false,
        };
        Ok(())
    }

    /// Ends the capture of `stream` and keeps the graph; the stream is idle again either way.
    pub fn stop_capture(&mut self, stream: StreamId) -> Result<GraphId, ServerError> {
        self.check_alive()?;
        let keep_state = self.options.refused_stop_capture_keeps_state;
        let state = self.stream(stream)?;
        // A refusal changes nothing: a prepared stream stays prepared, its window open.
        if !matches!(state.capture, CaptureState::Capturing { .. }) {
            if !keep_state {
                state.capture = CaptureState::Idle;
            }
            return Err(CaptureError::NotCapturing { stream }.into());
        }
        let CaptureState::Capturing {
            buffers,
            refused_write,
            allocated,
            checked,
        } = std::mem::take(&mut state.capture)
        else {
            unreachable!("the stream was capturing a moment ago");
        };
        let raw_stream = state.raw;
        state.capture_start = None;
        self.memory().capture_window(stream, false);
        let ended = self.device.end_capture(raw_stream);
        self.record_events_awaiting_capture(stream);
        let buffers: Vec<(BufferId, bool)> = buffers.into_iter().collect();
        let raw = match self.noted(ended) {
            Ok(raw) => raw,
            Err(err) => {
                self.unref_graph_buffers(buffers.into_iter().map(|(b, _)| b));
                return Err(ServerError::device(stream, err));
            }
        };
        let hardware = self.device.properties().features.graphs == GraphSupport::Hardware;
        let refusal = if refused_write {
            Some(CaptureError::WriteInCapture { stream })
        } else if allocated && hardware {
            Some(CaptureError::AllocationInCapture { stream })
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.device.destroy_graph(raw);
            self.unref_graph_buffers(buffers.into_iter().map(|(b, _)| b));
            return Err(refusal.into());
        }
        // The capture's references to its buffers become the graph's.
        let id = GraphId(self.next_graph);
        self.next_graph += 1;
        self.graphs.insert(
            id,
            GraphState {
                raw,
                stream,
                buffers,
                checked,
            },
        );
        Ok(id)
    }

    /// Enqueues one replay of `graph` on its capture stream, ordered against other streams'
    /// use of its buffers like any launch.
    pub fn replay(&mut self, graph: GraphId) {
        let Some(stream) = self.graphs.get(&graph).map(|g| g.stream) else {
            return;
        };
        if self.lost.is_some() {
            return;
        }
        if let Err(err) = self.refuse_in_capture(stream, "replay") {
            self.push_error(stream, err);
            return;
        }
        let accessed = self.graphs[&graph].buffers.clone();
        let replayed = self.enqueue_or_queue_error(stream, |server| {
            for &(buffer, write) in &accessed {
                server.order_before_access(stream, buffer, write)?;
            }
            let raw = server.streams[&stream].raw;
            server.device.replay(raw, &server.graphs[&graph].raw)
        });
        if replayed.is_some() && self.graphs[&graph].checked {
            self.streams
                .get_mut(&stream)
                .expect("stream exists")
                .fault_record_dirty = true;
        }
        self.after_access(stream, &accessed);
    }

    /// The last handle to `graph` is gone: destroy it once its replays have completed, then let
    /// its buffers go.
    pub fn destroy_graph(&mut self, graph: GraphId) {
        let Some(state) = self.graphs.remove(&graph) else {
            return;
        };
        // On a lost device recording fails, and `reclaim` destroys the graph at once.
        let after = self.events_after(vec![state.stream]);
        self.pending_graph_destroys.push(PendingGraphDestroy {
            raw: state.raw,
            after,
            buffers: state.buffers.into_iter().map(|(b, _)| b).collect(),
        });
        self.reclaim();
    }

    // ---- synchronisation -----------------------------------------------------------------
}
