//! Several simulated devices and their collectives.
//!
//! A [`SimCluster`] builds N [`SimDevice`]s that share a [`Hub`]: the rendezvous where each
//! device leaves its part of a collective and picks up the others'. Each device runs on its own
//! actor thread, so the hub is the one place where threads meet.
//!
//! **Determinism.** Nothing a device computes or decides depends on which thread reached the hub
//! first:
//! - A collective executes like any operation of its stream, chosen by the device's own seeded
//!   scheduler; waiting at the hub blocks the thread but draws nothing. Whether a completion
//!   may be chosen depends on the kind of call (waiting or not), never on the peers' progress.
//! - Parts are matched by (communicator, kind, sequence), the sequence counted in the order the
//!   device enqueued its collectives, never by arrival order.
//! - An all-reduce folds the inputs in rank order (rank 0 first, then 1, …) with the IR's scalar
//!   semantics (`lockstep::kernel::semantics::binary`): `((x0 + x1) + x2) + x3` for a float
//!   sum; `Mean` divides that sum by the number of devices.
//! - Its virtual completion time is the latest arrival's virtual time plus the transfer cost;
//!   each device's arrival time is a function of its own seed and calls.
//! - A peer that will never arrive is known for certain, not guessed from a wall clock: it
//!   executed the collective with a scripted [`FaultKind::PeerAbsent`], or it is gone (dropped
//!   or lost; a device drops only after the runtime drained its streams, and a lost device
//!   executes nothing more). The waiting device then fails with `PeerTimeout` after
//!   [`COLLECTIVE_TIMEOUT_NS`] of virtual time. It waits until every rank has arrived or is
//!   gone, so which peer it names does not depend on timing either.
//!
//! **Progress.** A real GPU runs queued work without the host; the simulator runs work only in
//! device calls. So a collective is two operations on its stream (`ops::Phase`): its arrival
//! (read the source, leave the part at the hub, never wait) is run by the call that enqueued it,
//! so a peer never waits on a device nobody calls; its completion (wait for the peers, write
//! the destination) runs only inside a call that waits for the device (`synchronize`, a read),
//! never in background progress, so calls that do not wait on a GPU (allocating, writing,
//! flushing) do not wait for peers here either.
//!
//! **Not decidable, documented:** a live peer whose program has not yet enqueued its part
//! while the host waits for this device (a `sync` or read here before the peer's `all_reduce`
//! is submitted, or collectives of two communicators enqueued in opposite orders) is
//! indistinguishable from a late one without a wall clock: the wait blocks, as it does with
//! NCCL. On this device, such a wait may also run another stream's completion.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use lockstep::collective::CommunicatorId;
use lockstep::device::contract;
use lockstep::distributed::check_world_list;
use lockstep::kernel::{BinOp, ElemType, Scalar, semantics};
use lockstep::{CollectiveError, Device, DeviceError, DeviceId, ReduceOperation};

use super::{SimDevice, transfer_ns};
use crate::config::SimConfig;
use crate::fault::FaultKind;
use crate::interpreter::column;
use crate::memory::SanitizerReport;
use crate::ops::{CollectiveKind, CollectiveOp, Op, Phase, Range};

/// Virtual time a device waits for a peer that will never arrive before failing.
pub const COLLECTIVE_TIMEOUT_NS: u64 = 1_000_000_000;

/// The error of a wait for `op`'s rank `peer_rank`, which will never arrive.
fn peer_timeout(op: &CollectiveOp, peer_rank: u32) -> CollectiveError {
    CollectiveError::PeerTimeout {
        devices: devices_of(&op.peers),
        sequence: op.sequence,
        peer: device_id(op.peers[peer_rank as usize]),
        timeout_ns: COLLECTIVE_TIMEOUT_NS,
    }
}

/// N simulated devices that can run collectives together.
#[derive(Debug)]
pub struct SimCluster {
    devices: Vec<SimDevice>,
}

