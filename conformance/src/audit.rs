//! Auditing injected faults while a program runs (see [`FaultAudit`]).

use std::collections::BTreeSet;
use std::fmt;

use lockstep::{DeviceError, ServerError};
use lockstep_sim::{FaultKind, InjectedFault};

use crate::factory::Observer;

/// The blocking calls that return a stream's failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocking {
    /// `ComputeClient::flush`.
    Flush,
    /// `ComputeClient::sync`.
    Sync,
    /// A read (`read_one` and friends).
    Read,
}

impl fmt::Display for Blocking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Blocking::Flush => "flush",
            Blocking::Sync => "sync",
            Blocking::Read => "read",
        })
    }
}

/// A window of one stream's work: the operations it enqueued between two blocking calls,
/// named `(stream, index)`.
pub type WindowId = (usize, usize);

/// What is known about a window's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Window {
    /// No blocking call has told yet whether they all succeeded.
    Open,
    /// A `sync` or read after them returned `Ok`: every one succeeded.
    Clean,
    /// A blocking call after them returned a failure: any of them may have failed.
    Spoiled,
}

/// How often the audited programs reached the paths the audit exists for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Injected faults that surfaced.
    pub surfaced: usize,
    /// Faults that surfaced while a newer fault of the same stream waited behind them: several
    /// failures observed in one batch.
    pub batched: usize,
    /// Blocking calls made while injected faults were pending on two streams or more.
    pub two_streams_pending: usize,
    /// Creates refused with `OutOfMemory` after the runtime's reclaim and retry.
    pub refused_creates: usize,
    /// Reads not compared with the model because a failed window may have changed their data.
    pub reads_spoiled: usize,
}

impl std::ops::AddAssign for FaultStats {
    fn add_assign(&mut self, other: Self) {
        self.surfaced += other.surfaced;
        self.batched += other.batched;
        self.two_streams_pending += other.two_streams_pending;
        self.refused_creates += other.refused_creates;
        self.reads_spoiled += other.reads_spoiled;
    }
}

/// Judges a program run on a device that injects faults, against the contract:
/// - every fault injected into a stream's work surfaces exactly once, oldest first, on that
///   stream, at its next `flush`/`sync`/read: a blocking call returns `Ok` only once every
///   fault injected into operations of its stream enqueued before the call has surfaced;
/// - an allocation the device refuses (twice, so the runtime's retry fails too) is a typed
///   `OutOfMemory` at the call that allocated;
/// - data that no failed operation can have touched still equals the reference model.
///
/// **Invariant:** program stream `i` is device stream `i` (the executor uses its streams first
/// in order, and the server creates a device stream on a stream's first use).
///
/// Which operation a fault hit depends on the device's schedule, so data is judged through
/// windows: a buffer depends on every window that wrote it or one of its sources; a read that
/// disagrees with the model is a failure once all those windows are known clean, and is
/// excused if one of them is spoiled.
pub struct FaultAudit<'a> {
    observer: &'a dyn Observer,
    /// Per stream, its windows in order; the last one is open and receives new operations.
    windows: Vec<Vec<Window>>,
    surfaced: BTreeSet<u64>,
    /// Allocation refusals seen so far, each of which needs an injected allocation fault.
    refusals: usize,
    /// Mismatching reads that depend on open windows, judged once those resolve.
    deferred: Vec<(String, BTreeSet<WindowId>)>,
    /// Operations the device had been given when the current blocking call began.
    enqueued_before_call: u64,
    /// What the audit saw: faults surfaced, batched, refused creates, reads it could not compare.
    pub stats: FaultStats,
}

impl<'a> FaultAudit<'a> {
    /// An audit of a program on `streams` streams, reading the device's injected faults from
    /// `observer`.
    pub fn new(observer: &'a dyn Observer, streams: usize) -> Self {
        Self {
            observer,
            windows: vec![vec![Window::Open]; streams],
            surfaced: BTreeSet::new(),
            refusals: 0,
            deferred: Vec::new(),
            enqueued_before_call: 0,
            stats: FaultStats::default(),
        }
    }

    /// The window `stream`'s next operation belongs to.
    pub fn window(&self, stream: usize) -> WindowId {
        (stream, self.windows[stream].len() - 1)
    }

    /// Marks the start of a blocking call: its `Ok` vouches for the operations enqueued before
    /// it (what the runtime enqueues during the call, such as clearing the fault record, may
    /// fail after the call has taken the device's errors).
    pub fn begin_call(&mut self) {
        self.enqueued_before_call = self.observer.ops_enqueued();
    }

    /// Judges a blocking call's result on `stream` ([`begin_call`](Self::begin_call) marked its
    /// start), then resolves the windows it covers and opens the next one.
    pub fn blocking(
        &mut self,
        stream: usize,
        call: Blocking,
        result: Result<(), ServerError>,
    ) -> Result<(), String> {
        let faults = self.observer.injected_faults();
        let pending_streams: BTreeSet<_> =
            self.unsurfaced(&faults).filter_map(|f| f.stream).collect();
        if pending_streams.len() >= 2 {
            self.stats.two_streams_pending += 1;
        }
        let resolution = match result {
            Err(err) => {
                match InjectedFault::id_in(&err.to_string()) {
                    Some(id) => self.surface(stream, id, &faults)?,
                    None if is_allocation_refusal(&err) => self.explain_refusal(&faults)?,
                    None => return Err(format!("{call} returned `{err}`, no injected fault")),
                }
                Some(Window::Spoiled)
            }
            Ok(()) => {
                let before = self.enqueued_before_call;
                if let Some(f) = self
                    .unsurfaced(&faults)
                    .find(|f| f.stream == Some(stream as u32) && f.op < Some(before))
                {
                    return Err(format!(
                        "{call} returned Ok, but injected fault #{} ({:?}) of this stream never surfaced",
                        f.id, f.kind
                    ));
                }
                // A flush does not wait: its windows may still hold work that has not run.
                (call != Blocking::Flush).then_some(Window::Clean)
            }
        };
        let windows = &mut self.windows[stream];
        if let Some(resolution) = resolution {
            windows
                .iter_mut()
                .filter(|w| **w == Window::Open)
                .for_each(|w| *w = resolution);
        }
        windows.push(Window::Open);
        Ok(())
    }

