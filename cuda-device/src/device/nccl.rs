//! Collectives through NCCL (cudarc's `nccl` bindings, `libnccl` loaded at run time).
//!
//! One process drives every GPU, one actor thread per device, so each device creates its own
//! rank of a communicator with `ncclCommInitRank`; the ranks meet inside NCCL, which returns
//! once all of them have called it (their actors run concurrently, so no group call is needed).
//! A rank is created once per process for each (device list, GPU) and kept, like the context
//! and its compiled kernels: later devices of the same GPU (the conformance suite opens one per
//! case) reuse it without another rendezvous, and no rank is destroyed while a peer may still
//! need it. A rank is shared by the table and every communicator that uses it, inside a
//! [`RankCell`]: every NCCL call on it holds the cell's lock (NCCL communicators are not
//! thread-safe), and an abort takes it out of the cell, so no device of the process calls
//! NCCL on a rank another one is using or has aborted. Collectives are still matched with the
//! peers' in call order, so one device per GPU should use a communicator at a time.
//!
//! A device that is one rank of a world of processes (`device/world.rs`) makes no id of its
//! own: its one communicator, the world's, joins with the id rank 0 sent in the rendezvous,
//! with NCCL rank = global rank; across processes, the laggard a `PeerTimeout` names is the
//! first other rank, since the process sees only its own progress.
//!
//! Without `libnccl` the device reports no collectives: the runtime refuses them with a typed
//! `Unsupported` error and copies between clients by read-then-write.
//!
//! **A peer that never arrives.** NCCL itself waits forever for a peer that never enqueues its
//! part. Here ranks are nonblocking (`blocking = 0`): joining a communicator polls
//! `ncclCommGetAsyncError` instead of blocking in `ncclCommInitRank`, an enqueue still in
//! progress is polled the same way ([`enqueue_on`]), and each collective records an event after
//! itself (`device/watch.rs`), which every host wait of the device watches. A collective still
//! incomplete after the device's collective timeout ([`CudaDevice::with_collective_timeout`]),
//! counted from when it was enqueued or when the one before it completed, has its rank aborted
//! (`ncclCommAbort`, which ends its kernels) and fails on its stream with
//! `CollectiveError::PeerTimeout`, naming the peer that enqueued the fewest collectives of the
//! communicator, as the simulator does; every other stream with a collective pending on it
//! fails too. The device list's generation is then bumped (once: a device that aborts a rank of
//! an older generation leaves the newer one alone): every rank of the old communicator is
//! aborted by its own device at its next collective or host wait, failing what it still had
//! pending, and the devices meet again in a fresh one. Each later collective waits for its own
//! rendezvous, so behind a peer that is gone for good each one takes a full timeout.
//!
//! **The price of nonblocking ranks.** NCCL 2.28 runs every group of a nonblocking rank (every
//! collective is one) on a thread of its own and returns `ncclInProgress`: the `nccl_groups`
//! bench measured 51-59 us of host time a group on an H200 (NCCL 2.28.3, a communicator of
//! one, a self send/receive), against 10 us on a blocking rank. Every collective here pays it
//! on the device's actor, more than a 1 MiB all-reduce between two H200s takes on the GPUs
//! (about 34 us), so small collectives run at the enqueue's pace. A blocking rank made from
//! the bounded join would pay 10 us, at the price of NCCL's connection setup at a first
//! collective blocking the host while a peer is missing: not done. Splitting one off the join
//! (`ncclCommSplit` with `blocking = 1` from the nonblocking rank) was tried and failed on NCCL
//! 2.28.3, one rank: the split returns `ncclInProgress`, its job fails (`ncclInternalError`)
//! and leaves no communicator. Replaying collectives captured once as CUDA graphs needs no
//! NCCL call per collective: a nonblocking rank's group captures in every stream-capture mode
//! and replays for 6 us of host time (the bench, NCCL 2.28.9, one H200; capturing and
//! instantiating took 0.3-0.9 ms). Not done: a cache of such graphs would be keyed by the
//! buffers' addresses, so it must drop a graph before its buffers' memory is freed (NCCL may
//! register captured buffers with the peers); NCCL reclaims a graph's captured work through the
//! rank it was captured on, so the cache must also destroy its graphs before the rank is
//! aborted, even with a replay stuck behind a missing peer; and every rank must replay or
//! capture in the same order. Those paths need two GPUs to check.
//!
//! The pinned pool waits in the driver for a block's copy when lending or keeping it would pass
//! its cap; with collectives pending, a write, read or pinned lend that could make it wait
//! first waits for them watching (`CudaDevice::make_staging_safe`), since the copy may be
//! queued behind a collective whose peer never arrives.
//!
//! **Not covered:** mismatched peers (sizes, types) are not detected.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudarc::nccl::sys as nccl;
use lockstep::collective::CommunicatorId;
use lockstep::kernel::ElemType;
use lockstep::{CollectiveError, Device, DeviceError, DeviceId, ReduceOperation};

