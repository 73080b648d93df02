//! The driver's calls that have no theme of their own: creating a buffer, reading, profiling,
//! the blocking calls, a graph's replay and the memory calls, each judged against the model.

use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, Device, Handle, InstallMemoryPoolsError,
    MemoryPoolsConfig, PoolPreset, StreamId, block_on,
};

use super::{
    READ, Run, State, Tensor, allocated, capture_call, expect_refusal, judge_read, refusal,
};
use crate::coverage::{Arg, Method, Number};
use crate::failure::{Check, Side, Violation};
use crate::model::Values;
use crate::workload::{LaunchSpec, MAX_LEN, view_target};

impl<D: Device> State<D> {
    /// The handle in `slot` (a clone, so the state stays free to change) and its model buffer.
    pub(super) fn in_slot(&self, slot: usize) -> Option<(Handle, u64)> {
        self.slots[slot]
            .as_ref()
            .map(|(handle, buf)| (handle.clone(), *buf))
    }

    /// The tensor of live group `group` that `index` names ([`view_target`]), and its index in
    /// the group.
    pub(super) fn view(&self, group: usize, index: usize) -> Option<(usize, &Tensor)> {
        let group = self.tensors[group].as_ref()?;
        let dims: Vec<usize> = group.iter().map(|(_, shape, _)| shape.len()).collect();
        let i = view_target(&dims, index)?;
        Some((i, &group[i]))
    }

    /// Keeps `handle`, a buffer just created on `s` to hold `values`, in `slot`, and its model.
    pub(super) fn keep(
        &mut self,
        s: StreamId,
        slot: usize,
        handle: Handle,
        values: impl Into<Values>,
    ) {
        let buf = self.model.create(s, values);
        self.reach.created(buf, s);
        self.slots[slot] = Some((handle, buf));
    }
}

