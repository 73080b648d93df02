//! Runs one world's workload on a client: host threads take turns in the workload's order, each
//! operation is judged against the [`Model`], and the run ends by draining every stream, reading
//! back everything still live and checking memory, faults and the simulator's observations.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};

use lockstep::CollectiveError;
use lockstep::kernel::{ElemType, Fnv1a, KernelError, Scalar};
use lockstep::{
    Bytes, CaptureError, ComputeClient, CopyDescriptor, CubeCount, Device, DeviceId, Graph, Handle,
    InstallMemoryPoolsError, IoError, Kernel, KernelArguments, MemoryLayout,
    MemoryLayoutDescriptor, MemoryLayoutStrategy, MemoryPoolsConfig, OutOfMemoryReason,
    ProfileError, ReduceOperation, ServerError, StreamId, block_on, contiguous_strides,
};
use lockstep_sim::{FaultKind, SanitizerReport};

mod calls;
mod edge;
mod exclusive;
mod last_read;
mod reach;

use calls::{blocking, drop_graph, graph_prepare, release, release_tensors, sync_all, usage};
pub(super) use edge::{misaligned_write, write_misaligned};

use super::Devices;
use super::boundary::invocations;
use super::coverage::{Arg, Hits, Method, Number, Recorder, StreamState};
use super::failure::{
    Check, ErrorKind, ExploreFailure, Operation, ReportKind, Side, Stage, Violation,
};
use super::model::{Model, ReadOf};
use super::view::{View, ViewRefusal};
use super::workload::{
    Action, Drawn, EdgeCall, Fills, LaunchCount, LaunchSpec, Launched, MAX_ELEMS, On, SLOTS, Step,
    TENSOR_SLOTS, Workload, tensor_strategy,
};
use super::world::{MAX_PEER_TIMEOUTS, World};
use lockstep_kernels::elementwise::overrun;
use lockstep_kernels::formula::Formula;

/// What one execution of a world did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// Hash of every operation the explored device executed, in order: equal for equal runs.
    pub trace_hash: u64,
    /// Operations the simulated devices (the explored one and its peers) executed.
    pub device_ops: u64,
    /// Client calls the workload made.
    pub host_ops: u64,
    /// Reads compared with the model and found equal.
    pub reads_checked: u64,
    /// Faults the simulator injected.
    pub faults_injected: u64,
    /// Injected faults some call returned.
    pub faults_surfaced: u64,
    /// Checked-kernel faults (out-of-range stores) returned where the model expected them.
    pub kernel_faults: u64,
    /// Whether the explored device was lost.
    pub device_lost: bool,
    /// Allocations an installed pool's cap or the world's budget refused (legal; the
    /// shrinker's printer cannot predict them).
    pub capped_refusals: u64,
    /// The coverage cells this run's calls hit.
    pub coverage: Hits,
    /// Why the run failed; `None` when every check held.
    pub failure: Option<ExploreFailure>,
}

/// A captured graph and the launches it replays, on model buffers.
struct Captured<D: Device> {
    graph: Graph<D>,
    launches: Vec<ModelLaunch>,
}

/// Host thread `t`'s own stream is `StreamId(FIRST_OWN_STREAM + t)`: host threads are logical
/// (they take turns on one OS thread), so their streams are named here rather than by
/// [`StreamId::current`], above the pinned streams and the driver's own.
pub(super) const FIRST_OWN_STREAM: u64 = 1 << 16;

/// The stream of the driver's own calls (setup, cleanup, memory baselines).
pub(super) const HOST_STREAM: u64 = 100;

/// A tensor of a group: its layout, shape and model buffer.
type Tensor = (MemoryLayout, Vec<usize>, u64);

/// A launch on model buffers: kernel, destination, source, parameter.
type ModelLaunch = (usize, u64, u64, u32);

/// The capture still open while other threads act.
pub(super) struct OpenCapture {
    pub stream: StreamId,
    /// The launches recorded so far.
    pub launches: Vec<ModelLaunch>,
    /// A write was enqueued on the stream in the window: `stop_capture` must refuse.
    pub refused_write: bool,
}

/// Graph-capture state of the run's streams, as the driver (and the printer) knows it.
#[derive(Default)]
pub(super) struct Captures {
    pub open: Option<OpenCapture>,
    /// Streams `graph_prepare`d whose capture has not started.
    pub prepared: BTreeSet<StreamId>,
}

impl Captures {
    /// Whether the open capture records `s`.
    pub fn records(&self, s: StreamId) -> bool {
        self.open.as_ref().is_some_and(|c| c.stream == s)
    }

    /// The open capture, if it records `s`.
    pub fn recording(&mut self, s: StreamId) -> Option<&mut OpenCapture> {
        self.open.as_mut().filter(|open| open.stream == s)
    }
}

/// What a step does on the stream the open capture records. The driver judges by it and the
/// printer prints by it, so both agree on what a capturing stream refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum InCapture<'a> {
    /// A launch, recorded into the graph instead of run.
    Recorded(&'a LaunchSpec),
    /// A `write_at` of one zero element at the start of `slot` (unless it has none): enqueued,
    /// and refused late, by `stop_capture` failing with `WriteInCapture`.
    WrittenInWindow { slot: usize },
    /// A call refused at once with `CaptureError::Refused`.
    Refused(Refused),
    /// A step that leaves the stream alone: it acts as outside a capture.
    AsUsual,
    /// An edge call that follows the window's rules itself: a write of no bytes or a call with
    /// a foreign handle, done or refused at the call; a misaligned write, enqueued and refused
    /// late by `stop_capture`.
    OwnRules,
    /// A step not explored in a capture window: it does nothing.
    Skipped,
}

/// A call a capturing stream refuses at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refused {
    /// `read_one` of `slot`.
    Read {
        slot: usize,
    },
    Flush,
    Sync,
    /// `graph_prepare`, refused as `AlreadyCapturing`.
    Prepare,
}

impl Refused {
    /// The call refused.
    pub fn operation(self) -> &'static str {
        match self {
            Refused::Read { .. } => READ,
            Refused::Flush => "flush",
            Refused::Sync => "sync",
            Refused::Prepare => "graph_prepare",
        }
    }

    /// The client method refused.
    pub fn method(self) -> Method {
        match self {
            Refused::Read { .. } => Method::ReadOne,
            Refused::Flush => Method::Flush,
            Refused::Sync => Method::Sync,
            Refused::Prepare => Method::GraphPrepare,
        }
    }

    /// What capturing stream `s` returns for the call.
    pub fn expected(self, s: StreamId) -> CaptureError {
        match self {
            Refused::Prepare => CaptureError::AlreadyCapturing { stream: s },
            call => refusal(call.operation(), s),
        }
    }
}

/// The operation a refused read names; the first access of a lazy read is one.
pub(super) const READ: &str = "read";

/// What capturing stream `s` returns for `operation`.
pub(super) fn refusal(operation: &'static str, s: StreamId) -> CaptureError {
    CaptureError::Refused {
        operation,
        stream: s,
    }
}

/// What `action` does on the stream the open capture records. Every action is listed, so a
/// new one must say what it does in a capture window.
pub(super) fn in_capture(action: &Action) -> InCapture<'_> {
    match action {
        // A boundary count's outcome (nothing, refused, a prefix) is judged outside windows.
        Action::Launch(spec) if spec.count != LaunchCount::Covering => InCapture::Skipped,
        Action::Launch(spec) => InCapture::Recorded(spec),
        Action::Write { slot, .. } => InCapture::WrittenInWindow { slot: *slot },
        Action::Read { slot } | Action::ReadPair { a: slot, .. } => {
            InCapture::Refused(Refused::Read { slot: *slot })
        }
        Action::Flush => InCapture::Refused(Refused::Flush),
        Action::Sync => InCapture::Refused(Refused::Sync),
        Action::Prepare => InCapture::Refused(Refused::Prepare),
        Action::Release { .. }
        | Action::ReleaseTensors { .. }
        | Action::EndCapture
        | Action::Replay
        | Action::DropGraph
        | Action::ReadLazy { .. }
        | Action::Cleanup
        | Action::Usage
        // Refused while any stream captures, this one or another: judged by the call itself.
        | Action::SyncAll => InCapture::AsUsual,
        Action::Edge(EdgeCall::EmptyWrite { .. } | EdgeCall::Misaligned { .. })
        | Action::Edge(EdgeCall::Foreign { .. }) => InCapture::OwnRules,
        Action::Create { .. }
        | Action::EmptyThenFill { .. }
        | Action::CreateTensors { .. }
        | Action::ReadTensors { .. }
        | Action::Materialize
        | Action::Profile(_)
        | Action::DryRun(_)
        | Action::Overrun { .. }
        | Action::BeginCapture { .. }
        | Action::CaptureOutOfOrder { .. }
        | Action::Oversized { .. }
        // Recorded into a graph, a launch on a view would reach its coverage cell of a view last
        // used by the capturing stream 2 to 4 times in 60,000 seeds: too rare for CI's gate.
        | Action::LaunchView { .. }
        | Action::AllReduce { .. }
        | Action::ToPeer { .. }
        | Action::ViewToPeer { .. }
        | Action::FromPeer { .. }
        | Action::Install
        // An allocation's outcome in a window is the device's (see `Oversized`).
        | Action::Edge(EdgeCall::EmptyBuffer { .. })
        | Action::Exclusive { .. } => InCapture::Skipped,
    }
}

/// Graphs live at once, at most. Two: a capture may start beside a live graph, on a stream
/// other than the graph's, whose buffers it may share.
pub(super) const MAX_GRAPHS: usize = 2;