use super::watch::Failure;
use super::{CudaBuffer, CudaDevice, CudaStream};
use crate::context::lock;
use lockstep::device::BufferSlice;
use lockstep::device::contract;

/// Whether `libnccl` can be loaded, checked once per process.
pub(crate) fn nccl_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library.
    *PRESENT.get_or_init(|| unsafe { nccl::is_culib_present() })
}

/// NCCL ranks of this process, by (device list, GPU ordinal), and the unique id of each list.
#[derive(Default)]
struct Ranks {
    ranks: BTreeMap<(Vec<u32>, u32), RankCell>,
    /// Held while a device makes the rank of its (device list, GPU): two devices of one GPU
    /// joining at once would otherwise take the same rank of a communicator twice.
    joins: BTreeMap<(Vec<u32>, u32), Arc<Mutex<()>>>,
    ids: BTreeMap<Vec<u32>, nccl::ncclUniqueId>,
    /// Per device list, bumped when a rank of its communicator is aborted: a rank made in an
    /// older generation is stale, and its device aborts it before its next collective.
    generations: BTreeMap<Vec<u32>, u64>,
    /// Collectives each GPU enqueued on the list's communicator of the current generation.
    progress: BTreeMap<(Vec<u32>, u32), u64>,
}

/// A communicator rank: NCCL's handle, destroyed only by [`abort`]. Not `Clone`: it lives in
/// one [`RankCell`], so it is aborted at most once and never used after.
#[derive(Debug)]
pub(super) struct Rank(nccl::ncclComm_t);

// SAFETY: NCCL lets a communicator be used from any thread, one call at a time, and no call
// while a nonblocking one is still in progress on it. A `Rank` is owned by the thread that
// makes it until it goes into its `RankCell`, whose lock every NCCL call on it holds afterwards
// and an enqueue holds until NCCL finished it (`enqueue_on`); moving it between threads (all
// that `Send` allows through the mutex) never makes two calls overlap.
unsafe impl Send for Rank {}

impl Rank {
    /// `ncclCommGetAsyncError`: `ncclInProgress` while still joining or enqueuing.
    fn async_error(&self) -> nccl::ncclResult_t {
        let mut state = nccl::ncclResult_t::ncclSuccess;
        // SAFETY: `self` is a live rank (not aborted: `abort` consumes it), used by this thread
        // alone (see `Send`); the call writes its state into `state`.
        let result = unsafe { nccl::ncclCommGetAsyncError(self.0, &raw mut state) };
        match result {
            nccl::ncclResult_t::ncclSuccess => state,
            failed => failed,
        }
    }
}

/// A rank shared by the process table and the communicators of this process's devices that
/// use it; empty once aborted (NCCL freed it). Every NCCL call on the rank holds the lock.
pub(super) type RankCell = Arc<Mutex<Option<Rank>>>;

/// Runs one NCCL call on the rank in `cell`, holding its lock; `ncclInvalidUsage` without a
/// call if the rank was aborted (by another device of its GPU; the next collective meets the
/// peers in a fresh communicator).
pub(super) fn with_rank(
    cell: &RankCell,
    call: impl FnOnce(&Rank) -> nccl::ncclResult_t,
) -> nccl::ncclResult_t {
    match lock(cell).as_ref() {
        Some(rank) => call(rank),
        None => nccl::ncclResult_t::ncclInvalidUsage,
    }
}

fn ranks() -> &'static Mutex<Ranks> {
    static RANKS: OnceLock<Mutex<Ranks>> = OnceLock::new();
    RANKS.get_or_init(Default::default)
}

/// This device's rank of a communicator.
#[derive(Debug)]
pub(crate) struct Communicator {
    /// Empty once aborted; made again at the next collective.
    pub(super) rank: RankCell,
    pub(super) peers: Vec<u32>,
    /// The generation of the device list `rank` was made in.
    pub(super) generation: u64,
    /// The collectives not yet seen complete, oldest first (`device/watch.rs`).
    pub(super) pending: VecDeque<super::watch::Pending>,
}