impl SimCluster {
    /// Builds `count` (at least 1) devices with ordinals `0..count`. Device `r` is configured
    /// as `config` with its seed mixed with `r` (device 0 keeps `config.seed`), so the devices
    /// do not all draw the same schedule.
    pub fn new(config: SimConfig, count: u32) -> Self {
        let configs = (0..count.max(1)).map(|ordinal| SimConfig {
            seed: config.seed ^ u64::from(ordinal).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ..config.clone()
        });
        Self::from_configs(configs.collect())
    }

    /// Builds one device per config (at least one), ordinal `r` from `configs[r]`: to give
    /// devices their own fault plans.
    ///
    /// # Panics
    /// If `configs` is empty.
    pub fn from_configs(configs: Vec<SimConfig>) -> Self {
        assert!(!configs.is_empty(), "a cluster has at least one device");
        let hub = Arc::new(Hub::default());
        let count = configs.len() as u32;
        let devices = configs
            .into_iter()
            .zip(0..)
            .map(|(config, ordinal)| {
                let mut device = SimDevice::new(config);
                device.cluster = ClusterMember::new(hub.clone(), ordinal, count);
                device
            })
            .collect();
        Self { devices }
    }

    /// The devices, by ordinal.
    pub fn devices(&self) -> &[SimDevice] {
        &self.devices
    }

    /// The devices, by ordinal, to wrap in clients.
    pub fn into_devices(self) -> Vec<SimDevice> {
        self.devices
    }
}

/// The devices of a world of simulated processes (`SimWorld`): one hub, shared by each
/// process's device, which names itself by the process's global rank. As on CUDA
/// (`CudaDevice::from_world_env`), `enumerate_devices` lists the world's ranks and the one
/// communicator is the world's, ranks `0..world_size` in order: another list is refused with
/// `CollectiveError::InvalidDevices` (`lockstep::distributed::check_world_list`).
#[derive(Clone, Debug)]
pub struct SimWorldDevices {
    hub: Arc<Hub>,
    world_size: u32,
}

impl SimWorldDevices {
    /// The hub of a world of `world_size` (at least 1) processes.
    pub fn new(world_size: u32) -> Self {
        Self {
            hub: Arc::new(Hub::default()),
            world_size: world_size.max(1),
        }
    }

    /// How many ranks the world has.
    pub fn world_size(&self) -> u32 {
        self.world_size
    }

    /// The device of global rank `rank`, configured by `config`; `None` for a rank outside
    /// the world.
    pub fn device(&self, rank: u32, config: SimConfig) -> Option<SimDevice> {
        if rank >= self.world_size {
            return None;
        }
        let mut device = SimDevice::new(config);
        device.cluster = ClusterMember::new(self.hub.clone(), rank, self.world_size);
        device.cluster.world = true;
        Some(device)
    }

    /// Rank `rank` will never open its device (its process died, or ended, first): its peers
    /// stop waiting for it, as for a device that was dropped.
    pub fn leave(&self, rank: u32) {
        self.hub.leave(rank);
    }
}

/// One device's place in its cluster, and its communicators.
#[derive(Debug)]
pub(super) struct ClusterMember {
    hub: Arc<Hub>,
    ordinal: u32,
    count: u32,
    /// A world's device (`SimWorldDevices`): only the world's list is a communicator.
    world: bool,
    communicators: BTreeMap<CommunicatorId, Communicator>,
    next_op: u64,
}

#[derive(Debug)]
struct Communicator {
    peers: Arc<[u32]>,
    rank: u32,
    reductions: u64,
    /// Sends to and receives from each peer rank so far.
    sends: BTreeMap<u32, u64>,
    recvs: BTreeMap<u32, u64>,
}

impl ClusterMember {
    /// A device alone in its cluster (what [`SimDevice::new`] builds).
    pub(super) fn alone() -> Self {
        Self::new(Arc::new(Hub::default()), 0, 1)
    }

    fn new(hub: Arc<Hub>, ordinal: u32, count: u32) -> Self {
        Self {
            hub,
            ordinal,
            count,
            world: false,
            communicators: BTreeMap::new(),
            next_op: 0,
        }
    }