    /// Judges a create's result; `Ok(true)` when it allocated.
    pub fn allocation<T>(&mut self, result: &Result<T, ServerError>) -> Result<bool, String> {
        match result {
            Ok(_) => Ok(true),
            Err(ServerError::OutOfMemory(_)) => {
                let faults = self.observer.injected_faults();
                self.explain_refusal(&faults)?;
                self.stats.refused_creates += 1;
                Ok(false)
            }
            Err(err) => Err(format!(
                "create returned `{err}`; a refused allocation must be OutOfMemory"
            )),
        }
    }

    /// Judges a read whose bytes disagree with the model (`what` says how), of data that
    /// depends on the windows `taint`: excused if one of them is spoiled, a failure if all are
    /// clean, judged in [`finish`](Self::finish) otherwise.
    pub fn mismatch(&mut self, what: String, taint: &BTreeSet<WindowId>) -> Result<(), String> {
        if self.excused(taint) {
            self.stats.reads_spoiled += 1;
        } else if taint.iter().all(|&w| self.state(w) == Window::Clean) {
            return Err(format!("{what}, and no failed operation touched it"));
        } else {
            self.deferred.push((what, taint.clone()));
        }
        Ok(())
    }

    /// After every stream synced to `Ok`: every injected fault surfaced, and every mismatching
    /// read depended on a failed window.
    pub fn finish(&mut self) -> Result<(), String> {
        let faults = self.observer.injected_faults();
        if let Some(f) = self.unsurfaced(&faults).next() {
            return Err(format!(
                "injected fault #{} ({:?}) on stream {:?} never surfaced",
                f.id, f.kind, f.stream
            ));
        }
        for (what, taint) in std::mem::take(&mut self.deferred) {
            if !self.excused(&taint) {
                return Err(format!("{what}, and no failed operation touched it"));
            }
            self.stats.reads_spoiled += 1;
        }
        Ok(())
    }

    /// Whether an injected fault of `stream` has yet to surface.
    pub fn pending(&self, stream: usize) -> bool {
        let faults = self.observer.injected_faults();
        self.oldest_unsurfaced(stream, &faults).is_some()
    }

    fn excused(&self, taint: &BTreeSet<WindowId>) -> bool {
        taint.iter().any(|&w| self.state(w) == Window::Spoiled)
    }

    fn state(&self, (stream, index): WindowId) -> Window {
        self.windows[stream][index]
    }

    /// Faults of a stream (allocations belong to none) that have not surfaced.
    fn unsurfaced<'f>(
        &'f self,
        faults: &'f [InjectedFault],
    ) -> impl Iterator<Item = &'f InjectedFault> + 'f {
        faults
            .iter()
            .filter(|f| f.stream.is_some() && !self.surfaced.contains(&f.id))
    }

    fn oldest_unsurfaced<'f>(
        &'f self,
        stream: usize,
        faults: &'f [InjectedFault],
    ) -> Option<&'f InjectedFault> {
        self.unsurfaced(faults)
            .find(|f| f.stream == Some(stream as u32))
    }

    /// Injected fault `id` surfaced on `stream`: it must be that stream's oldest pending one.
    fn surface(&mut self, stream: usize, id: u64, faults: &[InjectedFault]) -> Result<(), String> {
        let Some(fault) = faults.iter().find(|f| f.id == id) else {
            return Err(format!(
                "an error names injected fault #{id}, never injected"
            ));
        };
        if fault.stream != Some(stream as u32) {
            return Err(format!(
                "injected fault #{id} ({:?}) of stream {:?} surfaced on stream {stream}",
                fault.kind, fault.stream
            ));
        }
        if let Some(older) = self.oldest_unsurfaced(stream, faults)
            && older.id != id
        {
            return Err(format!(
                "injected fault #{id} surfaced before #{}, older, of the same stream",
                older.id
            ));
        }
        if !self.surfaced.insert(id) {
            return Err(format!("injected fault #{id} surfaced twice"));
        }
        self.stats.surfaced += 1;
        if self.oldest_unsurfaced(stream, faults).is_some() {
            self.stats.batched += 1;
        }
        Ok(())
    }

    /// An allocation was refused: the device must have refused (at least) one more allocation
    /// than were refused before.
    fn explain_refusal(&mut self, faults: &[InjectedFault]) -> Result<(), String> {
        let injected = faults
            .iter()
            .filter(|f| f.kind == FaultKind::AllocationFailure)
            .count();
        self.refusals += 1;
        if self.refusals > injected {
            return Err(format!(
                "{} allocations refused, but the device refused only {injected}",
                self.refusals
            ));
        }
        Ok(())
    }
}

/// An out-of-memory the runtime queued on a stream: its own allocation (the stream's fault
/// record) was refused, and the launch that needed it did not run.
fn is_allocation_refusal(err: &ServerError) -> bool {
    matches!(
        err,
        ServerError::OutOfMemory(_)
            | ServerError::Device {
                error: DeviceError::OutOfMemory { .. },
                ..
            }
    )
}