impl Communicator {
    /// Whether another device of the process aborted this communicator's rank (a rank shared
    /// by devices of one GPU) or a rank of its generation: its collectives cannot complete.
    pub(super) fn is_stale(&self) -> bool {
        lock(&self.rank).is_none() || self.generation != generation(&self.peers)
    }
}

/// The current generation of the communicator of `peers` in this process.
fn generation(peers: &[u32]) -> u64 {
    lock(ranks()).generations.get(peers).copied().unwrap_or(0)
}

fn devices_of(peers: &[u32]) -> Vec<DeviceId> {
    peers
        .iter()
        .map(|&index| DeviceId {
            type_id: CudaDevice::TYPE_ID,
            index,
        })
        .collect()
}

pub(super) fn failed(peers: &[u32], call: &str, result: nccl::ncclResult_t) -> DeviceError {
    failed_because(peers, &format!("{call} returned {result:?}"))
}

pub(super) fn failed_because(peers: &[u32], reason: &str) -> DeviceError {
    DeviceError::Collective(CollectiveError::CommunicatorFailed {
        devices: devices_of(peers),
        reason: reason.to_owned(),
    })
}

fn check(peers: &[u32], call: &str, result: nccl::ncclResult_t) -> Result<(), DeviceError> {
    match result {
        nccl::ncclResult_t::ncclSuccess => Ok(()),
        other => Err(failed(peers, call, other)),
    }
}

fn data_type(elem: ElemType) -> nccl::ncclDataType_t {
    match elem {
        ElemType::U32 => nccl::ncclDataType_t::ncclUint32,
        ElemType::I32 => nccl::ncclDataType_t::ncclInt32,
        ElemType::F32 => nccl::ncclDataType_t::ncclFloat32,
        ElemType::F16 => nccl::ncclDataType_t::ncclFloat16,
        ElemType::BF16 => nccl::ncclDataType_t::ncclBfloat16,
    }
}

fn reduce_op(op: ReduceOperation) -> nccl::ncclRedOp_t {
    match op {
        ReduceOperation::Sum => nccl::ncclRedOp_t::ncclSum,
        ReduceOperation::Prod => nccl::ncclRedOp_t::ncclProd,
        ReduceOperation::Min => nccl::ncclRedOp_t::ncclMin,
        ReduceOperation::Max => nccl::ncclRedOp_t::ncclMax,
        ReduceOperation::Mean => nccl::ncclRedOp_t::ncclAvg,
    }
}

impl CudaDevice {
    /// The device count of the driver, or 1 (this device) if it cannot say.
    pub(super) fn gpu_count() -> u32 {
        cudarc::driver::result::device::get_count()
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
    }

    pub(super) fn nccl_create(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        contract::communicator_peers(self.member(), self.member_count(), peers)?;
        self.check_world_list(peers)?;
        self.ctx.bind()?;
        let (rank, generation) = self.join(peers)?;
        self.communicators.insert(
            id,
            Communicator {
                rank,
                peers: peers.to_vec(),
                generation,
                pending: VecDeque::new(),
            },
        );
        Ok(())
    }

    /// This GPU's rank of the current communicator of `peers` (made once per generation, in a
    /// rendezvous bounded by the collective timeout), and that generation.
    fn join(&self, peers: &[u32]) -> Result<(RankCell, u64), DeviceError> {
        let ordinal = self.member();
        let key = (peers.to_vec(), ordinal);
        let gate = lock(ranks()).joins.entry(key.clone()).or_default().clone();
        let _joining = lock(&gate);
        let (unique, generation) = {
            let mut table = lock(ranks());
            let generation = table.generations.get(peers).copied().unwrap_or(0);
            if let Some(rank) = table.ranks.get(&key) {
                return Ok((rank.clone(), generation));
            }
            (self.unique_id(&mut table, peers, generation)?, generation)
        };
        let position = peers
            .iter()
            .position(|&p| p == ordinal)
            .expect("checked by the caller");
        let rank = self.init_rank(peers, unique, position, generation)?;
        let rank: RankCell = Arc::new(Mutex::new(Some(rank)));
        let mut table = lock(ranks());
        // A rank made while another device retired the generation is stale: its device
        // aborts it at its first collective instead of handing it to later devices.
        if table.generations.get(peers).copied().unwrap_or(0) == generation {
            table.ranks.insert(key, rank.clone());
        }
        Ok((rank, generation))
    }