/// Whether a capture may start on `s` beside `graphs` (captured on the streams `graph_streams`
/// names): none is open, fewer than [`MAX_GRAPHS`] graphs live, and none of them replays on
/// `s` (a replay while its stream captures is refused into the stream's failures, which the
/// model does not hold).
pub(super) fn may_capture_beside(
    graph_streams: impl IntoIterator<Item = StreamId>,
    captures: &Captures,
    s: StreamId,
) -> bool {
    let streams: Vec<StreamId> = graph_streams.into_iter().collect();
    captures.open.is_none() && streams.len() < MAX_GRAPHS && !streams.contains(&s)
}

fn may_capture<D: Device>(graphs: &[Captured<D>], captures: &Captures, s: StreamId) -> bool {
    may_capture_beside(graphs.iter().map(|g| g.graph.stream()), captures, s)
}

/// The launches of [`Action::BeginCapture`] that run: those on two distinct slots that are
/// both `filled`. The capture begins only if there are some.
pub(super) fn capture_launches(
    launches: &[LaunchSpec],
    filled: impl Fn(usize) -> bool,
) -> Vec<&LaunchSpec> {
    launches
        .iter()
        .filter(|l| l.dst != l.src && filled(l.dst) && filled(l.src))
        .collect()
}

/// The request of [`Action::Oversized`], which no device serves: `empty` of
/// `usize::MAX - below` bytes, or two packed byte tensors of 2^63 and 2^63 - `below` bytes,
/// whose sum passes `u64::MAX`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OversizedRequest {
    Empty(usize),
    Tensors([usize; 2]),
}

impl OversizedRequest {
    pub fn of(tensors: bool, below: usize) -> OversizedRequest {
        let half = 1usize << (usize::BITS - 1);
        if tensors {
            OversizedRequest::Tensors([half, half - below])
        } else {
            OversizedRequest::Empty(usize::MAX - below)
        }
    }
}

/// Everything the host threads share.
struct State<D: Device> {
    model: Model,
    slots: Vec<Option<(Handle, u64)>>,
    tensors: Vec<Option<Vec<Tensor>>>,
    /// Lazy reads not accessed yet, oldest first: the bytes, their buffer and stream.
    lazies: VecDeque<(Bytes, u64, StreamId)>,
    /// Live graphs, oldest first: at most [`MAX_GRAPHS`], each of another stream.
    graphs: Vec<Captured<D>>,
    captures: Captures,
    failure: Option<ExploreFailure>,
    reach: Recorder,
}

struct Run<'w, D: Device> {
    world: &'w World,
    /// The explored device's peers, each on its `StreamId(0)`.
    peers: Vec<ComputeClient<D>>,
    base: ComputeClient<D>,
    pinned: Vec<ComputeClient<D>>,
    /// Per host thread, the client on that thread's own stream.
    own: Vec<ComputeClient<D>>,
    kernels: Vec<Kernel>,
    overrun: Kernel,
    /// The buffer data of this seed's runs.
    fills: &'w Fills,
}

/// The kernels a run of a world launches, built once for every run of it (a seed runs twice,
/// a shrink many times; building them was 1.7% of the explorer's instructions).
pub struct Kernels {
    formulas: Vec<Kernel>,
    overrun: Kernel,
    /// The world's refused workgroup size, and what building its first formula with it gave.
    refused: Option<([u32; 3], Result<Kernel, KernelError>)>,
}

impl Kernels {
    /// `world`'s formulas' kernels, in its order, the overrun kernel, and the first formula
    /// built with the world's refused workgroup size.
    pub fn of(world: &World) -> Self {
        Self {
            formulas: world.kernels.iter().map(Formula::kernel).collect(),
            overrun: overrun(),
            refused: (world.refused_workgroup)
                .map(|size| (size, world.kernels[0].kernel_sized(size))),
        }
    }

    /// Records the workgroup sizes of the world's kernels in `state`'s coverage, and checks
    /// that the refused size was refused, naming it.
    fn judge_sizes<D: Device>(&self, world: &World, state: &mut State<D>) -> Result<(), Violation> {
        for formula in &world.kernels {
            state.number(Number::WorkgroupSize, formula.workgroup.into());
        }
        let Some((size, built)) = &self.refused else {
            return Ok(());
        };
        state.number(Number::WorkgroupSize, invocations(*size));
        match built {
            Err(KernelError::InvalidWorkgroupSize { size: named, .. }) if named == size => Ok(()),
            other => Err(Violation::new(
                Check::WorkgroupSizeAccepted,
                format!(
                    "building {} with workgroup size {size:?} must be refused as InvalidWorkgroupSize; got {:?}",
                    world.kernels[0].name,
                    other.as_ref().map(|k| k.def().workgroup_size)
                ),
            )),
        }
    }
}

/// Runs `workload` of `world` on its `devices` (the explored one first) and checks it;
/// `kernels` are `world`'s ([`Kernels::of`]), `fills` the data of the workload's buffers
/// (shared by the runs of one seed, or fresh).
pub fn execute<D: Device>(
    world: &World,
    kernels: &Kernels,
    workload: &Workload,
    fills: &Fills,
    devices: Devices<D>,
) -> Execution {
    let mut execution = Execution {
        host_ops: workload.len() as u64,
        ..Execution::default()
    };
    let mut seen = Seen::default();
    let Devices { clients, probes } = devices;
    let failure = drive(
        world,
        kernels,
        fills,
        workload,
        clients,
        &mut execution,
        &mut seen,
    )
    .err();
    // The clients are gone: the actors have torn the devices down, and every operation ran.
    let mut hash = Fnv1a::default();
    for probe in &probes {
        let observed = probe.observations();
        hash.write_u64(observed.trace_hash);
        execution.device_ops += observed.ops_executed;
    }
    execution.trace_hash = hash.0;
    execution.faults_injected = probes[0].observations().faults.len() as u64;
    execution.failure = failure.or_else(|| {
        audit_run(world, &seen, &probes, execution.device_lost)
            .err()
            .map(|violation| violation.in_stage(Stage::Audit))
    });
    execution
}

/// Audits a run whose checks held against what the simulators observed.
fn audit_run(
    world: &World,
    seen: &Seen,
    probes: &[lockstep_sim::SimProbe],
    lost: bool,
) -> Result<(), Violation> {
    let observed = probes[0].observations();
    // A loss no fault explains comes first: what follows it (memory freed under work the
    // device still runs) is its consequence.
    seen.audit_loss(&observed)?;
    // A peer's receive that timed out waiting for a lost explored device leaves its
    // destination unwritten, and the read that returns the timeout reads it.
    for peer in &probes[1..] {
        audit_observed(world.faults.device_loss > 0.0, &peer.observations())?;
    }
    audit(world, &observed)?;
    seen.audit(lost, &observed)
}

/// What the workload saw of injected faults, for the audit against what the device injected.
#[derive(Default)]
struct Seen {
    /// Injected fault id → the stream that returned it.
    surfaced: BTreeMap<u64, StreamId>,
    refused_allocations: u64,
    /// Why the device was lost, if it was (the reason `DeviceLost` carries).
    lost_reason: Option<String>,
}

fn drive<D: Device>(
    world: &World,
    kernels: &Kernels,
    fills: &Fills,
    workload: &Workload,
    mut clients: Vec<ComputeClient<D>>,
    execution: &mut Execution,
    seen: &mut Seen,
) -> Result<(), ExploreFailure> {
    let mut client = clients.remove(0);
    client.set_stream(StreamId(HOST_STREAM));
    let peers: Vec<ComputeClient<D>> = clients
        .into_iter()
        .map(|mut peer| {
            peer.set_stream(StreamId(0));
            peer
        })
        .collect();
    let baseline = prepare(world, &client).map_err(|v| v.in_stage(Stage::Setup))?;
    let peer_baselines = peers
        .iter()
        .map(|peer| peer.memory_usage())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            let what = "memory_usage of a peer before the workload";
            Violation::refused(Method::MemoryUsage, Side::Peer, what, e).in_stage(Stage::Setup)
        })?;
    let on_stream = |id: u64| {
        let mut c = client.clone();
        c.set_stream(StreamId(id));
        c
    };
    let run = Run {
        world,
        peers,
        pinned: (0..world.streams as u64).map(on_stream).collect(),
        own: (0..workload.threads.len() as u64)
            .map(|t| on_stream(FIRST_OWN_STREAM + t))
            .collect(),
        base: client.clone(),
        kernels: kernels.formulas.clone(),
        overrun: kernels.overrun.clone(),
        fills,
    };
    let mut state = State {
        model: Model::new(world.faults.allocation_failure > 0.0),
        slots: (0..SLOTS).map(|_| None).collect(),
        tensors: (0..TENSOR_SLOTS).map(|_| None).collect(),
        lazies: VecDeque::new(),
        graphs: Vec::new(),
        captures: Captures::default(),
        failure: None,
        reach: Recorder::default(),
    };
    if let Some(budget) = world.budget_bytes {
        state.number(Number::BudgetBytes, budget);
    }
    if let Some(MemoryPoolsConfig::Pools(layouts)) = &world.pools {
        for layout in layouts {
            state.number(Number::PoolCapBytes, layout.cap_bytes);
        }
    }
    (kernels.judge_sizes(world, &mut state)).map_err(|v| v.in_stage(Stage::Setup))?;
    // The host threads are logical: they take turns on this one OS thread, in the schedule's
    // order, exactly as the device would see real threads that act strictly in turn.
    for (turn, (thread, step)) in workload.in_order().enumerate() {
        if state.failure.is_some() {
            break;
        }
        run.perform(&mut state, turn, thread, step);
    }
    // No capture outlives the workload: one still open ends before the drain, so any part of
    // a workload (as the shrinker tries) is a whole run.
    if state.failure.is_none()
        && let Err(why) = run.end_capture(&mut state)
    {
        let why = why.context("stop_capture after the workload");
        state.failure = Some(why.in_stage(Stage::EndCapture));
    }
    finish(world, &run.base, state, baseline, execution, seen)?;
    let lost = execution.device_lost.then(|| run.base.peer_id());
    finish_peers(&run.peers, &peer_baselines, lost).map_err(|v| v.in_stage(Stage::Peers))
}

