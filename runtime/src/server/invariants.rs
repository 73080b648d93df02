//! `Server::check_invariants`: the server's bookkeeping checked against itself (the invariants
//! are listed in `crate::invariant`), and the self-tests' hook that plants a defect in it.
//!
//! The check runs after every task on a simulator (`Device::SIMULATED`, in release builds too)
//! or in a build with debug assertions, and after every task whose panic the actor caught,
//! until the device is lost: a lost device runs nothing more, so its books guard nothing. It
//! is linear in live buffers, deferred frees, pages and free ranges (a sort of the live slices
//! aside) and allocates one vector: 2% of the instructions of a release-built explorer run.

use std::collections::BTreeMap;
use std::fmt;

use super::streams::AfterStreams;
use super::{CaptureState, Server};
use crate::device::Device;
use crate::ids::BufferId;
use crate::invariant::{Invariant, PlantedDefect, Violation, ensure};
use crate::memory::{Books, Held};

/// Who references a slice, as messages name it.
#[derive(Clone, Copy)]
enum Holder {
    Buffer(BufferId),
    DeferredFree,
    /// Released, its users done, waiting for the next publication (`memory/books.rs`).
    Returning,
    /// Taken at a call for this buffer, not yet registered (`memory/books.rs`).
    InFlight(BufferId),
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Buffer(id) => write!(f, "buffer {}", id.0),
            Holder::DeferredFree => f.write_str("a deferred free"),
            Holder::Returning => f.write_str("a release awaiting publication"),
            Holder::InFlight(id) => write!(f, "buffer {} in flight", id.0),
        }
    }
}

impl<D: Device> Server<D> {
    /// Whether the server checks its invariants after every task, not only after a panic.
    fn checks_every_task(&self) -> bool {
        self.options.invariant_checks_every_task && (D::SIMULATED || cfg!(debug_assertions))
    }

    /// Runs after every task of the actor. A broken invariant marks the device lost, naming
    /// it: from then on every call on every stream fails with `DeviceLost`, instead of running
    /// on books that no longer match the memory. The device itself still runs, so its streams
    /// are drained first: on a lost device the server assumes no queued work runs any more
    /// (it returns released memory and pages without waiting).
    pub(super) fn after_task(&mut self, panicked: bool) {
        if self.lost.is_some() || !(panicked || self.checks_every_task()) {
            return;
        }
        if let Err(violation) = self.check_invariants() {
            self.drain_all();
            self.mark_lost_because(violation.to_string());
        }
    }

    /// Checks every invariant of [`Invariant`], the first broken one failing.
    fn check_invariants(&self) -> Result<(), Violation> {
        let books = self.memory();
        self.check_in_flight(&books)?;
        let mut held: Vec<Held<Holder>> = self
            .buffers
            .iter()
            .map(|(&id, state)| Held {
                slice: state.slice,
                holder: Holder::Buffer(id),
            })
            .chain(self.pending_frees.iter().map(|free| Held {
                slice: free.slice,
                holder: Holder::DeferredFree,
            }))
            .chain(books.returning().map(|slice| Held {
                slice,
                holder: Holder::Returning,
            }))
            .chain(books.in_flight().map(|(id, slice)| Held {
                slice,
                holder: Holder::InFlight(id),
            }))
            .collect();
        books.memory.check_invariants(&mut held)?;
        drop(books);
        self.check_deferred_events()?;
        self.check_graph_refs()
    }

    /// [`Invariant::InFlight`]: each slice taken at a call has an issued id no live buffer
    /// has. (That nothing else holds its slice is [`Invariant::FreeAndReferenced`]'s check.)
    fn check_in_flight(&self, books: &Books) -> Result<(), Violation> {
        for (id, _) in books.in_flight() {
            ensure(
                books.issued(id) && !self.buffers.contains_key(&id),
                Invariant::InFlight,
                || {
                    format!(
                        "buffer {} is in flight, but {}",
                        id.0,
                        match books.issued(id) {
                            true => "a live buffer has its id",
                            false => "its id was never issued",
                        }
                    )
                },
            )?;
        }
        Ok(())
    }