impl<D: Device> Run<'_, D> {
    /// `create` of `len` elements of `fill` into `slot`, or (`then_fill`) `empty` of as many
    /// and then a `write` of them. An `empty` past [`MAX_LEN`] is a size no device serves
    /// (see `overflowing_empty`): it must be refused as out of memory, before anything is
    /// allocated.
    pub(super) fn create(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        (slot, len, fill): (usize, usize, u64),
        then_fill: bool,
    ) -> Result<(), Violation> {
        let s = client.stream_id();
        let method = if then_fill {
            Method::Empty
        } else {
            Method::Create
        };
        let number = if then_fill {
            Number::EmptyLen
        } else {
            Number::CreateLen
        };
        state.number(number, len as u64);
        if len > MAX_LEN {
            return self.oversized_empty(state, client, len);
        }
        let values = self.fills.data(fill, len);
        let created = state.allocation(client, (method, s, self.size_class(len)), || {
            if then_fill {
                client.empty(len * 4)
            } else {
                client.create(Bytes::from_elems(&values))
            }
        });
        let handle = match created {
            Ok(handle) => handle,
            Err(err) => return self.refused(state, (method, err), false),
        };
        allocated(state, method)?;
        if then_fill {
            state.hit(Method::Write, s, Arg::Ordinary, &[]);
            client
                .write(&handle, Bytes::from_elems(&values))
                .map_err(|e| Violation::refused(Method::Write, Side::Explored, "write", e))?;
        }
        state.keep(s, slot, handle, values);
        Ok(())
    }

    /// `empty` of `len` elements (4 × `len` bytes, at most `usize::MAX - 3`), past what the
    /// device serves: refused as out of memory.
    fn oversized_empty(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        len: usize,
    ) -> Result<(), Violation> {
        state.hit(Method::Empty, client.stream_id(), Arg::Overflowing, &[]);
        match client.empty(len * 4) {
            Ok(handle) => Err(Violation::new(
                Check::WrongRefusal {
                    call: Method::Empty,
                    got: None,
                },
                format!(
                    "empty of {} bytes was served by a device of {} bytes (largest allocation {})",
                    handle.size(),
                    self.world.memory_bytes,
                    self.world.max_allocation_bytes
                ),
            )),
            Err(err) => self.refused(state, (Method::Empty, err), true),
        }
    }

    /// `read_one` of the buffer in `slot`, if any.
    pub(super) fn read(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = state.in_slot(slot) else {
            return Ok(());
        };
        let s = client.stream_id();
        state.hit(Method::ReadOne, s, Arg::Ordinary, &[buf]);
        let result = client.read_one(handle);
        judge_read(
            &mut state.model,
            (s, Method::ReadOne),
            result.map(|b| vec![(buf, b)]),
        )
    }

    /// `read_async` of the buffers in slots `a` and `b`, if both hold one.
    pub(super) fn read_pair(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        a: usize,
        b: usize,
    ) -> Result<(), Violation> {
        let (Some((ha, ba)), Some((hb, bb))) = (&state.slots[a], &state.slots[b]) else {
            return Ok(());
        };
        let bufs = [*ba, *bb];
        let handles = vec![ha.clone(), hb.clone()];
        let s = client.stream_id();
        state.hit(Method::ReadAsync, s, Arg::Ordinary, &bufs);
        let result = block_on(client.read_async(handles));
        judge_read(
            &mut state.model,
            (s, Method::ReadAsync),
            result.map(|r| bufs.into_iter().zip(r).collect()),
        )
    }

    /// `read_lazy` of the buffer in `slot`, if any: materialised by a later step.
    pub(super) fn read_lazy(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = state.in_slot(slot) else {
            return Ok(());
        };
        let len = state.model.len(buf);
        let descriptor = CopyDescriptor::new(handle, vec![len], vec![1], 4);
        let s = client.stream_id();
        state.hit(Method::ReadLazy, s, Arg::Ordinary, &[buf]);
        let lazy = client.read_lazy(descriptor);
        state.lazies.push_back((lazy, buf, s));
        Ok(())
    }

    /// Materialises the oldest lazy read, if any: refused while its stream captures. Where
    /// clients run on actor threads, from another thread than the one that read, as an
    /// application hands its bytes to a worker: the copy still runs on the read's stream.
    pub(super) fn materialize(&self, state: &mut State<D>) -> Result<(), Violation> {
        let Some((lazy, buf, s)) = state.lazies.pop_front() else {
            return Ok(());
        };
        state.hit(Method::Materialize, s, Arg::Any, &[]);
        let copy = || lazy.materialize().map(|b| Bytes::from(b.to_vec()));
        let result = match self.world.actor {
            true => std::thread::scope(|scope| scope.spawn(copy).join())
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            false => copy(),
        };
        if state.captures.records(s) {
            let refused = refusal(READ, s);
            let call = (Method::Materialize, "lazy read");
            return expect_refusal(state, call, result.map(drop), refused);
        }
        judge_read(
            &mut state.model,
            (s, Method::Materialize),
            result.map(|b| vec![(buf, b)]),
        )
    }

    /// A launch inside `profile`, and the resolution of its duration.
    pub(super) fn profile(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        spec: &LaunchSpec,
    ) -> Result<(), Violation> {
        let s = client.stream_id();
        state.hit(Method::Profile, s, Arg::Any, &[]);
        match client.profile(|| self.launch(state, client, s, spec, true), "explore") {
            Ok((launched, duration)) => {
                launched?;
                state.hit(Method::ProfileResolve, s, Arg::Any, &[]);
                match duration.resolve_blocking() {
                    Ok(_) => Ok(()),
                    Err(err) => self.profile_failed(state, (s, Method::ProfileResolve), err),
                }
            }
            Err(err) => self.profile_failed(state, (s, Method::Profile), err),
        }
    }

    /// Replays the newest live graph, if any, and its launches on the model.
    pub(super) fn replay(&self, state: &mut State<D>) {
        let Some(gs) = state.graphs.last().map(|c| c.graph.stream()) else {
            return;
        };
        state.hit(Method::Replay, gs, Arg::Any, &[]);
        let captured = state.graphs.last().expect("a graph is live");
        captured.graph.replay();
        for &(kernel, dst, src, k) in &captured.launches {
            let formula = &self.world.kernels[kernel];
            (state.model).launch(gs, dst, src, |d, s| formula.apply(d, s, k));
        }
    }

    /// Installs the default pools: refused while they are in use, and on a stream that may
    /// have failed.
    pub(super) fn install(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
    ) -> Result<(), Violation> {
        let s = client.stream_id();
        state.hit(Method::InstallMemoryPools, s, Arg::Any, &[]);
        match client.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::Default)) {
            Ok(()) | Err(InstallMemoryPoolsError::PoolsInUse { .. }) => Ok(()),
            Err(InstallMemoryPoolsError::StreamUnavailable)
                if state.model.lost
                    || state.model.may_have_failed(s, self.world.injects_faults()) =>
            {
                Ok(())
            }
            Err(other) => Err(Violation::refused(
                Method::InstallMemoryPools,
                Side::Explored,
                "install_memory_pools",
                other,
            )),
        }
    }
}