/// Peers are fault-free: after the workload every peer syncs cleanly and holds no memory. A
/// peer may first return its waits for the explored device timing out, where `lost` names
/// that device (lost, it joined no collective or copy after).
fn finish_peers<D: Device>(
    peers: &[ComputeClient<D>],
    baselines: &[lockstep::MemoryUsage],
    lost: Option<DeviceId>,
) -> Result<(), Violation> {
    for (peer, baseline) in peers.iter().zip(baselines) {
        let id = peer.peer_id();
        let refused = |call, what: String| {
            move |e: ServerError| Violation::refused(call, Side::Peer, what, e)
        };
        // Each timed-out wait is returned once, by some blocking call: at most one a step.
        let mut timeouts = 0;
        let synced = loop {
            match peer.sync() {
                Err(e) if timed_out_waiting(&e, lost) && timeouts < MAX_PEER_TIMEOUTS => {
                    timeouts += 1;
                }
                other => break other,
            }
        };
        synced.map_err(refused(Method::Sync, format!("final sync of peer {id}")))?;
        peer.memory_cleanup();
        peer.sync().map_err(refused(
            Method::Sync,
            format!("sync of peer {id} after cleanup"),
        ))?;
        let usage = peer.memory_usage().map_err(refused(
            Method::MemoryUsage,
            format!("memory_usage of peer {id}"),
        ))?;
        if usage != *baseline {
            return Err(Violation::new(
                Check::Leak(Side::Peer),
                format!("peer {id} did not return to baseline: {usage} (baseline {baseline})"),
            ));
        }
    }
    Ok(())
}

/// Installs the world's pools and sets its budget; returns the memory baseline.
fn prepare<D: Device>(
    world: &World,
    client: &ComputeClient<D>,
) -> Result<lockstep::MemoryUsage, Violation> {
    if let Some(pools) = &world.pools {
        let result = client.install_memory_pools(pools);
        let expected = world
            .pools_refusal()
            .map(InstallMemoryPoolsError::InvalidLayout);
        match (result, expected) {
            (Ok(()), None) => {}
            (Err(got), Some(expected)) if got == expected => {}
            (result, Some(expected)) => {
                return Err(Violation::new(
                    Check::WrongRefusal {
                        call: Method::InstallMemoryPools,
                        got: result.as_ref().err().map(|_| ErrorKind::Io),
                    },
                    format!("installing {pools:?} must be refused as {expected:?}; got {result:?}"),
                ));
            }
            (Err(e), None) => {
                let what = "installing the world's pools on an idle device";
                return Err(Violation::refused(
                    Method::InstallMemoryPools,
                    Side::Explored,
                    what,
                    e,
                ));
            }
        }
    }
    if world.budget_bytes.is_some() {
        client.set_memory_budget(world.budget_bytes).map_err(|e| {
            Violation::new(Check::BudgetRefused, e.to_string())
                .context("setting the world's budget on an idle device")
        })?;
    }
    client.memory_usage().map_err(|e| {
        let what = "memory_usage before the workload";
        Violation::refused(Method::MemoryUsage, Side::Explored, what, e)
    })
}

/// Ends a run: [`settle`]s it unless the workload already failed, then records what the model
/// counted into `execution` and what the run saw into `seen`.
fn finish<D: Device>(
    world: &World,
    base: &ComputeClient<D>,
    mut state: State<D>,
    baseline: lockstep::MemoryUsage,
    execution: &mut Execution,
    seen: &mut Seen,
) -> Result<(), ExploreFailure> {
    if let Some(failure) = state.failure.take() {
        execution.coverage = std::mem::take(&mut state.reach.hits);
        return Err(failure);
    }
    let bound = execution.host_ops * 4 + 16;
    let result = settle(world, base, &mut state, baseline, bound);
    let model = &mut state.model;
    execution.coverage = std::mem::take(&mut state.reach.hits);
    if result.is_ok() && model.peer_timeouts > 0 && !model.lost {
        let detail = format!(
            "{} peer calls timed out waiting for the explored device, which was never lost",
            model.peer_timeouts
        );
        return Err(Violation::new(Check::PeerTimedOut, detail).in_stage(Stage::Peers));
    }
    execution.reads_checked = model.reads_checked;
    execution.faults_surfaced = model.faults_surfaced;
    execution.kernel_faults = model.kernel_faults;
    execution.device_lost = model.lost;
    execution.capped_refusals = model.capped_refusals;
    if model.lost
        && let Err(ServerError::DeviceLost { reason }) = base.flush()
    {
        seen.lost_reason = Some(reason);
    }
    seen.surfaced = std::mem::take(&mut model.surfaced);
    seen.refused_allocations = model.refused_allocations;
    result
}

/// After a workload that passed: drains every stream (at most `bound` syncs), checks the
/// expected faults and suspects, reads back everything live, drops the graph and every handle,
/// then, unless the device was lost, cleans up, drains again and checks the memory baseline.
fn settle<D: Device>(
    world: &World,
    base: &ComputeClient<D>,
    state: &mut State<D>,
    baseline: lockstep::MemoryUsage,
    bound: u64,
) -> Result<(), ExploreFailure> {
    let model = &mut state.model;
    drain(base, model, bound, "at the end of the workload")
        .map_err(|v| v.in_stage(Stage::Drain))?;
    model
        .expected_faults_met()
        .and_then(|()| model.judge_suspects())
        .map_err(|v| v.in_stage(Stage::Verdicts))?;
    if !model.lost {
        last_read::read_back_everything(base, &state.slots, &state.tensors, model)
            .and_then(|()| last_read::materialize_pending(&mut state.lazies, model))
            .map_err(|why| {
                why.context("the final read of everything live")
                    .in_stage(Stage::FinalRead)
            })?;
    }
    for captured in std::mem::take(&mut state.graphs) {
        // Drained: the graph's stream is idle, unless the device was lost.
        let drained = if model.lost {
            StreamState::Lost
        } else {
            StreamState::Idle
        };
        let at = (drained, captured.graph.stream());
        state.reach.call(Method::DropGraph, at, Arg::Any, &[]);
    }
    state.slots.clear();
    state.tensors.clear();
    state.lazies.clear();
    if model.lost {
        return Ok(());
    }
    base.memory_cleanup();
    // The runtime's own work (clearing a fault record, cleanup) can fail too, after the
    // workload's last sync: drain again.
    drain(base, model, bound, "after releasing everything")
        .map_err(|v| v.in_stage(Stage::DrainAfterRelease))?;
    if model.lost {
        return Ok(());
    }
    back_to_baseline(world, base, baseline).map_err(|v| v.in_stage(Stage::Baseline))
}

/// Checks that the explored device's memory is back to `baseline`, after every handle dropped,
/// `memory_cleanup` and a drain.
fn back_to_baseline<D: Device>(
    world: &World,
    base: &ComputeClient<D>,
    baseline: lockstep::MemoryUsage,
) -> Result<(), Violation> {
    let usage = base.memory_usage().map_err(|e| {
        let what = "memory_usage after the workload";
        Violation::refused(Method::MemoryUsage, Side::Explored, what, e)
    })?;
    if usage != baseline {
        return Err(Violation::new(
            Check::Leak(Side::Explored),
            format!(
                "memory did not return to baseline: {usage} after every handle dropped, memory_cleanup and sync (baseline {baseline}); {}",
                world
                    .installed_pools()
                    .map_or("default pools".to_owned(), |p| format!("{p:?}"))
            ),
        ));
    }
    Ok(())
}

/// Syncs every stream until it succeeds (at most `bound` times), judging each failure.
fn drain<D: Device>(
    base: &ComputeClient<D>,
    model: &mut Model,
    bound: u64,
    when: &str,
) -> Result<(), Violation> {
    for s in model.streams() {
        let mut client = base.clone();
        client.set_stream(s);
        for _ in 0..bound {
            let result = client.sync();
            model
                .blocking(s, Method::Sync, result.as_ref().map(|_| ()), true)
                .map_err(|why| why.context(format_args!("sync of {s} {when}")))?;
            if result.is_ok() || model.lost {
                break;
            }
        }
    }
    Ok(())
}

/// An allocating `call` succeeded: only wrong once the device is lost.
fn allocated<D: Device>(state: &State<D>, call: Method) -> Result<(), Violation> {
    if state.model.lost {
        Err(Violation::new(
            Check::SucceededAfterLoss(call),
            "an allocation succeeded after the device was lost",
        ))
    } else {
        Ok(())
    }
}

/// [`audit_observed`] of a device of `world`.
fn audit(world: &World, observed: &lockstep_sim::Observations) -> Result<(), Violation> {
    audit_observed(world.faults.transfer_failure > 0.0, observed)
}