    /// [`Invariant::DeferredFreeEvents`].
    fn check_deferred_events(&self) -> Result<(), Violation> {
        let frees = self.pending_frees.iter().map(|free| {
            let what = format!("deferred free of page {}", free.slice.page.0);
            (what, &free.after)
        });
        let destroys = self
            .pending_graph_destroys
            .iter()
            .map(|destroy| ("deferred graph destruction".to_owned(), &destroy.after));
        for (what, after) in frees.chain(destroys) {
            self.check_after(&what, after)?;
        }
        Ok(())
    }

    /// Each stream `after` follows has an event, awaits its capture's end, or failed to record.
    fn check_after(&self, what: &str, after: &AfterStreams<D>) -> Result<(), Violation> {
        let accounted = after.events.len() + after.awaiting_capture.len() + after.unrecorded.len();
        ensure(
            accounted == after.streams.len(),
            Invariant::DeferredFreeEvents,
            || {
                format!(
                    "the {what} follows streams {}, but has events {}, awaiting a capture's end {}, failed to record {}",
                    after.streams.len(),
                    after.events.len(),
                    after.awaiting_capture.len(),
                    after.unrecorded.len()
                )
            },
        )?;
        for &stream in &after.awaiting_capture {
            let capturing = self.streams.get(&stream).is_some_and(|s| s.capturing());
            ensure(capturing, Invariant::DeferredFreeEvents, || {
                format!(
                    "the {what} awaits the end of {stream}'s capture, but {stream} is not capturing"
                )
            })?;
        }
        Ok(())
    }

    /// [`Invariant::GraphRefs`].
    fn check_graph_refs(&self) -> Result<(), Violation> {
        let captures = self.streams.values().filter_map(|s| match &s.capture {
            CaptureState::Capturing { buffers, .. } => Some(buffers.keys().copied()),
            _ => None,
        });
        let mut holders: BTreeMap<BufferId, u32> = BTreeMap::new();
        let held = self
            .graphs
            .values()
            .flat_map(|g| g.buffers.iter().map(|&(b, _)| b))
            .chain(
                self.pending_graph_destroys
                    .iter()
                    .flat_map(|d| d.buffers.iter().copied()),
            )
            .chain(captures.flatten());
        for buffer in held {
            *holders.entry(buffer).or_default() += 1;
        }
        for (id, state) in &self.buffers {
            let holding = holders.remove(id).unwrap_or(0);
            ensure(state.graph_refs == holding, Invariant::GraphRefs, || {
                format!(
                    "buffer {}: counted graph references {}, but graphs, pending graph destructions and open captures holding it {holding}",
                    id.0, state.graph_refs
                )
            })?;
            ensure(!state.released || holding > 0, Invariant::GraphRefs, || {
                format!(
                    "buffer {} is released, yet kept though no graph holds it",
                    id.0
                )
            })?;
        }
        match holders.keys().next() {
            Some(gone) => Err(Violation {
                invariant: Invariant::GraphRefs,
                detail: format!("a graph or capture holds buffer {}, which is gone", gone.0),
            }),
            None => Ok(()),
        }
    }

    /// Self-test hook: plants `defect` in the books (see [`PlantedDefect`]). Returns whether
    /// the server held what the defect needs.
    pub(crate) fn plant_defect(&mut self, defect: PlantedDefect) -> bool {
        match defect {
            PlantedDefect::SplitFreeRange => self.memory().memory.split_free_range(),
            PlantedDefect::MiscountBytesInUse => self.memory().memory.miscount_bytes_in_use(),
            PlantedDefect::FreeLiveSlice => match self.buffers.values().next() {
                Some(state) => {
                    self.memory().memory.free(state.slice);
                    true
                }
                None => false,
            },
            PlantedDefect::ReissueInFlight => match self.buffers.iter().next() {
                Some((&id, state)) => {
                    self.memory().reissue(id, state.slice);
                    true
                }
                None => false,
            },
            PlantedDefect::ForgetDeferredFreeEvents => match self.pending_frees.first_mut() {
                Some(free) => {
                    free.after.events.clear();
                    true
                }
                None => false,
            },
            PlantedDefect::MiscountGraphRef => match self.buffers.values_mut().next() {
                Some(state) => {
                    state.graph_refs += 1;
                    true
                }
                None => false,
            },
            PlantedDefect::TightenBudget => self.memory().memory.tighten_budget(),
        }
    }
}