/// `sync`, a blocking call that proves the stream's windows ran, or (not `sync`) `flush`, one
/// that proves nothing ran.
pub(super) fn blocking<D: Device>(
    state: &mut State<D>,
    client: &ComputeClient<D>,
    sync: bool,
) -> Result<(), Violation> {
    let s = client.stream_id();
    let method = if sync { Method::Sync } else { Method::Flush };
    state.hit(method, s, Arg::Any, &[]);
    let result = if sync {
        client.sync().map(drop)
    } else {
        client.flush().map(drop)
    };
    state
        .model
        .blocking(s, method, result.as_ref().map(|_| ()), sync)
}

/// `sync_all`: refused at once while any stream captures (the explorer opens one capture at a
/// time), else one wait for every stream, judged by the model.
pub(super) fn sync_all<D: Device>(
    state: &mut State<D>,
    client: &ComputeClient<D>,
) -> Result<(), Violation> {
    let s = client.stream_id();
    state.hit(Method::SyncAll, s, Arg::Any, &[]);
    let result = client.sync_all();
    match state.captures.open.as_ref().map(|open| open.stream) {
        Some(capturing) => {
            let expected = refusal("sync_all", capturing);
            expect_refusal(state, (Method::SyncAll, "sync_all"), result, expected)
        }
        None => state.model.sync_all(s, result.as_ref().map(|_| ())),
    }
}

/// Drops the buffer in `slot`, if any.
pub(super) fn release<D: Device>(state: &mut State<D>, slot: usize) {
    if let Some((_, buf)) = state.slots[slot].take() {
        state.hit_drop(buf);
    }
}

/// Drops the tensors of group `slot`, if any (a group of none holds no handle).
pub(super) fn release_tensors<D: Device>(state: &mut State<D>, slot: usize) {
    if let Some(group) = state.tensors[slot].take()
        && let Some(first) = group.first()
    {
        state.hit_drop(first.2);
    }
}

/// Drops the oldest live graph, if any.
pub(super) fn drop_graph<D: Device>(state: &mut State<D>) {
    if let Some(gs) = state.graphs.first().map(|c| c.graph.stream()) {
        state.hit(Method::DropGraph, gs, Arg::Any, &[]);
        state.graphs.remove(0);
    }
}

/// `memory_usage` and `memory_report`, which must always answer.
pub(super) fn usage<D: Device>(
    state: &mut State<D>,
    client: &ComputeClient<D>,
) -> Result<(), Violation> {
    let s = client.stream_id();
    state.hit(Method::MemoryUsage, s, Arg::Any, &[]);
    client.memory_usage().map_err(|e| {
        let what = "memory_usage must always answer";
        Violation::refused(Method::MemoryUsage, Side::Explored, what, e)
    })?;
    state.hit(Method::MemoryReport, s, Arg::Any, &[]);
    client.memory_report().map(drop).map_err(|e| {
        let what = "memory_report must always answer";
        Violation::refused(Method::MemoryReport, Side::Explored, what, e)
    })
}

/// `graph_prepare`: the stream is prepared if it succeeded.
pub(super) fn graph_prepare<D: Device>(
    state: &mut State<D>,
    client: &ComputeClient<D>,
) -> Result<(), Violation> {
    let s = client.stream_id();
    state.hit(Method::GraphPrepare, s, Arg::Any, &[]);
    if capture_call(state, s, Method::GraphPrepare, client.graph_prepare())? {
        state.captures.prepared.insert(s);
    }
    Ok(())
}