    /// `ncclCommInitRankConfig` of a nonblocking rank, polled until every rank has joined; past
    /// the collective timeout the rank is aborted and the join fails with `PeerTimeout`.
    fn init_rank(
        &self,
        peers: &[u32],
        unique: nccl::ncclUniqueId,
        position: usize,
        generation: u64,
    ) -> Result<Rank, DeviceError> {
        let mut config = NonblockingConfig::new();
        let mut raw = MaybeUninit::uninit();
        // SAFETY: the context of this GPU is current (NCCL binds the rank to its device):
        // `nccl_create` and `collective_on` (`uncaptured`) bind it before `join` runs;
        // `config` is a version 2.17 configuration whose `size` tells NCCL its layout, which
        // every later NCCL reads; the call writes the rank into `raw` unless it fails.
        let result = unsafe {
            nccl::ncclCommInitRankConfig(
                raw.as_mut_ptr(),
                peers.len() as i32,
                unique,
                position as i32,
                (&raw mut config).cast(),
            )
        };
        if result != nccl::ncclResult_t::ncclInProgress {
            check(peers, "ncclCommInitRankConfig", result)?;
        }
        // SAFETY: written by the call above, which did not fail.
        let rank = Rank(unsafe { raw.assume_init() });
        let since = Instant::now();
        loop {
            match rank.async_error() {
                nccl::ncclResult_t::ncclSuccess => return Ok(rank),
                nccl::ncclResult_t::ncclInProgress if since.elapsed() < self.collective_timeout => {
                    pause_polling(since.elapsed());
                }
                nccl::ncclResult_t::ncclInProgress => {
                    abort(rank);
                    let err = self.enqueue_timeout(peers);
                    // A peer that joins later meets the others under a fresh id.
                    retire(peers, generation);
                    return Err(err);
                }
                other => {
                    abort(rank);
                    retire(peers, generation);
                    return Err(failed(peers, "ncclCommInitRankConfig", other));
                }
            }
        }
    }

    /// The unique id every rank of `peers` joins in `generation` (the current one, read with
    /// `table` locked): in a world, the one rank 0 sent (its communicator, once aborted in
    /// generation 0, is not made again); else made by the first device of this process to ask.
    fn unique_id(
        &self,
        table: &mut Ranks,
        peers: &[u32],
        generation: u64,
    ) -> Result<nccl::ncclUniqueId, DeviceError> {
        if let Some(world) = self.world {
            return match generation {
                0 => Ok(world.id),
                _ => Err(failed_because(
                    peers,
                    "the world's communicator was aborted; meeting again needs a new rendezvous",
                )),
            };
        }
        if let Some(unique) = table.ids.get(peers) {
            return Ok(*unique);
        }
        let mut unique = MaybeUninit::uninit();
        // SAFETY: writes the id into `unique` on success.
        let result = unsafe { nccl::ncclGetUniqueId(unique.as_mut_ptr()) };
        check(peers, "ncclGetUniqueId", result)?;
        // SAFETY: initialised by the successful call above.
        let unique = unsafe { unique.assume_init() };
        table.ids.insert(peers.to_vec(), unique);
        Ok(unique)
    }

    /// The rank and raw stream a collective runs on: the communicator's rank, made again if
    /// it is stale (aborted, by this device or another; the collectives still pending on the
    /// old one fail on their streams first).
    fn collective_on(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        operation: &str,
    ) -> Result<(RankCell, nccl::cudaStream_t), DeviceError> {
        let Some(communicator) = self.communicators.get(&comm) else {
            return Err(contract::unknown_communicator(operation, comm));
        };
        let raw = self.uncaptured(stream, operation)?;
        if !communicator.is_stale() {
            return Ok((communicator.rank.clone(), raw.cast()));
        }
        let peers = communicator.peers.clone();
        let errors = self.fail_communicator(comm, Failure::Stale);
        self.collective_errors.extend(errors);
        let (rank, generation) = self.join(&peers)?;
        let communicator = self.communicators.get_mut(&comm).expect("looked up above");
        communicator.rank = rank.clone();
        communicator.generation = generation;
        Ok((rank, raw.cast()))
    }