/// Checks the simulator's own verdicts: its watchdog and its sanitizer. With
/// `excuse_unwritten` (transfers may fail, or a replay skipped writes), reads of bytes left
/// unwritten are not findings.
pub(super) fn audit_observed(
    excuse_unwritten: bool,
    observed: &lockstep_sim::Observations,
) -> Result<(), Violation> {
    if observed.watchdog_fired {
        return Err(Violation::new(
            Check::Hang,
            format!(
                "hang: virtual time passed the {} ns watchdog",
                super::world::WATCHDOG_NS
            ),
        ));
    }
    let excused = |r: &&SanitizerReport| {
        // A failed write leaves its bytes unwritten; reading them later is the fault's doing.
        matches!(r, SanitizerReport::UninitializedRead { .. }) && excuse_unwritten
    };
    if let Some(report) = observed.reports.iter().find(|r| !excused(r)) {
        let check = Check::Sanitizer(ReportKind::of(report));
        return Err(Violation::new(check, format!("sanitizer: {report}")));
    }
    Ok(())
}

impl Seen {
    /// Checks that only an injected loss lost the device. The runtime marks the device lost
    /// itself when one of its invariants breaks, naming the invariant in the reason.
    fn audit_loss(&self, observed: &lockstep_sim::Observations) -> Result<(), Violation> {
        let injected = observed
            .faults
            .iter()
            .any(|fault| fault.kind == FaultKind::DeviceLoss);
        match &self.lost_reason {
            Some(reason) if !injected => Err(Violation::new(
                Check::LossNotInjected,
                format!("the device was lost, yet no loss was injected: {reason}"),
            )),
            _ => Ok(()),
        }
    }

    /// Checks that every injected fault surfaced exactly once (the model refuses a second
    /// time), on the stream it happened on, and that only injected failures refused
    /// allocations. After a device loss, faults still queued are superseded by the loss.
    fn audit(&self, lost: bool, observed: &lockstep_sim::Observations) -> Result<(), Violation> {
        let mut device_stream_of = BTreeMap::new();
        let mut client_stream_of = BTreeMap::new();
        let mut allocation_failures = 0;
        for fault in &observed.faults {
            match fault.kind {
                FaultKind::AllocationFailure => allocation_failures += 1,
                FaultKind::TransferFailure | FaultKind::KernelFault => {
                    let Some(&client_stream) = self.surfaced.get(&fault.id) else {
                        if lost {
                            continue;
                        }
                        return Err(Violation::new(
                            Check::FaultNeverSurfaced(fault.kind),
                            format!(
                                "injected {:?} #{} on device stream {:?} ({}) never surfaced",
                                fault.kind,
                                fault.id,
                                fault.stream,
                                fault
                                    .stream_id
                                    .map_or("unnamed".to_owned(), |s| s.to_string())
                            ),
                        ));
                    };
                    let device_stream = fault.stream.expect("stream faults name their stream");
                    if let Some(other) = device_stream_of.insert(client_stream, device_stream)
                        && other != device_stream
                    {
                        return Err(Violation::new(
                            Check::FaultsOfTwoDeviceStreams,
                            format!(
                                "{client_stream} returned faults of device streams {other} and {device_stream}"
                            ),
                        )
                        .on(client_stream));
                    }
                    if let Some(other) = client_stream_of.insert(device_stream, client_stream)
                        && other != client_stream
                    {
                        return Err(Violation::new(
                            Check::FaultsOnTwoStreams,
                            format!(
                                "faults of device stream {device_stream} surfaced on {other} and on {client_stream}"
                            ),
                        )
                        .on(client_stream));
                    }
                }
                // A loss is audited on its own (`audit_loss`); collectives run only in
                // fault-free worlds, so an absent peer is never drawn.
                FaultKind::DeviceLoss | FaultKind::PeerAbsent => {}
            }
        }
        if self.refused_allocations > allocation_failures {
            return Err(Violation::new(
                Check::UninjectedRefusals,
                format!(
                    "{} allocations refused, but only {allocation_failures} allocation failures injected",
                    self.refused_allocations
                ),
            ));
        }
        Ok(())
    }
}

