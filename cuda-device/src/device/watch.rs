//! Watching collectives until they complete, so that no host wait of the device outlives a
//! peer that never arrives (see `device/nccl.rs`).
//!
//! **Invariant:** a communicator's `pending` names its oldest collective not yet seen complete
//! (its stream, sequence and enqueue time) and an event recorded after its latest one; the
//! event completing means every collective of the rank before it completed. Host waits
//! ([`CudaDevice::wait_watching`]) poll what they wait for and, meanwhile, every pending
//! collective: one past the collective timeout has its rank aborted, which ends its kernels,
//! so the wait then completes, and a `PeerTimeout` is queued on the collective's stream, for
//! `take_errors`.

use std::time::Instant;

use cudarc::driver::sys;
use cudarc::nccl::sys::ncclResult_t;
use lockstep::collective::CommunicatorId;
use lockstep::{CollectiveError, Device, DeviceError, DeviceId};

use super::nccl::{abort, async_error, enqueued_by, failed, laggard, pause_polling, retire};
use super::{CudaDevice, CudaStream};
use crate::context::lock;

/// The oldest incomplete collective of a rank.
#[derive(Debug)]
pub(crate) struct Pending {
    stream: CudaStream,
    sequence: u64,
    since: Instant,
    /// Recorded after the rank's latest collective.
    event: sys::CUevent,
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
        let event = self.ctx.event()?;
        self.record_on(raw, event)?;
        let communicator = self.communicators.get_mut(&comm).expect("enqueued on it");
        match &mut communicator.pending {
            Some(pending) => {
                self.ctx
                    .recycle_event(std::mem::replace(&mut pending.event, event));
            }
            None => {
                communicator.pending = Some(Pending {
                    stream,
                    sequence,
                    since: Instant::now(),
                    event,
                });
            }
        }
        Ok(())
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
            if self.communicators.values().all(|c| c.pending.is_none()) {
                return block(self);
            }
            if done(self)? {
                return Ok(());
            }
            pause_polling(since.elapsed());
        }
    }

    /// Forgets completed collectives and aborts the ranks of those that failed or waited past
    /// the timeout, queueing their error on their stream.
    fn settle_collectives(&mut self) {
        // The common wait, with no collective in flight, allocates nothing.
        if self.communicators.values().all(|c| c.pending.is_none()) {
            return;
        }
        let ids: Vec<CommunicatorId> = self.communicators.keys().copied().collect();
        for comm in ids {
            let communicator = &self.communicators[&comm];
            let Some(pending) = &communicator.pending else {
                continue;
            };
            if self.ctx.event_done(pending.event) {
                let done = self
                    .communicators
                    .get_mut(&comm)
                    .and_then(|c| c.pending.take());
                if let Some(done) = done {
                    self.ctx.recycle_event(done.event);
                }
                continue;
            }
            let state = async_error(&communicator.rank);
            let running = matches!(
                state,
                ncclResult_t::ncclSuccess | ncclResult_t::ncclInProgress
            );
            if running && pending.since.elapsed() < self.collective_timeout {
                continue;
            }
            let (stream, peers) = (pending.stream, communicator.peers.clone());
            let timeout = self.abort_communicator(comm);
            let err = if running {
                timeout
            } else {
                failed(&peers, "ncclCommGetAsyncError", state)
            };
            self.collective_errors.push((stream, err));
        }
    }

    /// Aborts this device's rank of `comm` and retires its communicator; returns the
    /// `PeerTimeout` of its oldest pending collective (or of the one being enqueued).
    pub(super) fn abort_communicator(&mut self, comm: CommunicatorId) -> DeviceError {
        let own = self.member();
        let communicator = self
            .communicators
            .get_mut(&comm)
            .expect("a live communicator");
        let peers = communicator.peers.clone();
        let sequence = match communicator.pending.take() {
            Some(pending) => {
                self.ctx.recycle_event(pending.event);
                pending.sequence
            }
            None => enqueued_by(&peers, own),
        };
        let rank = lock(&communicator.rank).take();
        if let Some(rank) = rank {
            abort(rank);
        }
        let err = self.peer_timeout(&peers, own, sequence);
        retire(&peers);
        err
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
}
