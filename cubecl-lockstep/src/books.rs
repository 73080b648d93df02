//! The failure books: which bytes of which cubecl memory a failure left unwritten, as a
//! state machine without I/O.
//!
//! cubecl reports failures on memory (a failed launch leaves the buffers it would have
//! written carrying the failure, until something writes them again; a read of them fails from
//! any stream), Lockstep on streams (a stream's next `sync` returns its oldest failure, once).
//! The server turns each event into a transition here: a launch refused before it ran, a
//! launch skipped because an input carried a failure, a launch Lockstep accepted (it rewrites
//! its outputs, which then wait in their stream's *window* until a drain of that stream
//! proves them), a drain that proved a window or returned a failure, a host write, memory
//! freed or never allocated. The claims and their reports are cubecl-server's own
//! [`ErrorGraph`] and [`Taint`], so a read names a failure exactly as cubecl's own backends
//! do (the root error, `failure #n`, each skipped hop).
//!
//! **Invariant:** every failure id some [`Taint`] carries is in the graph (the graph counts
//! its carriers), and a freed memory's claims are released with it.

use std::collections::HashMap;
use std::ops::Range;

use cubecl_runtime::id::KernelId;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, ManagedMemoryId};
use cubecl_runtime::server::ServerError;
use cubecl_server::memory_management::{Claim, ErrorGraph, FailureId, Skipped, Taint};

/// Bytes of one cubecl allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// The allocation.
    pub memory: ManagedMemoryId,
    /// The bytes, from the allocation's start.
    pub bytes: Range<u64>,
}

/// The lockstep stream a launch went to, by number.
pub type StreamKey = u64;

/// The failure books of one device. See the module doc.
#[derive(Debug, Default)]
pub struct Books {
    graph: ErrorGraph,
    taints: HashMap<ManagedMemoryId, Taint>,
    /// Per stream, the outputs of launches Lockstep accepted since the stream's last drain.
    windows: HashMap<StreamKey, Vec<Region>>,
}

impl Books {
    /// A launch that failed before running (refused to compile, over a limit, or refused by
    /// Lockstep at the call): the bytes it would have written now carry `error`.
    pub fn refused(&mut self, written: &[Region], error: ServerError) {
        let failure = self.graph.insert(error);
        self.taint(written, failure);
        self.graph.prune(failure);
    }

    /// The failure claiming any byte of `regions`, and the allocation it was found on: what
    /// makes a launch reading them skip.
    pub fn claim(&self, regions: &[Region]) -> Option<(FailureId, ManagedMemoryId)> {
        regions
            .iter()
            .find_map(|r| self.failure_of(r).map(|f| (f, r.memory)))
    }

    /// The failure claiming any byte of `region`: a taint, or its allocation's failure.
    fn failure_of(&self, region: &Region) -> Option<FailureId> {
        let taint = self
            .taints
            .get(&region.memory)
            .and_then(|t| t.failure(&region.bytes));
        taint.or_else(|| self.graph.unallocated_failure(region.memory))
    }

    /// A launch of `kernel` skipped because `needed` carried `failure`: its outputs carry the
    /// same failure, and the skip is recorded for the reports' chains.
    pub fn skipped(
        &mut self,
        kernel: KernelId,
        (failure, needed): (FailureId, ManagedMemoryId),
        written: &[Region],
    ) {
        let produced = written.iter().map(|r| r.memory).collect();
        self.graph.skipped(
            failure,
            Skipped {
                kernel,
                needed,
                produced,
            },
        );
        self.taint(written, failure);
    }

    /// A launch or host write Lockstep accepted on `stream`: its outputs are being written (their claims
    /// end) and wait in the stream's window until a drain proves them.
    pub fn accepted(&mut self, stream: StreamKey, written: Vec<Region>) {
        written.iter().for_each(|r| self.written(r));
        self.windows.entry(stream).or_default().extend(written);
    }

    /// A host write of `region` was queued: its bytes have a writer again.
    pub fn written(&mut self, region: &Region) {
        if let Some(taint) = self.taints.get_mut(&region.memory) {
            taint.written(region.bytes.clone(), &mut self.graph);
        }
    }

    /// Whether `stream` has launches not yet proven by a drain.
    pub fn has_window(&self, stream: StreamKey) -> bool {
        self.windows.get(&stream).is_some_and(|w| !w.is_empty())
    }

    /// The streams with launches not yet proven, in order.
    pub fn open_windows(&self) -> Vec<StreamKey> {
        let mut open: Vec<StreamKey> = self
            .windows
            .iter()
            .filter(|(_, w)| !w.is_empty())
            .map(|(&s, _)| s)
            .collect();
        open.sort_unstable();
        open
    }

    /// A drain of `stream` returned `Ok`: every launch of its window ran.
    pub fn drained(&mut self, stream: StreamKey) {
        self.windows.remove(&stream);
    }

    /// A drain of `stream` returned `error`. Lockstep names the stream, not the launch, so
    /// the outputs of every launch of the window carry it (conservatively: an innocent
    /// launch queued after the faulty one is refused too). The window closes.
    pub fn drained_error(&mut self, stream: StreamKey, error: ServerError) {
        let written = self.windows.remove(&stream).unwrap_or_default();
        self.refused(&written, error);
    }

    /// `memory` was freed: its claims go with it.
    pub fn freed(&mut self, memory: ManagedMemoryId) {
        if let Some(mut taint) = self.taints.remove(&memory) {
            taint.clear(&mut self.graph);
        }
        self.windows
            .values_mut()
            .for_each(|w| w.retain(|r| r.memory != memory));
    }

    /// `memory` could not be allocated because of `error`: a read of it reports `error`.
    pub fn unallocated(&mut self, memory: &ManagedMemoryHandle, error: ServerError) {
        self.graph.fail_unallocated(memory, error);
    }

    /// What a read or check of `regions` owes: `Ok`, or every failure claiming them, each
    /// once (cubecl's `ServerError::Several` of `Unwritten` reports).
    pub fn report(&self, regions: &[Region]) -> Result<(), ServerError> {
        let claims = regions.iter().filter_map(|r| {
            let taint = self.taints.get(&r.memory).and_then(|t| t.failure(&r.bytes));
            match taint {
                Some(failure) => Some(Claim::Failed(failure, r.memory)),
                None => self
                    .graph
                    .unallocated_failure(r.memory)
                    .map(|_| Claim::Unallocated(r.memory)),
            }
        });
        self.graph.reports(claims)
    }

    /// How many failures the books hold: bounded by the memory that carries them.
    pub fn failures(&self) -> usize {
        self.graph.len()
    }

    fn taint(&mut self, regions: &[Region], failure: FailureId) {
        for region in regions {
            let taint = self.taints.entry(region.memory).or_default();
            taint.taint(region.bytes.clone(), failure, &mut self.graph);
        }
    }
}

#[cfg(test)]
mod tests;