impl<D: Device> Run<'_, D> {
    /// Performs operation `turn` of the run, `step` of `thread`; a failure (a panic included)
    /// ends the workload.
    fn perform(&self, state: &mut State<D>, turn: usize, thread: usize, step: &Step) {
        let result = catch_unwind(AssertUnwindSafe(|| self.act(state, thread, step)))
            .unwrap_or_else(|panic| Err(Violation::panicked(panic.as_ref())));
        if let Err(why) = result {
            let operation = Operation {
                turn,
                thread,
                step: step.clone(),
            };
            let s = self.client(step.on, thread).stream_id();
            state.failure = Some(why.in_operation(operation, s));
        }
    }

    fn client(&self, on: On, thread: usize) -> &ComputeClient<D> {
        match on {
            On::Pinned(i) => &self.pinned[i],
            On::Thread => &self.own[thread],
        }
    }

    /// An allocating `call` on the explored device failed (create, empty, tensors, `to_client`
    /// into it): the one rule for all of them. A request no device serves (`oversized`) must
    /// be refused as out of memory; otherwise only a capped pool, an injected failure and a
    /// lost device may refuse.
    fn refused(
        &self,
        state: &mut State<D>,
        (call, err): (Method, ServerError),
        oversized: bool,
    ) -> Result<(), Violation> {
        match err {
            ServerError::OutOfMemory(_) if oversized => Ok(()),
            // An installed pool layout caps what a size class may reserve, the world's budget
            // what all pools reserve: legal refusals.
            ServerError::OutOfMemory(oom)
                if matches!(
                    (
                        &oom.reason,
                        self.world.installed_pools(),
                        self.world.budget_bytes
                    ),
                    (
                        OutOfMemoryReason::PoolCap { .. },
                        Some(MemoryPoolsConfig::Pools(_)),
                        _
                    ) | (OutOfMemoryReason::Budget { .. }, _, Some(_))
                ) =>
            {
                state.model.capped_refusals += 1;
                Ok(())
            }
            ServerError::OutOfMemory(_) if self.world.faults.allocation_failure > 0.0 => {
                state.model.refused_allocations += 1;
                Ok(())
            }
            ServerError::DeviceLost { .. } => {
                state.model.lost = true;
                Ok(())
            }
            ref refusal if refused_after_loss(&state.model, refusal) => Ok(()),
            other => Err(Violation::refused(
                call,
                Side::Explored,
                "allocation failed",
                other,
            )),
        }
    }

    /// Makes `step`'s call and judges what it returns: each action's call is a method of its
    /// own (`calls.rs` holds those without a theme of their own).
    fn act(&self, state: &mut State<D>, thread: usize, step: &Step) -> Result<(), Violation> {
        let client = self.client(step.on, thread);
        let s = client.stream_id();
        if state.captures.records(s)
            && let Some(result) = self.in_capture(state, client, s, &step.action)
        {
            return result;
        }
        match &step.action {
            &Action::Create { slot, len, fill } => {
                self.create(state, client, (slot, len, fill), false)
            }
            &Action::EmptyThenFill { slot, len, fill } => {
                self.create(state, client, (slot, len, fill), true)
            }
            &Action::Write {
                slot,
                offset,
                len,
                fill,
                clip,
            } => self.write_at(state, client, slot, (offset, len), fill, clip),
            Action::Launch(spec) => self.launch(state, client, s, spec, true).map(drop),
            &Action::Read { slot } => self.read(state, client, slot),
            &Action::ReadPair { a, b } => self.read_pair(state, client, a, b),
            Action::CreateTensors { slot, shapes, fill } => {
                self.create_tensors(state, client, *slot, shapes, *fill)
            }
            Action::ReadTensors { slot, view } => {
                self.read_tensors(state, client, *slot, view.as_ref())
            }
            &Action::ReadLazy { slot } => self.read_lazy(state, client, slot),
            Action::Materialize => self.materialize(state),
            Action::Profile(spec) => self.profile(state, client, spec),
            Action::DryRun(spec) => {
                state.hit(Method::DryRun, s, Arg::Any, &[]);
                lockstep::dry_run(|| self.launch(state, client, s, spec, false)).map(drop)
            }
            &Action::Release { slot } => {
                release(state, slot);
                Ok(())
            }
            &Action::ReleaseTensors { slot } => {
                release_tensors(state, slot);
                Ok(())
            }
            Action::Flush => blocking(state, client, false),
            Action::Sync => blocking(state, client, true),
            Action::SyncAll => sync_all(state, client),
            &Action::Overrun { slot, past_end } => self.overrun(state, client, slot, past_end),
            Action::BeginCapture { launches } => self.begin_capture(state, client, s, launches),
            Action::EndCapture => self.end_capture(state),
            &Action::CaptureOutOfOrder { prepare } => {
                self.capture_out_of_order(state, client, s, prepare)
            }
            &Action::Oversized { tensors, below } => self.oversized(state, client, tensors, below),
            &Action::LaunchView {
                kernel,
                group,
                index,
                src,
                k,
            } => self.launch_view(state, client, (kernel, k), group, index, src),
            Action::Replay => {
                self.replay(state);
                Ok(())
            }
            Action::DropGraph => {
                drop_graph(state);
                Ok(())
            }
            &Action::AllReduce { slot, op, fill } => {
                self.all_reduce(state, client, s, slot, op, fill)
            }
            &Action::ToPeer { slot, peer } => self.slot_to_peer(state, client, slot, peer),
            &Action::ViewToPeer { group, index, peer } => {
                self.view_to_peer(state, client, (group, index), peer)
            }
            &Action::FromPeer {
                slot,
                peer,
                len,
                fill,
            } => self.copy_from_peer(state, client, slot, peer, len, fill),
            Action::Install => self.install(state, client),
            Action::Cleanup => {
                state.hit(Method::MemoryCleanup, s, Arg::Any, &[]);
                client.memory_cleanup();
                Ok(())
            }
            Action::Usage => usage(state, client),
            Action::Prepare => graph_prepare(state, client),
            Action::Edge(call) => self.edge(state, client, s, call),
            &Action::Exclusive { slot, inside } => self.exclusive(state, client, slot, inside),
        }
    }

    /// `write_at` of `len` elements at element `offset`, both clipped to the slot's buffer if
    /// `clip` (a buffer of no elements takes a write of none), else as drawn: a range past the
    /// buffer's end, or whose end overflows `u64`, must be refused as out of range.
    #[allow(clippy::too_many_arguments)]
    fn write_at(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        (offset, len): (usize, usize),
        fill: u64,
        clip: bool,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = &state.slots[slot] else {
            return Ok(());
        };
        let (handle, buf) = (handle.clone(), *buf);
        let n = state.model.len(buf);
        let s = client.stream_id();
        let (offset, len) = match clip {
            true => clipped(offset, len, n),
            false => {
                state.number(Number::WriteOffset, offset as u64);
                state.number(Number::WriteLen, len as u64);
                (offset, len)
            }
        };
        let values = self.fills.data(fill, len);
        let range = write_range(offset, len, n);
        let arg = match (&range, values.len()) {
            (Err(_), _) => Arg::OutOfRange,
            (Ok(_), 0) => Arg::Empty,
            (Ok(_), 1) => Arg::One,
            (Ok(_), _) => Arg::Ordinary,
        };
        let on = if matches!(arg, Arg::Empty | Arg::OutOfRange) {
            &[][..]
        } else {
            &[buf][..]
        };
        state.hit(Method::WriteAt, s, arg, on);
        let result = client.write_at(&handle, offset as u64 * 4, Bytes::from_elems(&values));
        match (range, result) {
            (Ok(_), Ok(())) => {
                if !values.is_empty() {
                    state.model.write(s, buf, offset, &values);
                }
                Ok(())
            }
            (Err(expected), Err(got)) if got == expected => Ok(()),
            (Ok(_), Err(e)) => Err(Violation::refused(
                Method::WriteAt,
                Side::Explored,
                "write_at",
                e,
            )),
            (Err(expected), got) => Err(Violation::new(
                Check::WrongRefusal {
                    call: Method::WriteAt,
                    got: got.as_ref().err().map(|_| ErrorKind::Io),
                },
                format!("write_at past the end: expected {expected:?}, got {got:?}"),
            )),
        }
    }

    /// `create_tensors` of `shapes`, packed into one allocation, into tensor slot `slot`; a
    /// group with a shape too large for its data to be made is refused ([`tensors_refusal`]).
    fn create_tensors(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        shapes: &[Vec<usize>],
        fill: u64,
    ) -> Result<(), Violation> {
        state.number(Number::TensorCount, shapes.len() as u64);
        for shape in shapes {
            state.number(Number::TensorRank, shape.len() as u64);
            for &dim in shape {
                state.number(Number::TensorDim, dim as u64);
            }
        }
        let refusal = tensors_refusal(shapes);
        let tensors: Vec<(Vec<usize>, Drawn)> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                // A shape whose data cannot be made is given none: it is refused.
                let len = tensor_elems(shape).unwrap_or(0);
                (
                    shape.clone(),
                    self.fills.data(fill.wrapping_add(i as u64), len),
                )
            })
            .collect();
        let request = tensors
            .iter()
            .enumerate()
            .map(|(i, (shape, values))| {
                (
                    MemoryLayoutDescriptor::new(tensor_strategy(i), shape.clone(), 4),
                    Bytes::from_elems(values),
                )
            })
            .collect();
        let s = client.stream_id();
        let arg = match (&refusal, shapes.len()) {
            (Some(_), _) => Arg::Overflowing,
            (None, 0) => Arg::Empty,
            (None, _) => Arg::Ordinary,
        };
        state.hit(Method::CreateTensors, s, arg, &[]);
        let result = client.create_tensors(request);
        if let Some(expected) = refusal {
            return match result {
                Err(ServerError::Io(got)) if expected.matches(&got) => Ok(()),
                Err(ServerError::DeviceLost { .. }) => {
                    state.model.lost = true;
                    Ok(())
                }
                other => Err(Violation::new(
                    Check::WrongRefusal {
                        call: Method::CreateTensors,
                        got: ErrorKind::of_result(&other.map(drop)),
                    },
                    format!("create_tensors of shapes {shapes:?}: expected {expected:?}"),
                )),
            };
        }
        match result {
            Ok(layouts) => {
                allocated(state, Method::CreateTensors)?;
                let group = layouts
                    .into_iter()
                    .zip(tensors)
                    .map(|(layout, (shape, values))| {
                        let buf = state.model.create(s, values);
                        state.reach.created(buf, s);
                        (layout, shape, buf)
                    })
                    .collect();
                state.tensors[slot] = Some(group);
                Ok(())
            }
            Err(err) => self.refused(state, (Method::CreateTensors, err), false),
        }
    }

    /// `read_tensor` of every tensor of the group in tensor slot `slot`, and of `view` of the
    /// dense one it names ([`view_target`](crate::workload::view_target), whose values are
    /// its memory), if any: refused at the call where the view is, else each tensor's values
    /// and the view's gathered from the model.
    fn read_tensors(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        view: Option<&View>,
    ) -> Result<(), Violation> {
        let Some(group) = &state.tensors[slot] else {
            return Ok(());
        };
        let mut descriptors = descriptors(group);
        let bufs: Vec<u64> = group.iter().map(|(_, _, b)| *b).collect();
        let arg = match bufs.len() {
            0 => Arg::Empty,
            1 => Arg::Ordinary,
            _ => Arg::View,
        };
        let viewed = view.and_then(|v| {
            let (_, (layout, _, buf)) = state.view(slot, v.index)?;
            Some((v, layout.memory.clone(), *buf))
        });
        let s = client.stream_id();
        if let Some((view, handle, buf)) = &viewed {
            for &dim in &view.shape {
                state.number(Number::ViewDim, dim as u64);
            }
            for &stride in &view.strides {
                state.number(Number::ViewStride, stride as u64);
            }
            let (shape, strides) = (view.shape.clone(), view.strides.clone());
            descriptors.push(CopyDescriptor::new(handle.clone(), shape, strides, 4));
            if let Some(refusal) = view.refusal(state.model.len(*buf) as u64 * 4) {
                state.hit(Method::ReadTensorAsync, s, Arg::OutOfRange, &[]);
                let result = block_on(client.read_tensor_async(descriptors));
                return judge_view_refusal(view, refusal, result.map(drop));
            }
        }
        state.hit(Method::ReadTensorAsync, s, arg, &bufs);
        let result = block_on(client.read_tensor_async(descriptors));
        let Some((view, _, buf)) = viewed else {
            let read = result.map(|r| bufs.into_iter().zip(r).collect());
            return judge_read(&mut state.model, (s, Method::ReadTensorAsync), read);
        };
        let mut gathered = None;
        let read = result.map(|mut r| {
            gathered = r.pop();
            bufs.into_iter().zip(r).collect()
        });
        judge_read(&mut state.model, (s, Method::ReadTensorAsync), read)?;
        match gathered {
            Some(bytes) => {
                let read = ReadOf::Stream {
                    call: Method::ReadTensorAsync,
                    stream: s,
                };
                (state.model).check_read_as(read, buf, Some(view), &words(&bytes))
            }
            None => Ok(()),
        }
    }

    /// A checked kernel that stores `past_end` elements past the slot's end: the stream must
    /// report that `KernelFault` at its next blocking call.
    fn overrun(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        past_end: u32,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = state.in_slot(slot) else {
            return Ok(());
        };
        state.number(Number::OverrunPastEnd, past_end.into());
        state.hit(Method::Launch, client.stream_id(), Arg::Ordinary, &[buf]);
        let args = KernelArguments::new()
            .binding(&handle)
            .param(Scalar::U32(past_end));
        client
            .launch(&self.overrun, CubeCount::Static(1, 1, 1), args)
            .map_err(|e| {
                let what = "overrun refused at the call";
                Violation::refused(Method::Launch, Side::Explored, what, e)
            })?;
        let index = state.model.len(buf) as u32 + past_end;
        state.model.expect_fault(
            client.stream_id(),
            ServerError::KernelFault {
                kernel: "overrun".to_owned(),
                binding: 0,
                index,
                stream: client.stream_id(),
            },
        );
        Ok(())
    }

    /// A launch of `(kernel, k)` whose destination is a tensor of the group in tensor slot
    /// `group` (see [`view_target`](crate::workload::view_target)), at a non-zero offset
    /// unless it is the first.
    fn launch_view(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        (kernel, k): (usize, u32),
        group: usize,
        index: usize,
        src: usize,
    ) -> Result<(), Violation> {
        let (Some((i, (layout, shape, dst_buf))), Some((src, src_buf))) =
            (state.view(group, index), &state.slots[src])
        else {
            return Ok(());
        };
        if state.model.len(*src_buf) == 0 {
            return Ok(());
        }
        if layout.strides != contiguous_strides(shape) {
            return Err(Violation::new(
                Check::NotDense,
                format!(
                    "tensor {i} of shape {shape:?}, requested dense, has strides {:?}",
                    layout.strides
                ),
            ));
        }
        let dst = (layout.memory.clone(), *dst_buf);
        let src = (src.clone(), *src_buf);
        let s = client.stream_id();
        state.hit(Method::Launch, s, Arg::View, &[dst.1, src.1]);
        let spec = (kernel, k, LaunchCount::Covering);
        self.launch_on(state, client, s, spec, dst, src, true)
            .map(drop)
    }

    /// `to_client` of the slot to peer `peer`, read back there.
    fn slot_to_peer(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        peer: usize,
    ) -> Result<(), Violation> {
        match state.in_slot(slot) {
            Some(source) => self.to_peer(state, client, (source, Arg::Ordinary), peer),
            None => Ok(()),
        }
    }

    /// `to_client` of a dense tensor of group `group` (chosen by `index`, see
    /// [`view_target`](crate::workload::view_target)) to peer `peer`, read back there: a view
    /// at its offset in the group's allocation, copied as the bytes it views.
    fn view_to_peer(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        (group, index): (usize, usize),
        peer: usize,
    ) -> Result<(), Violation> {
        let Some((_, (layout, _, buf))) = state.view(group, index) else {
            return Ok(());
        };
        let source = (layout.memory.clone(), *buf);
        self.to_peer(state, client, (source, Arg::View), peer)
    }

    /// `to_client` of `handle` (holding model buffer `buf`, of argument class `arg`) to peer
    /// `peer`, read back there.
    fn to_peer(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        ((handle, buf), arg): ((Handle, u64), Arg),
        peer: usize,
    ) -> Result<(), Violation> {
        let peer = &self.peers[peer];
        let s = client.stream_id();
        state.hit(Method::ToClient, s, arg, &[buf]);
        let copied = client.to_client(handle, peer, ElemType::U32);
        // A copy of no bytes takes the read-then-write path (a peer copy moves some bytes):
        // the read waits for the stream and returns its pending failure.
        if state.model.len(buf) == 0 {
            let result = copied.as_ref().map(drop);
            state
                .model
                .blocking(s, Method::ToClient, result, true)
                .map_err(|why| why.context("to_client of no bytes"))?;
        }
        let copy = match copied {
            Ok(copy) => copy,
            Err(_) if state.model.len(buf) == 0 => return Ok(()),
            Err(ServerError::DeviceLost { .. }) => {
                state.model.lost = true;
                return Ok(());
            }
            Err(e) if refused_after_loss(&state.model, &e) => return Ok(()),
            Err(e) => {
                return Err(Violation::refused(
                    Method::ToClient,
                    Side::Explored,
                    "to_client",
                    e,
                ));
            }
        };
        // A send the explored device never made (lost after the call) times the receive out.
        let read = match peer.read_one(copy) {
            Ok(read) => read,
            Err(e) if self.peer_timed_out(state, client, &e) => return Ok(()),
            Err(e) => {
                let what = format!("read on peer {}", peer.peer_id());
                return Err(Violation::refused(Method::ReadOne, Side::Peer, what, e));
            }
        };
        state.model.check_read(ReadOf::Peer, buf, &words(&read))
    }

    /// `to_client` of a fresh buffer of peer `peer` into `slot`.
    fn copy_from_peer(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        peer: usize,
        len: usize,
        fill: u64,
    ) -> Result<(), Violation> {
        state.number(Number::ToClientLen, len as u64);
        let values = self.fills.data(fill, len);
        let peer = &self.peers[peer];
        let src = peer
            .create(Bytes::from_elems(&values))
            .map_err(|e| create_on_peer(peer, e))?;
        let s = client.stream_id();
        state.hit(Method::ToClientInto, s, Arg::Ordinary, &[]);
        match peer.to_client(src, client, ElemType::U32) {
            Ok(handle) => {
                state.keep(s, slot, handle, values);
                Ok(())
            }
            Err(err) => self
                .refused(state, (Method::ToClientInto, err), false)
                .map_err(|why| why.context("to_client from a peer")),
        }
    }

    /// Profiling (`call`: `profile` or the duration's resolution) refuses only what every call
    /// refuses (a lost device) and returns the stream's pending failures; anything else is
    /// wrong.
    fn profile_failed(
        &self,
        state: &mut State<D>,
        (s, call): (StreamId, Method),
        err: ProfileError,
    ) -> Result<(), Violation> {
        match err {
            ProfileError::Server { source, .. } => state
                .model
                .blocking(s, call, Err(&source), false)
                .map_err(|why| why.context("profile")),
            other => Err(Violation::refused(call, Side::Explored, "profile", other)),
        }
    }

    /// Launches `spec` on `s`; with `model`, applies it to the model too (without, the launch is
    /// being captured). Returns the model buffers it launched on, if it did.
    fn launch(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        spec: &LaunchSpec,
        model: bool,
    ) -> Result<Option<(u64, u64)>, Violation> {
        let (Some((dst, dst_buf)), Some((src, src_buf))) =
            (state.slots[spec.dst].clone(), state.slots[spec.src].clone())
        else {
            return Ok(None);
        };
        // A formula gathers from its source: one of no elements is never launched on (the
        // model has nothing to gather; the checked kernel would fault).
        if state.model.len(src_buf) == 0 {
            return Ok(None);
        }
        if spec.dst == spec.src {
            state.hit(Method::Launch, s, Arg::Aliased, &[]);
            let args = KernelArguments::new()
                .binding(&dst)
                .binding(&src)
                .param(Scalar::U32(spec.k));
            let formula = &self.world.kernels[spec.kernel];
            let count = CubeCount::Static(formula.workgroups(state.model.len(dst_buf)), 1, 1);
            return match client.launch(&self.kernels[spec.kernel], count, args) {
                Err(IoError::InvalidLaunch { .. }) => Ok(None),
                other => Err(Violation::new(
                    Check::WrongRefusal {
                        call: Method::Launch,
                        got: other.as_ref().err().map(|_| ErrorKind::Io),
                    },
                    format!(
                        "a launch binding one handle twice, once writable, must be refused; got {other:?}"
                    ),
                )),
            };
        }
        state.hit(Method::Launch, s, Arg::Ordinary, &[dst_buf, src_buf]);
        let (dst, src) = ((dst, dst_buf), (src, src_buf));
        let spec = (spec.kernel, spec.k, spec.count);
        self.launch_on(state, client, s, spec, dst, src, model)
    }

    /// Launches kernel `kernel` with parameter `k` on two handles of distinct allocations (and
    /// their model buffers), over `count`; with `model`, applies it to the model too. Returns
    /// the model buffers if the kernel ran: a count with a zero axis runs nothing, a static one
    /// past the device's maximum must be refused, a dynamic one runs nothing.
    #[allow(clippy::too_many_arguments)]
    fn launch_on(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        (kernel, k, count): (usize, u32, LaunchCount),
        (dst, dst_buf): (Handle, u64),
        (src, src_buf): (Handle, u64),
        model: bool,
    ) -> Result<Option<(u64, u64)>, Violation> {
        let args = KernelArguments::new()
            .binding(&dst)
            .binding(&src)
            .param(Scalar::U32(k));
        let dst_len = state.model.len(dst_buf);
        let formula = &self.world.kernels[kernel];
        let [x, y, z] = count.workgroups(dst_len, formula);
        let (number, cube_count) = match count {
            LaunchCount::Dynamic(axes) => {
                // Written on this stream, so the launch reads it after the write.
                match client.create(Bytes::from_elems(&axes)) {
                    Ok(handle) => (Number::DynamicWorkgroups, CubeCount::Dynamic(handle)),
                    Err(e) => {
                        return self
                            .refused(state, (Method::Create, e), false)
                            .map(|()| None);
                    }
                }
            }
            _ => (Number::LaunchWorkgroups, CubeCount::Static(x, y, z)),
        };
        for axis in [x, y, z] {
            state.number(number, axis.into());
        }
        let result = client.launch(&self.kernels[kernel], cube_count, args);
        let covers = match (
            count.launched(dst_len, formula, client.properties().max_workgroups),
            result,
        ) {
            (Launched::Refused, Err(IoError::InvalidLaunch { .. })) => return Ok(None),
            (Launched::Refused, other) => {
                return Err(Violation::new(
                    Check::WrongRefusal {
                        call: Method::Launch,
                        got: other.as_ref().err().map(|_| ErrorKind::Io),
                    },
                    format!(
                        "a launch of {:?} workgroups, past the device's maximum, must be refused; got {other:?}",
                        [x, y, z]
                    ),
                ));
            }
            (_, Err(e)) => {
                return Err(Violation::refused(
                    Method::Launch,
                    Side::Explored,
                    "launch refused",
                    e,
                ));
            }
            (Launched::Nothing, Ok(())) => return Ok(None),
            (Launched::Covers(n), Ok(())) => n,
        };
        if model {
            state.model.launch(s, dst_buf, src_buf, |d, s| {
                formula.apply(&mut d[..covers], s, k)
            });
        }
        Ok(Some((dst_buf, src_buf)))
    }

    /// An in-place all-reduce of `slot` with a fresh buffer on every peer; each peer's result
    /// is read back and the explored device's model takes the reduction.
    fn all_reduce(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        slot: usize,
        op: ReduceOperation,
        fill: u64,
    ) -> Result<(), Violation> {
        let Some((handle, buf)) = state.in_slot(slot) else {
            return Ok(());
        };
        state.hit(Method::AllReduce, s, Arg::Ordinary, &[buf]);
        let devices: Vec<DeviceId> = std::iter::once(client.peer_id())
            .chain(self.peers.iter().map(ComputeClient::peer_id))
            .collect();
        let reduce = |c: &ComputeClient<D>, h: &Handle, on: Side| {
            c.all_reduce(h.clone(), h.clone(), ElemType::U32, devices.clone(), op)
                .map_err(|e| {
                    let what = format!("all_reduce on {}", c.peer_id());
                    Violation::refused(Method::AllReduce, on, what, e)
                })
        };
        // Every part is enqueued before anything waits: a wait would block on the parts after.
        // A lost device joins nothing: its peers' parts time out waiting for it.
        let joined =
            match client.all_reduce(handle.clone(), handle, ElemType::U32, devices.clone(), op) {
                Ok(()) => true,
                Err(ServerError::DeviceLost { .. }) => {
                    state.model.lost = true;
                    false
                }
                Err(e) => {
                    let what = format!("all_reduce on {}", client.peer_id());
                    return Err(Violation::refused(
                        Method::AllReduce,
                        Side::Explored,
                        what,
                        e,
                    ));
                }
            };
        let len = state.model.len(buf);
        let mut expected = state.model.values(buf).to_vec();
        let mut parts = Vec::with_capacity(self.peers.len());
        for (k, peer) in self.peers.iter().enumerate() {
            let values = self.fills.data(fill.wrapping_add(k as u64), len);
            let part = peer
                .create(Bytes::from_elems(&values))
                .map_err(|e| create_on_peer(peer, e))?;
            reduce(peer, &part, Side::Peer)?;
            for (e, v) in expected.iter_mut().zip(values.iter()) {
                *e = match op {
                    ReduceOperation::Sum => e.wrapping_add(*v),
                    ReduceOperation::Min => (*e).min(*v),
                    ReduceOperation::Max => (*e).max(*v),
                    other => unreachable!("{other:?} is never drawn"),
                };
            }
            parts.push(part);
        }
        for (peer, part) in self.peers.iter().zip(parts) {
            let read = match (peer.read_one(part), joined) {
                (Ok(read), true) => read,
                (Err(e), _) if self.peer_timed_out(state, client, &e) => continue,
                (Ok(_), false) => {
                    return Err(Violation::new(
                        Check::WrongReduction(op),
                        format!(
                            "all_reduce ({op:?}) on peer {} completed without the explored device, which was lost",
                            peer.peer_id()
                        ),
                    ));
                }
                (Err(e), _) => {
                    let what = format!("read of the all-reduce on peer {}", peer.peer_id());
                    return Err(Violation::refused(Method::ReadOne, Side::Peer, what, e));
                }
            };
            if *words(&read) != *expected {
                return Err(Violation::new(
                    Check::WrongReduction(op),
                    format!(
                        "all_reduce ({op:?}) on peer {} differs from the reference",
                        peer.peer_id()
                    ),
                ));
            }
        }
        if joined {
            (state.model).launch(s, buf, buf, |d, _| d.copy_from_slice(&expected));
        }
        Ok(())
    }

    /// Whether `err`, returned to a peer, is its wait for the explored device timing out, in
    /// a world that may lose that device: counted, for the run's end to check that it was.
    fn peer_timed_out(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        err: &ServerError,
    ) -> bool {
        let lost = (self.world.faults.device_loss > 0.0).then(|| client.peer_id());
        let timed_out = timed_out_waiting(err, lost);
        state.model.peer_timeouts += u64::from(timed_out);
        timed_out
    }

    /// `graph_prepare`, a warm-up run of `launches`, then `start_capture` and their capture; the
    /// capture stays open until [`Action::EndCapture`].
    fn begin_capture(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        launches: &[LaunchSpec],
    ) -> Result<(), Violation> {
        let launches = capture_launches(launches, |slot| state.slots[slot].is_some());
        if !may_capture(&state.graphs, &state.captures, s) || launches.is_empty() {
            return Ok(());
        }
        // start_capture may write the stream's fault record, whose failure surfaces later,
        // even when no launch of the window runs.
        state.model.uses(s);
        state.hit(Method::GraphPrepare, s, Arg::Any, &[]);
        if !capture_call(state, s, Method::GraphPrepare, client.graph_prepare())? {
            return Ok(());
        }
        state.captures.prepared.insert(s);
        for l in &launches {
            self.launch(state, client, s, l, true)?;
        }
        state.hit(Method::StartCapture, s, Arg::Any, &[]);
        if !capture_call(state, s, Method::StartCapture, client.start_capture())? {
            return Ok(());
        }
        state.captures.prepared.remove(&s);
        state.captures.open = Some(OpenCapture {
            stream: s,
            launches: Vec::new(),
            refused_write: false,
        });
        for l in &launches {
            if let Some((dst, src)) = self.launch(state, client, s, l, false)? {
                let open = state.captures.open.as_mut().expect("a capture is open");
                open.launches.push((l.kernel, dst, src, l.k));
            }
        }
        Ok(())
    }

    /// `stop_capture` of the open capture: the world's graph, or the refusal of a window that
    /// held a write.
    fn end_capture(&self, state: &mut State<D>) -> Result<(), Violation> {
        if let Some(stream) = state.captures.open.as_ref().map(|open| open.stream) {
            state.hit(Method::StopCapture, stream, Arg::Any, &[]);
        }
        let Some(open) = state.captures.open.take() else {
            return Ok(());
        };
        let mut client = self.base.clone();
        client.set_stream(open.stream);
        match client.stop_capture() {
            Ok(graph) if !open.refused_write => {
                state.graphs.push(Captured {
                    graph,
                    launches: open.launches,
                });
                Ok(())
            }
            Ok(_) => Err(Violation::new(
                Check::WrongRefusal {
                    call: Method::StopCapture,
                    got: None,
                },
                "stop_capture accepted a window that held a write",
            )
            .on(open.stream)),
            Err(err) if open.refused_write => {
                let refusal = CaptureError::WriteInCapture {
                    stream: open.stream,
                };
                let call = (Method::StopCapture, "stop_capture");
                expect_refusal(state, call, Err(err), refusal)
            }
            Err(err) => state
                .model
                .blocking(open.stream, Method::StopCapture, Err(&err), false)
                .map_err(|why| why.context("stop_capture")),
        }
    }

    /// A step on the stream the open capture records, judged by [`in_capture`]: launches are
    /// recorded, a write is refused late (by `stop_capture`), reads, flushes and syncs are
    /// refused at once. Steps that leave the stream alone act as usual (`None`).
    fn in_capture(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        action: &Action,
    ) -> Option<Result<(), Violation>> {
        let slot = |state: &State<D>, slot: usize| state.slots[slot].clone();
        Some(match in_capture(action) {
            InCapture::Recorded(spec) => {
                self.launch(state, client, s, spec, false).map(|launched| {
                    let open = state.captures.open.as_mut().expect("a capture is open");
                    if let Some((dst, src)) = launched {
                        open.launches.push((spec.kernel, dst, src, spec.k));
                    }
                })
            }
            InCapture::WrittenInWindow { slot: i } => match slot(state, i) {
                // A buffer of no elements takes no element.
                Some((_, buf)) if state.model.len(buf) == 0 => Ok(()),
                Some((handle, buf)) => {
                    state.hit(Method::WriteAt, s, Arg::One, &[buf]);
                    client
                        .write_at(&handle, 0, Bytes::from_elems(&[0u32]))
                        .map(|()| {
                            let open = state.captures.open.as_mut().expect("a capture is open");
                            open.refused_write = true;
                        })
                        .map_err(|e| {
                            Violation::refused(Method::WriteAt, Side::Explored, "write", e)
                        })
                }
                None => Ok(()),
            },
            InCapture::Refused(call) => {
                let result = match call {
                    Refused::Read { slot: i } => match slot(state, i) {
                        Some((handle, buf)) => {
                            state.hit(Method::ReadOne, s, Arg::Ordinary, &[buf]);
                            client.read_one(handle).map(drop)
                        }
                        None => return Some(Ok(())),
                    },
                    Refused::Flush => {
                        state.hit(Method::Flush, s, Arg::Any, &[]);
                        client.flush()
                    }
                    Refused::Sync => {
                        state.hit(Method::Sync, s, Arg::Any, &[]);
                        client.sync()
                    }
                    Refused::Prepare => {
                        state.hit(Method::GraphPrepare, s, Arg::Any, &[]);
                        client.graph_prepare()
                    }
                };
                let what = (call.method(), call.operation());
                expect_refusal(state, what, result, call.expected(s))
            }
            InCapture::AsUsual | InCapture::OwnRules => return None,
            InCapture::Skipped => Ok(()),
        })
    }

    /// `stop_capture` on a stream that is not capturing, then `start_capture` (after
    /// `graph_prepare` if `prepare`): each refused or accepted exactly as the stream's state
    /// says, so a refusal that changed the state is caught by the next call.
    fn capture_out_of_order(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        s: StreamId,
        prepare: bool,
    ) -> Result<(), Violation> {
        // start_capture may write the stream's fault record, whose failure surfaces later.
        state.model.uses(s);
        if prepare {
            state.hit(Method::GraphPrepare, s, Arg::Any, &[]);
            if !capture_call(state, s, Method::GraphPrepare, client.graph_prepare())? {
                return Ok(());
            }
            state.captures.prepared.insert(s);
        }
        state.hit(Method::StopCapture, s, Arg::Any, &[]);
        let stopped = client.stop_capture().map(drop);
        let refusal = CaptureError::NotCapturing { stream: s };
        let call = (Method::StopCapture, "stop_capture without a capture");
        expect_refusal(state, call, stopped, refusal)?;
        state.hit(Method::StartCapture, s, Arg::Any, &[]);
        if !state.captures.prepared.contains(&s) {
            let refusal = CaptureError::NotPrepared { stream: s };
            let started = client.start_capture();
            let call = (Method::StartCapture, "start_capture unprepared");
            return expect_refusal(state, call, started, refusal);
        }
        if !capture_call(state, s, Method::StartCapture, client.start_capture())? {
            return Ok(());
        }
        state.captures.prepared.remove(&s);
        match client.stop_capture() {
            Ok(_) => Ok(()),
            Err(err) => state
                .model
                .blocking(s, Method::StopCapture, Err(&err), false)
                .map_err(|why| why.context("stop_capture of an empty capture")),
        }
    }

    /// An allocation no device serves ([`OversizedRequest`]): it must be refused as out of
    /// memory.
    fn oversized(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        tensors: bool,
        below: usize,
    ) -> Result<(), Violation> {
        let method = if tensors {
            Method::EmptyTensors
        } else {
            Method::Empty
        };
        state.number(Number::OversizedBelow, below as u64);
        state.hit(method, client.stream_id(), Arg::Overflowing, &[]);
        let result = match OversizedRequest::of(tensors, below) {
            OversizedRequest::Tensors(sizes) => {
                let tensor = |bytes| {
                    MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![bytes], 1)
                };
                client.empty_tensors(sizes.map(tensor).to_vec()).map(drop)
            }
            OversizedRequest::Empty(bytes) => client.empty(bytes).map(drop),
        };
        match result {
            Ok(()) => Err(Violation::new(
                Check::WrongRefusal {
                    call: method,
                    got: None,
                },
                format!(
                    "an allocation of about 2^64 - {below} bytes (tensors: {tensors}) was served"
                ),
            )),
            Err(err) => self.refused(state, (method, err), true),
        }
    }
}

