//! Watching collectives until they complete, so that no host wait of the device outlives a
//! peer that never arrives (see `device/nccl.rs`).
//!
//! **Invariant:** a communicator's `pending` holds, oldest first, every collective this device
//! enqueued on it and has not yet seen complete: its stream, its sequence, an event recorded
//! right after it, and when its clock started (when it was enqueued, or when the collective
//! before it was seen complete if that came later: time spent queued behind an earlier
//! collective does not count against it). Host waits ([`CudaDevice::wait_watching`]) poll what
//! they wait for and, meanwhile, every communicator's oldest pending collective. Completed ones
//! leave the queue, but only while the rank is alive: an abort (by this device, or by another
//! device of the GPU sharing the rank) ends the rank's kernels, so their events complete
//! whether the collectives did or were cut short, and what is pending then fails instead of
//! passing for done. A communicator fails when its oldest collective's clock passes the
//! collective timeout, when NCCL reports an error on it, or when another device of the process
//! aborted its generation first (its collectives then never complete, or were cut short). A
//! failed communicator has this device's rank aborted (`ncclCommAbort`, which ends its kernels,
//! so the wait then completes) and every stream with a collective still pending on it hears of
//! it through `take_errors`. Several failing communicators are aborted oldest first: work
//! queued behind another communicator's stuck kernel is aborted after it.

use std::collections::VecDeque;
use std::time::Instant;

use cudarc::driver::sys;
use cudarc::nccl::sys::ncclResult_t;
use lockstep::collective::CommunicatorId;
use lockstep::{CollectiveError, Device, DeviceError, DeviceId};

use super::nccl::{
    RankCell, abort, enqueued_by, failed, failed_because, laggard, pause_polling, retire,
};
use super::{CudaDevice, CudaStream};
use crate::context::{Context, lock};

/// A collective not yet seen complete. Its `event` came from its device's context
/// (`Context::event`, in [`CudaDevice::watch`]) and belongs to this entry alone until recycled.
#[derive(Debug)]
pub(crate) struct Pending {
    stream: CudaStream,
    sequence: u64,
    /// When its clock started (see the module documentation).
    since: Instant,
    /// Recorded right after it.
    event: sys::CUevent,
}

/// Why a communicator with collectives pending fails.
#[derive(Clone, Copy, Debug)]
pub(super) enum Failure {
    /// Its oldest collective's clock passed the collective timeout.
    Expired,
    /// `ncclCommGetAsyncError` reported this.
    Nccl(ncclResult_t),
    /// Another device of the process aborted its generation (or its shared rank) first.
    Stale,
}

/// Drops the collectives seen complete from the front of `pending`; the clock of the next one
/// starts now if it started earlier. Nothing once the rank in `cell` was aborted (see the
/// module documentation): its lock is held throughout, and an abort takes the rank out under
/// it, so an event seen complete here completed before any abort.
///
/// # Safety
/// `ctx` is the context of the device whose collectives `pending` holds: every entry's event
/// came from `ctx` (see [`Pending`]).
unsafe fn forget_completed(ctx: &Context, cell: &RankCell, pending: &mut VecDeque<Pending>) {
    let alive = lock(cell);
    if alive.is_none() {
        return;
    }
    let mut forgot = false;
    while let Some(front) = pending.front() {
        // SAFETY: an event of `ctx`, held by its entry (this function's contract), so live.
        if !unsafe { ctx.event_done(front.event) } {
            break;
        }
        // SAFETY: an event of `ctx` (this function's contract) that its entry, popped next,
        // gives up.
        unsafe { ctx.recycle_event(front.event) };
        pending.pop_front();
        forgot = true;
    }
    if let Some(next) = pending.front_mut().filter(|_| forgot) {
        next.since = next.since.max(Instant::now());
    }
}

impl CudaDevice {
    /// Watches the collective `sequence` of `comm` just enqueued on `stream`.
    pub(super) fn watch(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        sequence: u64,
    ) -> Result<(), DeviceError> {
        let raw = self.stream("collective", stream)?.raw;
        self.ctx.bind()?;
        let event = self.ctx.event()?;
        // SAFETY: `raw` is this device's stream, and `event` came from its context just above,
        // which `bind` made current.
        if let Err(err) = unsafe { self.record_on(raw, event) } {
            // SAFETY: `event` came from `self.ctx.event()` above and went nowhere.
            unsafe { self.ctx.recycle_event(event) };
            return Err(err);
        }
        let communicator = self.communicators.get_mut(&comm).expect("enqueued on it");
        // Forgetting here keeps the queue short between host waits.
        // SAFETY: this device's communicator: its entries' events came from `self.ctx` (here).
        unsafe { forget_completed(&self.ctx, &communicator.rank, &mut communicator.pending) };
        communicator.pending.push_back(Pending {
            stream,
            sequence,
            since: Instant::now(),
            event,
        });
        Ok(())
    }

    /// Whether a collective of this device is not yet seen complete.
    pub(super) fn collectives_pending(&self) -> bool {
        self.communicators.values().any(|c| !c.pending.is_empty())
    }

    /// Before lending `bytes` of the pinned pool: if lending (or returning) them could make the
    /// pool wait for a copy in flight (it would pass its cap) while collectives are pending,
    /// waits watching them until none is. Such a copy may be queued behind a collective whose
    /// peer never arrives, and the pool waits in the driver, where no timeout reaches it.
    pub(super) fn make_staging_safe(&mut self, bytes: u64) -> Result<(), DeviceError> {
        if !self.collectives_pending() {
            return Ok(());
        }
        let stats = self.host.stats();
        if stats.bytes_lent + stats.bytes_kept + bytes <= stats.cap_bytes {
            return Ok(());
        }
        self.wait_watching(|_| Ok(false), |_| Ok(()))
    }