    /// This device will execute nothing more: peers waiting for it stop waiting.
    pub(super) fn leave(&self) {
        self.hub.leave(self.ordinal);
    }
}

impl Drop for ClusterMember {
    fn drop(&mut self) {
        self.leave();
    }
}

/// What one device left at the hub for an all-reduce.
#[derive(Clone, Debug)]
enum Part {
    Data {
        /// Shared: every rank's device takes every part (a copy each was 1.3% of the
        /// explorer's instructions).
        bytes: Arc<Vec<u8>>,
        elem: ElemType,
        op: ReduceOperation,
        arrived_ns: u64,
    },
    /// The device executed the collective but did not join it (an injected fault, or its
    /// source was unreadable).
    Absent,
}

/// An all-reduce in flight: the parts by rank, and the ranks that took the outcome.
#[derive(Debug, Default)]
struct Reduction {
    parts: BTreeMap<u32, Part>,
    done: BTreeSet<u32>,
}

/// (communicator, sequence).
type ReductionKey = (Arc<[u32]>, u64);
/// (communicator, from rank, to rank, sequence).
type MessageKey = (Arc<[u32]>, u32, u32, u64);

/// What a send left at the hub; `None` in the hub when the sender did not join.
#[derive(Debug)]
struct Message {
    bytes: Vec<u8>,
    sent_ns: u64,
}

/// Parts of collectives in flight, and the devices that will never contribute again.
#[derive(Debug, Default)]
struct HubState {
    gone: BTreeSet<u32>,
    reductions: BTreeMap<ReductionKey, Reduction>,
    messages: BTreeMap<MessageKey, Option<Message>>,
}

/// The rendezvous the devices of one cluster share.
#[derive(Debug)]
pub(super) struct Hub {
    /// Unique in this process: the cluster's peer group (`Device::peer_group`).
    id: u64,
    state: Mutex<HubState>,
    changed: Condvar,
}

impl Default for Hub {
    fn default() -> Self {
        // Compared for equality only, never hashed into a trace: its order across threads
        // changes nothing a device does.
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }
}

/// How a device's wait at the hub ended.
enum Meeting {
    /// Every rank's part, in rank order.
    Complete(Vec<Part>),
    /// The lowest rank that never arrives.
    Missing(u32),
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn leave(&self, ordinal: u32) {
        self.lock().gone.insert(ordinal);
        self.changed.notify_all();
    }

    /// Leaves `part` for all-reduce `sequence` of `peers`. Never waits.
    fn arrive(&self, peers: &Arc<[u32]>, sequence: u64, rank: u32, part: Part) {
        self.lock()
            .reductions
            .entry((peers.clone(), sequence))
            .or_default()
            .parts
            .insert(rank, part);
        self.changed.notify_all();
    }