/// The elements of a tensor of `shape` whose data the driver makes: `None` when its size in
/// bytes overflows or it is too large for host data ([`MAX_ELEMS`]).
pub(super) fn tensor_elems(shape: &[usize]) -> Option<usize> {
    elems(shape).filter(|&elems| elems <= MAX_ELEMS)
}

/// The elements of a tensor of `shape`: none with a dimension of zero, whatever the others;
/// `None` where they overflow `usize`.
pub(crate) fn elems(shape: &[usize]) -> Option<usize> {
    match shape.contains(&0) {
        true => Some(0),
        false => shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)),
    }
}

/// How `create_tensors` must refuse a group of `shapes` of `u32`s, checked in the runtime's
/// order: a shape whose size in bytes overflows first, then data that is not its shape's size
/// (the driver gives none to a shape too large for host data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TensorsRefusal {
    /// `IoError::InvalidLayout`, for the shape's size.
    Layout,
    /// `IoError::SizeMismatch` of tensor data: the shape's bytes, none given.
    Size { expected: u64 },
}

impl TensorsRefusal {
    /// Whether `got` is this refusal.
    pub fn matches(&self, got: &IoError) -> bool {
        match (self, got) {
            (TensorsRefusal::Layout, IoError::InvalidLayout { .. }) => true,
            (TensorsRefusal::Size { expected }, IoError::SizeMismatch { .. }) => {
                *got == IoError::SizeMismatch {
                    what: "tensor data",
                    expected: *expected,
                    actual: 0,
                }
            }
            _ => false,
        }
    }
}