    /// Waits until `done` (which must not block), watching every pending collective
    /// meanwhile; without any, waits with `block` instead.
    pub(super) fn wait_watching(
        &mut self,
        done: impl Fn(&Self) -> Result<bool, DeviceError>,
        block: impl FnOnce(&Self) -> Result<(), DeviceError>,
    ) -> Result<(), DeviceError> {
        let since = Instant::now();
        loop {
            self.settle_collectives();
            if !self.collectives_pending() {
                return block(self);
            }
            if done(self)? {
                return Ok(());
            }
            pause_polling(since.elapsed());
        }
    }

    /// Forgets completed collectives and fails the communicators whose oldest pending
    /// collective timed out, failed or lost its generation, oldest first.
    fn settle_collectives(&mut self) {
        // The common wait, with no collective in flight, allocates nothing.
        if !self.collectives_pending() {
            return;
        }
        let mut failing = Vec::new();
        for (&comm, communicator) in &mut self.communicators {
            // SAFETY: this device's communicator: its entries' events came from `self.ctx`
            // (`watch` makes every entry).
            unsafe { forget_completed(&self.ctx, &communicator.rank, &mut communicator.pending) };
            let Some(front) = communicator.pending.front() else {
                continue;
            };
            if let Some(failure) = communicator.failure(front.since, self.collective_timeout) {
                failing.push((front.since, comm, failure));
            }
        }
        failing.sort_by_key(|&(since, ..)| since);
        for (_, comm, failure) in failing {
            let errors = self.fail_communicator(comm, failure);
            self.collective_errors.extend(errors);
        }
    }

    /// Aborts this device's rank of `comm` (and, unless another device already did, retires
    /// its generation: the devices meet again in a fresh communicator) and returns one error
    /// per stream with a collective of it still pending, naming that stream's oldest.
    pub(super) fn fail_communicator(
        &mut self,
        comm: CommunicatorId,
        failure: Failure,
    ) -> Vec<(CudaStream, DeviceError)> {
        let communicator = self
            .communicators
            .get_mut(&comm)
            .expect("a live communicator");
        // SAFETY: as in `settle_collectives`: entries of this device, made by `watch`.
        unsafe { forget_completed(&self.ctx, &communicator.rank, &mut communicator.pending) };
        let pending = std::mem::take(&mut communicator.pending);
        let (peers, generation) = (communicator.peers.clone(), communicator.generation);
        let rank = lock(&communicator.rank).take();
        if let Some(rank) = rank {
            abort(rank);
        }
        let mut errors: Vec<(CudaStream, DeviceError)> = Vec::new();
        for collective in pending {
            // SAFETY: an event of `self.ctx` (`watch` made the entry), given up with its entry,
            // taken out of the communicator above.
            unsafe { self.ctx.recycle_event(collective.event) };
            if errors
                .iter()
                .all(|(stream, _)| *stream != collective.stream)
            {
                let err = self.failure_error(&peers, collective.sequence, failure);
                errors.push((collective.stream, err));
            }
        }
        if !matches!(failure, Failure::Stale) {
            // After the errors: they name the laggard from the progress `retire` forgets.
            retire(&peers, generation);
        }
        errors
    }

    /// The error of collective `sequence` of `peers` when its communicator fails so.
    fn failure_error(&self, peers: &[u32], sequence: u64, failure: Failure) -> DeviceError {
        match failure {
            Failure::Expired => self.peer_timeout(peers, self.member(), sequence),
            Failure::Nccl(state) => failed(peers, "ncclCommGetAsyncError", state),
            Failure::Stale => failed_because(
                peers,
                &format!(
                    "collective {sequence} was not seen complete before another device of this \
                     process aborted the communicator (a peer timed out): its result may be incomplete"
                ),
            ),
        }
    }

    /// `PeerTimeout` of collective `sequence` of `peers` on GPU `own`, naming the peer that
    /// enqueued the fewest collectives.
    pub(super) fn peer_timeout(&self, peers: &[u32], own: u32, sequence: u64) -> DeviceError {
        let id = |index| DeviceId {
            type_id: CudaDevice::TYPE_ID,
            index,
        };
        DeviceError::Collective(CollectiveError::PeerTimeout {
            devices: peers.iter().map(|&p| id(p)).collect(),
            sequence,
            peer: id(laggard(peers, own)),
            timeout_ns: u64::try_from(self.collective_timeout.as_nanos()).unwrap_or(u64::MAX),
        })
    }

    /// The `PeerTimeout` of the collective of `peers` this device is enqueuing now.
    pub(super) fn enqueue_timeout(&self, peers: &[u32]) -> DeviceError {
        let own = self.member();
        self.peer_timeout(peers, own, enqueued_by(peers, own))
    }

    /// Recycles the events of collectives still pending when the device is dropped (after its
    /// streams were synchronised, which settles them).
    pub(super) fn forget_pending(&mut self) {
        for communicator in self.communicators.values_mut() {
            for collective in communicator.pending.drain(..) {
                // SAFETY: an event of `self.ctx` (`watch` made the entry), given up with its
                // entry, drained here.
                unsafe { self.ctx.recycle_event(collective.event) };
            }
        }
    }
}

impl super::nccl::Communicator {
    /// Why this communicator fails, if it does, with its oldest pending collective's clock
    /// started at `since`.
    fn failure(&self, since: Instant, timeout: std::time::Duration) -> Option<Failure> {
        if self.is_stale() {
            return Some(Failure::Stale);
        }
        match super::nccl::async_error(&self.rank) {
            ncclResult_t::ncclSuccess | ncclResult_t::ncclInProgress => {
                (since.elapsed() >= timeout).then_some(Failure::Expired)
            }
            state => Some(Failure::Nccl(state)),
        }
    }
}
