//! The driver's coverage hooks: the cell of each call, from what the driver already knows (its
//! model, its captures, the arguments' sizes). Nothing here calls the client.

use lockstep::{ComputeClient, Device, StreamId};

use super::{ModelLaunch, Run, State};
use crate::coverage::{self, Arg, Held, Method, Number, Relation, StreamState};

/// Most buffers one call names (a group of up to three tensors).
const MAX_BUFS: usize = 3;

impl<D: Device> State<D> {
    /// Stream `s`'s state as the driver knows it; see [`StreamState`] for the precedence.
    pub(super) fn stream_state(&self, s: StreamId) -> StreamState {
        if self.model.lost {
            StreamState::Lost
        } else if self.captures.records(s) {
            StreamState::Capturing
        } else if self.captures.prepared.contains(&s) {
            StreamState::Prepared
        } else if self.model.expected_fault(s).is_some() {
            StreamState::Failed
        } else {
            StreamState::Idle
        }
    }

    fn held(&self, buf: u64) -> Held {
        let names = |launches: &[ModelLaunch]| {
            launches
                .iter()
                .any(|&(_, dst, src, _)| dst == buf || src == buf)
        };
        Held {
            by_graph: self.graphs.iter().any(|g| names(&g.launches)),
            by_capture: self
                .captures
                .open
                .as_ref()
                .is_some_and(|c| names(&c.launches)),
        }
    }

    /// Records a call of `method` on `s` with arguments of class `arg` naming model buffers
    /// `bufs` (at most [`MAX_BUFS`]).
    pub(super) fn hit(&mut self, method: Method, s: StreamId, arg: Arg, bufs: &[u64]) {
        debug_assert!(
            bufs.len() <= MAX_BUFS,
            "a call names at most {MAX_BUFS} buffers"
        );
        let mut held = [(0, Held::default()); MAX_BUFS];
        for (h, &b) in held.iter_mut().zip(bufs) {
            *h = (b, self.held(b));
        }
        let state = self.stream_state(s);
        self.reach
            .call(method, (state, s), arg, &held[..bufs.len().min(MAX_BUFS)]);
    }

    /// Makes the allocating call `allocate` (of `method`, with arguments of class `arg`) on
    /// `client`'s stream `s` and records its cell: the stream's state before the call, and
    /// whether the calling thread or the actor served it (the device's count of allocations
    /// served at the call, before and after; no device call).
    pub(super) fn allocation<T>(
        &mut self,
        client: &ComputeClient<D>,
        (method, s, arg): (Method, StreamId, Arg),
        allocate: impl FnOnce() -> T,
    ) -> T {
        let state = self.stream_state(s);
        let before = client.allocation_paths().at_call;
        let result = allocate();
        let path = match client.allocation_paths().at_call > before {
            true => Relation::AtCall,
            false => Relation::ByActor,
        };
        self.reach.allocated(method, state, arg, path);
        result
    }

    /// Records the class of `value`, passed as `number`.
    pub(super) fn number(&mut self, number: Number, value: u64) {
        self.reach.hits.number(number, value);
    }

    /// Records the driver dropping its handle of `buf`; the release rides on the stream that
    /// allocated it.
    pub(super) fn hit_drop(&mut self, buf: u64) {
        let state = self
            .reach
            .owner(buf)
            .map_or(StreamState::Idle, |owner| self.stream_state(owner));
        self.reach.dropped(state, buf, self.held(buf));
    }
}

impl<D: Device> Run<'_, D> {
    /// The argument class of an allocation or transfer of `elems` `u32`s.
    pub(super) fn size_class(&self, elems: usize) -> Arg {
        coverage::size_class(elems as u64 * 4, &self.world.size_edges_bytes)
    }
}