/// How `create_tensors` of `shapes` must be refused, if it must.
pub(super) fn tensors_refusal(shapes: &[Vec<usize>]) -> Option<TensorsRefusal> {
    let bytes = |shape: &Vec<usize>| elems(shape).and_then(|elems| elems.checked_mul(4));
    if shapes.iter().any(|shape| bytes(shape).is_none()) {
        return Some(TensorsRefusal::Layout);
    }
    let too_large = shapes.iter().find(|shape| tensor_elems(shape).is_none())?;
    let expected = bytes(too_large).expect("checked above") as u64;
    Some(TensorsRefusal::Size { expected })
}

/// A clipped write's element offset and length in a buffer of `n` elements: the offset modulo
/// the buffer, the length up to its end (none in a buffer of none).
pub(super) fn clipped(offset: usize, len: usize, n: usize) -> (usize, usize) {
    match n {
        0 => (0, 0),
        n => (offset % n, len.min(n - offset % n)),
    }
}

/// What `write_at` of `len` elements at element `offset` of a buffer of `n` elements must
/// return: `Ok` with the range's byte end, or the refusal of a range past the end (whose end
/// may overflow `u64`).
pub(super) fn write_range(offset: usize, len: usize, n: usize) -> Result<u64, IoError> {
    let (offset, len, size) = (offset as u64 * 4, len as u64 * 4, n as u64 * 4);
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(end),
        _ => Err(IoError::OutOfRange { offset, len, size }),
    }
}