    /// Waits until every rank of all-reduce `sequence` has arrived or is gone, and takes the
    /// outcome. `rank` arrived before.
    fn meet(&self, peers: &Arc<[u32]>, sequence: u64, rank: u32) -> Meeting {
        let key = (peers.clone(), sequence);
        let mut state = self.lock();
        loop {
            let parts = &state.reductions[&key].parts;
            let settled = (0..peers.len() as u32)
                .all(|r| parts.contains_key(&r) || state.gone.contains(&peers[r as usize]));
            if settled {
                break;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let Reduction { parts, done } = state.reductions.get_mut(&key).expect("arrived before");
        let missing =
            (0..peers.len() as u32).find(|r| !matches!(parts.get(r), Some(Part::Data { .. })));
        let meeting = match missing {
            Some(rank) => Meeting::Missing(rank),
            None => Meeting::Complete(parts.values().cloned().collect()),
        };
        // Forget the collective once every rank that left a part has taken the outcome (a
        // rank that is gone without leaving one never comes).
        done.insert(rank);
        if parts.keys().all(|r| done.contains(r)) {
            state.reductions.remove(&key);
        }
        meeting
    }

    /// Leaves message `sequence` from rank `from` to rank `to` (`None`: the sender did not
    /// join). Never waits.
    fn send(
        &self,
        peers: &Arc<[u32]>,
        from: u32,
        to: u32,
        sequence: u64,
        message: Option<Message>,
    ) {
        self.lock()
            .messages
            .insert((peers.clone(), from, to, sequence), message);
        self.changed.notify_all();
    }

    /// Waits for message `sequence` from rank `from`; `None` if it never comes.
    fn recv(&self, peers: &Arc<[u32]>, from: u32, to: u32, sequence: u64) -> Option<Message> {
        let key = (peers.clone(), from, to, sequence);
        let mut state = self.lock();
        loop {
            if let Some(message) = state.messages.remove(&key) {
                return message;
            }
            if state.gone.contains(&peers[from as usize]) {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Folds `inputs` (one per rank, in rank order) element by element.
/// A rank's input at a time over all elements, with the interpreter's column operations.
fn reduce(inputs: &[Arc<Vec<u8>>], elem: ElemType, op: ReduceOperation) -> Vec<u8> {
    let words = |bytes: &[u8]| crate::memory::elements_of(bytes, elem.size_bytes());
    let fold = match op {
        ReduceOperation::Sum | ReduceOperation::Mean => BinOp::Add,
        ReduceOperation::Prod => BinOp::Mul,
        ReduceOperation::Min => BinOp::Min,
        ReduceOperation::Max => BinOp::Max,
    };
    let count = inputs.len() as u32;
    let divisor = match elem {
        ElemType::U32 => Scalar::U32(count),
        ElemType::I32 => Scalar::I32(count as i32),
        ElemType::F32 => Scalar::F32(count as f32),
        ElemType::F16 | ElemType::BF16 => semantics::cast(Scalar::U32(count), elem),
    };
    let mut acc = words(&inputs[0]);
    let elements: Vec<u32> = (0..acc.len() as u32).collect();
    for input in &inputs[1..] {
        column::binary(fold, elem, &mut acc, &words(input), &elements);
    }
    if op == ReduceOperation::Mean {
        let divisor = vec![divisor.to_bits(); acc.len()];
        column::binary(BinOp::Div, elem, &mut acc, &divisor, &elements);
    }
    crate::memory::bytes_of(&acc, elem.size_bytes())
}

fn device_id(ordinal: u32) -> DeviceId {
    DeviceId {
        type_id: SimDevice::TYPE_ID,
        index: ordinal,
    }
}

fn devices_of(peers: &[u32]) -> Vec<DeviceId> {
    peers.iter().map(|&o| device_id(o)).collect()
}

impl SimDevice {
    pub(super) fn cluster_ordinal(&self) -> u32 {
        self.cluster.ordinal
    }

    pub(super) fn cluster_size(&self) -> u32 {
        self.cluster.count
    }

    /// The peer group of the cluster (or world) this device belongs to: its hub's id.
    pub(super) fn cluster_group(&self) -> u64 {
        self.cluster.hub.id
    }

    pub(super) fn create_sim_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        let (ordinal, count) = (self.cluster.ordinal, self.cluster.count);
        let rank = self.checked(contract::communicator_peers(ordinal, count, peers))?;
        if self.cluster.world {
            check_world_list(Self::TYPE_ID, count, peers).map_err(DeviceError::Collective)?;
        }
        self.check_alive()?;
        let communicator = Communicator {
            peers: peers.into(),
            rank: rank as u32,
            reductions: 0,
            sends: BTreeMap::new(),
            recvs: BTreeMap::new(),
        };
        self.cluster.communicators.insert(id, communicator);
        Ok(())
    }

    /// Enqueues this device's part of a collective: an all-reduce arrives then completes, a
    /// send only arrives, a receive only completes (see [`Phase`]). Then runs the device until
    /// the arrival executed, as a GPU would without the host, so a peer never waits on a device
    /// nobody calls; the completion runs when the host waits for the device.
    pub(super) fn enqueue_collective(
        &mut self,
        stream: super::SimStream,
        comm: CommunicatorId,
        kind: CollectiveKind,
    ) -> Result<(), DeviceError> {
        if !self.cluster.communicators.contains_key(&comm) {
            return self.checked(Err(contract::unknown_communicator(kind.name(), comm)));
        }
        let communicator = self
            .cluster
            .communicators
            .get_mut(&comm)
            .expect("checked above");
        let (counter, phases): (&mut u64, &[Phase]) = match &kind {
            CollectiveKind::AllReduce { .. } => (
                &mut communicator.reductions,
                &[Phase::Arrive, Phase::Complete],
            ),
            CollectiveKind::Send { to, .. } => {
                (communicator.sends.entry(*to).or_default(), &[Phase::Arrive])
            }
            CollectiveKind::Recv { from, .. } => (
                communicator.recvs.entry(*from).or_default(),
                &[Phase::Complete],
            ),
        };
        let sequence = *counter;
        *counter += 1;
        let id = self.cluster.next_op;
        self.cluster.next_op += 1;
        let op = CollectiveOp {
            id,
            peers: communicator.peers.clone(),
            rank: communicator.rank,
            sequence,
            kind,
            phase: phases[0],
        };
        for &phase in phases {
            self.enqueue(
                stream,
                Op::Collective(CollectiveOp {
                    phase,
                    ..op.clone()
                }),
            )?;
        }
        if phases[0] == Phase::Arrive {
            let index = stream.0 as usize;
            self.run_until("a collective's arrival", |dev| {
                !dev.streams[index].queue.iter().any(|(op, ..)| {
                    matches!(op, Op::Collective(c) if c.id == id && c.phase == Phase::Arrive)
                })
            });
        }
        self.check_alive()
    }

    /// Executes one phase of this device's part of a collective: returns its virtual duration,
    /// the trace detail and the bytes it wrote (for the trace hash).
    pub(super) fn execute_collective(
        &mut self,
        stream: u32,
        op: CollectiveOp,
    ) -> (u64, String, Vec<u8>) {
        let detail = format!(
            "{} #{} rank {} {:?}",
            op.name(),
            op.sequence,
            op.rank,
            op.phase
        );
        // A collective is one trigger, counted where it starts.
        let starts = matches!(
            (&op.kind, op.phase),
            (_, Phase::Arrive) | (CollectiveKind::Recv { .. }, Phase::Complete)
        );
        if starts
            && self
                .faults
                .fires(FaultKind::PeerAbsent, self.label_of(stream))
        {
            self.abandon(stream, &op);
            return (0, format!("{detail} absent"), Vec::new());
        }
        match (&op.kind, op.phase) {
            (
                &CollectiveKind::AllReduce {
                    src,
                    elem,
                    op: reduce_op,
                    ..
                },
                Phase::Arrive,
            ) => {
                self.arrive_all_reduce(stream, &op, src, (elem, reduce_op));
                (transfer_ns(src.len), detail, Vec::new())
            }
            (
                &CollectiveKind::AllReduce {
                    dst,
                    elem,
                    op: reduce_op,
                    ..
                },
                Phase::Complete,
            ) => self.complete_all_reduce(stream, &op, dst, (elem, reduce_op), detail),
            (&CollectiveKind::Send { src, to }, _) => {
                let message = self
                    .load_collective(stream, src, "send")
                    .map(|bytes| Message {
                        bytes,
                        sent_ns: self.clock_ns,
                    });
                self.cluster
                    .hub
                    .send(&op.peers, op.rank, to, op.sequence, message);
                (transfer_ns(src.len), detail, Vec::new())
            }
            (&CollectiveKind::Recv { dst, from }, _) => self.recv(stream, &op, dst, from, detail),
        }
    }

    /// An all-reduce's arrival: reads `src` (its elements `elem`, reduced with `reduce_op`) and
    /// leaves it at the hub as this rank's part, or an absent part if the read failed.
    fn arrive_all_reduce(
        &mut self,
        stream: u32,
        op: &CollectiveOp,
        src: Range,
        (elem, reduce_op): (ElemType, ReduceOperation),
    ) {
        let part = match self.load_collective(stream, src, "all_reduce") {
            Some(bytes) => Part::Data {
                bytes: Arc::new(bytes),
                elem,
                op: reduce_op,
                arrived_ns: self.clock_ns,
            },
            None => Part::Absent,
        };
        self.cluster
            .hub
            .arrive(&op.peers, op.sequence, op.rank, part);
    }

    /// An all-reduce's completion: waits for every rank's part, checks that they agree in
    /// length, type and operation, and writes their reduction (`elem`, `reduce_op`) to `dst`.
    fn complete_all_reduce(
        &mut self,
        stream: u32,
        op: &CollectiveOp,
        dst: Range,
        (elem, reduce_op): (ElemType, ReduceOperation),
        detail: String,
    ) -> (u64, String, Vec<u8>) {
        let parts = match self.cluster.hub.meet(&op.peers, op.sequence, op.rank) {
            Meeting::Complete(parts) => parts,
            // Its own failure is already on the stream.
            Meeting::Missing(rank) if rank == op.rank => return (0, detail, Vec::new()),
            Meeting::Missing(rank) => {
                let err = peer_timeout(op, rank);
                return self.fail(stream, err, COLLECTIVE_TIMEOUT_NS, detail, "timed out");
            }
        };
        let mut inputs = Vec::with_capacity(parts.len());
        let mut shapes = Vec::with_capacity(parts.len());
        let mut last_ns = self.clock_ns;
        for part in parts {
            if let Part::Data {
                bytes,
                elem,
                op,
                arrived_ns,
            } = part
            {
                shapes.push((bytes.len(), elem, op));
                inputs.push(bytes);
                last_ns = last_ns.max(arrived_ns);
            }
        }
        if shapes.iter().any(|s| *s != shapes[0]) {
            let listed: Vec<String> = shapes
                .iter()
                .enumerate()
                .map(|(r, (len, elem, op))| format!("rank {r}: {len} bytes of {elem}, {op}"))
                .collect();
            let err = CollectiveError::Mismatch {
                reason: format!("all_reduce #{} got {}", op.sequence, listed.join("; ")),
            };
            return self.fail(stream, err, 0, detail, "mismatched");
        }
        let result = reduce(&inputs, elem, reduce_op);
        self.store_collective(stream, dst, &result, "all_reduce");
        let duration = last_ns.saturating_sub(self.clock_ns) + transfer_ns(dst.len);
        (duration, detail, result)
    }

    /// A receive: waits for the message rank `from` sent and writes it to `dst`, which it must
    /// fill exactly.
    fn recv(
        &mut self,
        stream: u32,
        op: &CollectiveOp,
        dst: Range,
        from: u32,
        detail: String,
    ) -> (u64, String, Vec<u8>) {
        let message = self.cluster.hub.recv(&op.peers, from, op.rank, op.sequence);
        let Some(Message { bytes, sent_ns }) = message else {
            let err = peer_timeout(op, from);
            return self.fail(stream, err, COLLECTIVE_TIMEOUT_NS, detail, "timed out");
        };
        if bytes.len() as u64 != dst.len {
            let err = CollectiveError::Mismatch {
                reason: format!(
                    "recv #{} of {} bytes got a message of {} bytes",
                    op.sequence,
                    dst.len,
                    bytes.len()
                ),
            };
            return self.fail(stream, err, 0, detail, "mismatched");
        }
        self.store_collective(stream, dst, &bytes, "recv");
        let duration = sent_ns.saturating_sub(self.clock_ns) + transfer_ns(dst.len);
        (duration, detail, bytes)
    }

    /// Queues `err` on the stream and returns the phase's trace entry.
    fn fail(
        &mut self,
        stream: u32,
        err: CollectiveError,
        duration_ns: u64,
        detail: String,
        outcome: &str,
    ) -> (u64, String, Vec<u8>) {
        self.streams[stream as usize]
            .errors
            .push(DeviceError::Collective(err));
        (duration_ns, format!("{detail} {outcome}"), Vec::new())
    }

    /// An injected `PeerAbsent`: the device leaves an absent part (its peers stop waiting for
    /// it) and reports its own failure.
    fn abandon(&mut self, stream: u32, op: &CollectiveOp) {
        let hub = self.cluster.hub.clone();
        match &op.kind {
            CollectiveKind::AllReduce { .. } => {
                hub.arrive(&op.peers, op.sequence, op.rank, Part::Absent)
            }
            CollectiveKind::Send { to, .. } => hub.send(&op.peers, op.rank, *to, op.sequence, None),
            // A receive that never joins leaves nothing at the hub: its sender does not wait.
            CollectiveKind::Recv { .. } => {}
        }
        let err = CollectiveError::CommunicatorFailed {
            devices: devices_of(&op.peers),
            reason: format!(
                "injected: device {} never joined {} #{} on {} (seed {})",
                device_id(self.cluster.ordinal),
                op.name(),
                op.sequence,
                self.stream_name(stream),
                self.config.seed
            ),
        };
        self.streams[stream as usize]
            .errors
            .push(DeviceError::Collective(err));
    }

    /// The bytes of `src` for a collective; `None` (with the failure on the stream) if the
    /// memory was freed. Never-written bytes are reported like a read's.
    fn load_collective(&mut self, stream: u32, src: Range, operation: &str) -> Option<Vec<u8>> {
        match self.memory.get_mut(src.buffer, operation) {
            Ok(alloc) => {
                let (start, len) = (src.offset as usize, src.len as usize);
                let bytes = alloc.read(start, len);
                if !alloc.all_written(start, len) {
                    self.report(SanitizerReport::UninitializedRead {
                        operation: operation.to_owned(),
                        buffer: src.buffer,
                        offset: src.offset,
                        len: src.len,
                    });
                }
                Some(bytes)
            }
            Err(report) => {
                self.fault_use_after_free(stream, operation, report);
                None
            }
        }
    }

    fn store_collective(&mut self, stream: u32, dst: Range, bytes: &[u8], operation: &str) {
        match self.memory.get_mut(dst.buffer, operation) {
            Ok(alloc) => {
                let start = dst.offset as usize;
                alloc.write(start, bytes);
            }
            Err(report) => self.fault_use_after_free(stream, operation, report),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_f32(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn float_sums_fold_in_rank_order() {
        // In rank order (1e8 + 1) - 1e8 = 0 in f32; another order would give 1.
        let inputs = [bytes_f32(&[1e8]), bytes_f32(&[1.0]), bytes_f32(&[-1e8])].map(Arc::new);
        assert_eq!(
            reduce(&inputs, ElemType::F32, ReduceOperation::Sum),
            bytes_f32(&[0.0])
        );
        assert_eq!(
            reduce(&inputs, ElemType::F32, ReduceOperation::Mean),
            bytes_f32(&[0.0])
        );
    }

    #[test]
    fn integer_reductions_wrap_and_mean_truncates() {
        let words = |v: &[i32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let inputs = [words(&[i32::MAX, -7, 3]), words(&[1, 2, -4])].map(Arc::new);
        assert_eq!(
            reduce(&inputs, ElemType::I32, ReduceOperation::Sum),
            words(&[i32::MIN, -5, -1])
        );
        assert_eq!(
            reduce(&inputs, ElemType::I32, ReduceOperation::Mean),
            words(&[i32::MIN / 2, -2, 0])
        );
        assert_eq!(
            reduce(&inputs, ElemType::I32, ReduceOperation::Min),
            words(&[1, -7, -4])
        );
        assert_eq!(
            reduce(&inputs, ElemType::I32, ReduceOperation::Prod),
            words(&[i32::MAX, -14, -12])
        );
    }
}