    /// Finishes the enqueue of a collective on `comm` that ended with `result` (after
    /// [`enqueue_on`]): one still in progress at the timeout had its rank aborted there, and
    /// fails with `PeerTimeout` (the collectives pending on other streams hear of it through
    /// `take_errors`); else the collective is counted and watched until it completes.
    fn enqueued(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        call: &str,
        result: nccl::ncclResult_t,
    ) -> Result<(), DeviceError> {
        let peers = self.communicators[&comm].peers.clone();
        if result == nccl::ncclResult_t::ncclInProgress {
            let enqueuing = self.enqueue_timeout(&peers);
            let (here, others): (Vec<_>, Vec<_>) = self
                .fail_communicator(comm, Failure::Expired)
                .into_iter()
                .partition(|(s, _)| *s == stream);
            self.collective_errors.extend(others);
            return Err(here.into_iter().next().map_or(enqueuing, |(_, err)| err));
        }
        check(&peers, call, result)?;
        let sequence = {
            let mut table = lock(ranks());
            let count = table.progress.entry((peers, self.member())).or_default();
            *count += 1;
            *count - 1
        };
        self.watch(stream, comm, sequence)
    }

    pub(super) fn nccl_all_reduce(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        dst: BufferSlice<'_, CudaBuffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        contract::all_reduce(self.owner, &src, &dst, elem)?;
        let (rank, raw) = self.collective_on(stream, comm, "all_reduce")?;
        let count = (src.len / elem.size_bytes() as u64) as usize;
        let result = enqueue_on(&rank, self.collective_timeout, |rank| {
            // SAFETY: `count` elements at each address lie inside buffers of this device
            // (`contract::all_reduce` above: equal lengths, in bounds), which `free` releases
            // only after this device's streams completed; `raw` is this device's stream, its
            // context made current by `collective_on`; the rank is live and its lock held
            // (`enqueue_on`).
            unsafe {
                nccl::ncclAllReduce(
                    src.buffer.at(src.offset) as *const c_void,
                    dst.buffer.at(dst.offset) as *mut c_void,
                    count,
                    data_type(elem),
                    reduce_op(op),
                    rank.0,
                    raw,
                )
            }
        });
        self.enqueued(stream, comm, "ncclAllReduce", result)
    }

    pub(super) fn nccl_send(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        contract::slice(self.owner, "send", &src)?;
        let (rank, raw) = self.collective_on(stream, comm, "send")?;
        let result = enqueue_on(&rank, self.collective_timeout, |rank| {
            // SAFETY: as for `ncclAllReduce`, the range checked by `contract::slice` above.
            unsafe {
                nccl::ncclSend(
                    src.buffer.at(src.offset) as *const c_void,
                    src.len as usize,
                    nccl::ncclDataType_t::ncclUint8,
                    peer as i32,
                    rank.0,
                    raw,
                )
            }
        });
        self.enqueued(stream, comm, "ncclSend", result)
    }

    pub(super) fn nccl_recv(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        contract::slice(self.owner, "recv", &dst)?;
        let (rank, raw) = self.collective_on(stream, comm, "recv")?;
        let result = enqueue_on(&rank, self.collective_timeout, |rank| {
            // SAFETY: as for `ncclAllReduce`, the range checked by `contract::slice` above.
            unsafe {
                nccl::ncclRecv(
                    dst.buffer.at(dst.offset) as *mut c_void,
                    dst.len as usize,
                    nccl::ncclDataType_t::ncclUint8,
                    peer as i32,
                    rank.0,
                    raw,
                )
            }
        });
        self.enqueued(stream, comm, "ncclRecv", result)
    }
}