/// The descriptors that read back every tensor of `group`, in its order.
fn descriptors(group: &[Tensor]) -> Vec<CopyDescriptor> {
    group
        .iter()
        .map(|(layout, shape, _)| {
            CopyDescriptor::new(
                layout.memory.clone(),
                shape.clone(),
                layout.strides.clone(),
                4,
            )
        })
        .collect()
}

/// Judges a tensor read refused at the call for `view`, as `refusal` says it must be.
fn judge_view_refusal(
    view: &View,
    refusal: ViewRefusal,
    result: Result<(), ServerError>,
) -> Result<(), Violation> {
    match (refusal, &result) {
        (ViewRefusal::Layout, Err(ServerError::Io(IoError::InvalidLayout { .. })))
        | (ViewRefusal::Range, Err(ServerError::Io(IoError::OutOfRange { .. }))) => Ok(()),
        _ => Err(Violation::new(
            Check::WrongRefusal {
                call: Method::ReadTensorAsync,
                got: ErrorKind::of_result(&result),
            },
            format!(
                "a read of the view of shape {:?} and strides {:?} must be refused ({refusal:?}); got {result:?}",
                view.shape, view.strides
            ),
        )),
    }
}

/// Judges the result of `call`, a read on `s`: the stream's errors first, then every buffer's
/// bytes against `model`.
fn judge_read(
    model: &mut Model,
    (s, call): (StreamId, Method),
    result: Result<Vec<(u64, Bytes)>, ServerError>,
) -> Result<(), Violation> {
    match result {
        Ok(read) => {
            model.blocking(s, call, Ok(()), true)?;
            for (buf, bytes) in read {
                let read = ReadOf::Stream { call, stream: s };
                model.check_read(read, buf, &words(&bytes))?;
            }
            Ok(())
        }
        Err(err) => model.blocking(s, call, Err(&err), true),
    }
}

/// `bytes` as `u32`s, as [`Bytes::to_elems`] gives them: borrowed where they are aligned (a
/// read's pooled block is), copied otherwise (a copy of every read was 0.6% of the explorer's
/// instructions).
fn words(bytes: &Bytes) -> Cow<'_, [u32]> {
    match bytemuck::try_cast_slice(bytes) {
        Ok(words) => Cow::Borrowed(words),
        Err(_) => Cow::Owned(bytes.to_elems()),
    }
}

/// A capture call (`call`, on `s`) that may return the stream's pending failures, as flush
/// does; the capture is then abandoned. Returns whether it succeeded.
fn capture_call<D: Device>(
    state: &mut State<D>,
    s: StreamId,
    call: Method,
    result: Result<(), ServerError>,
) -> Result<bool, Violation> {
    match result {
        Ok(()) => Ok(true),
        Err(err) => state
            .model
            .blocking(s, call, Err(&err), false)
            .map(|()| false)
            .map_err(|why| why.context(call.name())),
    }
}

/// A call (its method, and what the message calls it) that must be refused with exactly
/// `expected` (or fail on a lost device), changing nothing.
fn expect_refusal<D: Device>(
    state: &mut State<D>,
    (call, what): (Method, &str),
    result: Result<(), ServerError>,
    expected: CaptureError,
) -> Result<(), Violation> {
    match result {
        Err(ServerError::Capture(err)) if err == expected => Ok(()),
        Err(ServerError::DeviceLost { .. }) => {
            state.model.lost = true;
            Ok(())
        }
        other => {
            let got = ErrorKind::of_result(&other);
            let detail = format!("{what}: expected {expected}, got {other:?}");
            Err(Violation::new(Check::WrongRefusal { call, got }, detail))
        }
    }
}

/// Whether `err`, returned to a peer, is its wait for the explored device timing out (a
/// collective or copy the explored device never joined): legal once that device, `lost`, is
/// lost. `None` while it is not known lost.
fn timed_out_waiting(err: &ServerError, lost: Option<DeviceId>) -> bool {
    matches!(
        (err, lost),
        (
            ServerError::Collective {
                error: CollectiveError::PeerTimeout { peer, .. },
                ..
            },
            Some(lost),
        ) if *peer == lost
    )
}

/// Whether `err` is a capture's refusal on a device already lost: a `stop_capture` that
/// returned `DeviceLost` leaves its stream capturing, which a peer copy's check for capturing
/// streams may report first.
fn refused_after_loss(model: &Model, err: &ServerError) -> bool {
    model.lost && matches!(err, ServerError::Capture(CaptureError::Refused { .. }))
}

/// `create` on `peer`, which must succeed, failed with `err`.
fn create_on_peer<D: Device>(peer: &ComputeClient<D>, err: ServerError) -> Violation {
    let what = format!("create on peer {}", peer.peer_id());
    Violation::refused(Method::Create, Side::Peer, what, err)
}