/// How long a poll of a rank that is still enqueuing or joining (`ncclInProgress`) waits
/// before asking again, `polled` after the first ask. An enqueue usually finishes within
/// microseconds, and the shortest `sleep` takes tens of them (the kernel's timer slack): that
/// alone made a 1 MiB all-reduce three times slower than PyTorch's. So the first millisecond
/// yields the core between asks; a longer wait (a join, a late peer) sleeps, costing no core.
pub(super) fn pause_polling(polled: Duration) {
    if polled < Duration::from_millis(1) {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Runs the enqueue `call` on the rank in `cell` and, while NCCL still works on it
/// (`ncclInProgress`, a nonblocking rank), polls until it finished or `timeout` passed, holding
/// the cell's lock throughout, so that no other device of the GPU calls NCCL on the rank
/// meanwhile. One still in progress at the timeout has its rank aborted here, under the same
/// lock, and is returned as `ncclInProgress`; `ncclInvalidUsage` without a call if the rank was
/// aborted before.
pub(super) fn enqueue_on(
    cell: &RankCell,
    timeout: Duration,
    call: impl FnOnce(&Rank) -> nccl::ncclResult_t,
) -> nccl::ncclResult_t {
    let mut guard = lock(cell);
    let Some(rank) = guard.as_ref() else {
        return nccl::ncclResult_t::ncclInvalidUsage;
    };
    let mut result = call(rank);
    // From the call's return: a nonblocking call never waits for peers itself, but the first
    // one on a rank may take long loading NCCL's kernels.
    let since = Instant::now();
    while result == nccl::ncclResult_t::ncclInProgress && since.elapsed() < timeout {
        pause_polling(since.elapsed());
        result = rank.async_error();
    }
    if result == nccl::ncclResult_t::ncclInProgress
        && let Some(rank) = guard.take()
    {
        abort(rank);
    }
    result
}

/// `ncclCommGetAsyncError` of the rank in `cell`: `ncclInProgress` while it is still joining
/// or enqueuing, `ncclInvalidUsage` once aborted.
pub(super) fn async_error(cell: &RankCell) -> nccl::ncclResult_t {
    with_rank(cell, Rank::async_error)
}

/// `ncclCommAbort` of `rank`: ends its kernels and frees it; its result is of no use (the rank
/// is gone either way).
pub(super) fn abort(rank: Rank) {
    // SAFETY: `rank` is live and taken by value (out of its cell, or before it went into
    // one): NCCL frees it once and nothing uses it after.
    let _ = unsafe { nccl::ncclCommAbort(rank.0) };
}

/// Forgets the communicator of `peers` in this process after this device aborted its rank of
/// `generation`: the next collective of each device makes a fresh one (see the module
/// documentation). A generation already retired (by another device) is left alone, so the
/// fresh communicator some devices may have joined since is kept.
pub(super) fn retire(peers: &[u32], generation: u64) {
    let mut table = lock(ranks());
    let current = table.generations.entry(peers.to_vec()).or_default();
    if *current != generation {
        return;
    }
    *current += 1;
    table.ranks.retain(|(list, _), _| list != peers);
    table.ids.remove(peers);
    table.progress.retain(|(list, _), _| list != peers);
}

/// The peer of `peers` (other than `own`) that enqueued the fewest collectives on their
/// current communicator: the one a stuck collective waits for.
pub(super) fn laggard(peers: &[u32], own: u32) -> u32 {
    let table = lock(ranks());
    peers
        .iter()
        .copied()
        .filter(|&p| p != own)
        .min_by_key(|&p| {
            table
                .progress
                .get(&(peers.to_vec(), p))
                .copied()
                .unwrap_or(0)
        })
        .unwrap_or(own)
}

/// The collectives `gpu` enqueued on the current communicator of `peers`.
pub(super) fn enqueued_by(peers: &[u32], gpu: u32) -> u64 {
    lock(ranks())
        .progress
        .get(&(peers.to_vec(), gpu))
        .copied()
        .unwrap_or(0)
}

/// NCCL's `ncclConfig_t` as of version 2.17 (`NCCL_CONFIG_INITIALIZER` with `blocking = 0`):
/// later versions read its `size` and keep their defaults for the fields it lacks.
#[repr(C)]
struct NonblockingConfig {
    size: usize,
    magic: std::ffi::c_uint,
    version: std::ffi::c_uint,
    blocking: std::ffi::c_int,
    cga_cluster_size: std::ffi::c_int,
    min_ctas: std::ffi::c_int,
    max_ctas: std::ffi::c_int,
    net_name: *const std::ffi::c_char,
}

impl NonblockingConfig {
    fn new() -> Self {
        /// `NCCL_CONFIG_UNDEF_INT`: NCCL's default.
        const UNDEF: std::ffi::c_int = std::ffi::c_int::MIN;
        NonblockingConfig {
            size: std::mem::size_of::<Self>(),
            magic: 0xcafe_beef,
            version: 2_17_00,
            blocking: 0,
            cga_cluster_size: UNDEF,
            min_ctas: UNDEF,
            max_ctas: UNDEF,
            net_name: std::ptr::null(),
        }
    }
}
