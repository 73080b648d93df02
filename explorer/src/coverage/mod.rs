//! Coverage as a measured quantity: which calls of the public API the explorer makes, in which
//! stream state, with which arguments, on buffers standing how towards other streams.
//!
//! **The space.** A cell is (method, stream state, argument class, relation) — see
//! [`space`]. Methods are every public call of `ComputeClient`, `Graph`, `Handle`, `Bytes` and
//! `ProfileDuration` that reaches a stream; the calling stream is idle, `graph_prepare`d,
//! capturing, holding a failure known to be pending, or its device is lost; argument classes
//! (empty, one element, one element below/at/above a size where allocations change pool,
//! overflowing sizes, views at non-zero offsets of packed groups, one handle bound twice, a
//! misaligned offset, a handle of another client, ordinary) and relations (the buffer held by
//! the live graph, recorded by the open capture, dropped while the work that used it may still
//! be queued, last used by another stream, or by the caller; for `create` and `empty`, whether
//! the calling thread served the allocation or the actor did) list only what applies to each
//! method. A call on a lost device is one cell per method: every call then fails with
//! `DeviceLost`. On a prepared stream or one holding a failure, relations are not told apart:
//! the server orders a buffer's accesses by its history and by captures alone. Unreachable cells are declared with their reason ([`space::EXCLUDED`]), and
//! so is every public method the explorer never calls ([`space::NOT_CALLED`]). The numbers a
//! call takes (lengths, offsets, shapes…) have a table of their own ([`numbers`]): which
//! boundary class ([`Class`](crate::boundary::Class)) each value fell in, with its unreachable
//! cells declared ([`numbers::NUMBERS_EXCLUDED`]).
//!
//! **How the explorer reaches it.** Stream states: `BeginCapture` keeps a capture open across
//! other threads' turns, `Prepare` leaves a stream prepared, `Overrun` (fault-free worlds) makes
//! a failure pending until the stream's next blocking call, and `--faults` worlds lose the
//! device. Argument classes: buffer sizes are drawn at the world's pool edges
//! (`World::size_edges_bytes`) one time in eight; `Oversized` draws overflowing sizes;
//! numbers are boundary values one time in four ([`Bounds`](crate::boundary::Bounds));
//! `LaunchView` and `ReadTensors` use packed groups; `Edge` makes the calls no other action
//! makes (empty buffers and writes, misaligned writes, a peer's handle given to this device).
//! Relations: eight streams at most shared by up to four threads, captures and graphs over the
//! shared buffer slots, and releases at any time.
//!
//! **Architecture Invariant:** recording never changes what the device sees: the driver
//! records the cell of each call from what it already knows (its model, its captures, the
//! argument sizes) into a fixed counter array, with or without `--coverage`; a seed's draw never
//! depends on another seed's coverage, so `lockstep replay --seed S` reproduces any run.

pub mod numbers;
mod report;
pub mod space;

use std::collections::{BTreeMap, BTreeSet};

use lockstep::StreamId;

pub use numbers::Number;
pub use report::Report;
pub use space::{Arg, Cell, Method, Relation, Space, StreamState};

/// Hit counts per cell of the [`Space`], merged across runs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Hits {
    /// Indexed like [`Space::cells`]; empty until the first hit.
    counts: Vec<u64>,
    /// Cells recorded that the space does not list: a gap in its definition.
    outside: BTreeSet<Cell>,
    /// Hits of the numbers' cells, indexed like [`numbers::cells`]; empty until the first.
    numbers: Vec<u64>,
}

impl Hits {
    /// Counts one hit of `cell`; a cell the space does not list is kept aside as a gap.
    pub fn hit(&mut self, cell: Cell) {
        let space = Space::get();
        match space.index(cell) {
            Some(i) => {
                if self.counts.is_empty() {
                    self.counts = vec![0; space.cells.len()];
                }
                self.counts[i] += 1;
            }
            None => {
                self.outside.insert(cell);
            }
        }
    }

    /// Counts one value of `number` in its class.
    pub fn number(&mut self, number: Number, value: u64) {
        if self.numbers.is_empty() {
            self.numbers = vec![0; Number::ALL.len() * crate::boundary::Class::ALL.len()];
        }
        self.numbers[numbers::index(number, number.class(value))] += 1;
    }

    /// Adds `other`'s hits to these.
    pub fn merge(&mut self, other: &Hits) {
        if self.counts.is_empty() {
            self.counts = vec![0; other.counts.len()];
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        if self.numbers.is_empty() {
            self.numbers = vec![0; other.numbers.len()];
        }
        for (mine, theirs) in self.numbers.iter_mut().zip(&other.numbers) {
            *mine += theirs;
        }
        self.outside.extend(&other.outside);
    }

    /// Hits of cell `index` of [`Space::cells`].
    pub fn count(&self, index: usize) -> u64 {
        self.counts.get(index).copied().unwrap_or(0)
    }

    /// Hits of cell `index` of [`numbers::cells`].
    pub fn number_count(&self, index: usize) -> u64 {
        self.numbers.get(index).copied().unwrap_or(0)
    }

    /// Cells recorded outside the space.
    pub fn outside(&self) -> &BTreeSet<Cell> {
        &self.outside
    }
}

impl std::fmt::Debug for Hits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hit = self.counts.iter().filter(|&&c| c > 0).count();
        write!(
            f,
            "Hits {{ cells hit: {hit}, outside: {:?} }}",
            self.outside
        )
    }
}

/// Whether a call of `method` waits for everything its stream enqueued before it.
fn waits(method: Method) -> bool {
    matches!(
        method,
        Method::Sync
            | Method::SyncAll
            | Method::ReadOne
            | Method::ReadAsync
            | Method::ReadTensorAsync
            | Method::Materialize
    )
}

/// The last use of a buffer.
#[derive(Clone, Copy, Debug)]
struct Use {
    /// The stream that allocated it: its release rides on that stream.
    owner: StreamId,
    last: StreamId,
    /// How many waiting calls `last` had made before that use.
    epoch: u64,
}

/// One run's recording: the hits, and what the relations are judged from.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The cells hit so far.
    pub hits: Hits,
    /// Model buffer → its last use.
    uses: BTreeMap<u64, Use>,
    /// Stream → how many calls that wait for it it made.
    epochs: BTreeMap<StreamId, u64>,
}

/// How a buffer stands towards the open capture and the live graph.
#[derive(Clone, Copy, Debug, Default)]
pub struct Held {
    /// A live graph replays launches that use the buffer.
    pub by_graph: bool,
    /// The open capture recorded a launch that uses the buffer.
    pub by_capture: bool,
}

impl Recorder {
    fn epoch(&self, s: StreamId) -> u64 {
        self.epochs.get(&s).copied().unwrap_or(0)
    }

    /// Buffer `buf` was allocated on `s`.
    pub fn created(&mut self, buf: u64, s: StreamId) {
        let epoch = self.epoch(s);
        self.uses.insert(
            buf,
            Use {
                owner: s,
                last: s,
                epoch,
            },
        );
    }

    /// The stream that allocated `buf`, if the driver recorded it.
    pub fn owner(&self, buf: u64) -> Option<StreamId> {
        self.uses.get(&buf).map(|u| u.owner)
    }

    /// Records a call in `state` on `s` on buffers `bufs` (each held as it says); the relation
    /// is the first of theirs in [`Relation`]'s order. Then notes each use (and, for a call
    /// that waits, that `s` completed its earlier work).
    pub fn call(
        &mut self,
        method: Method,
        (state, s): (StreamState, StreamId),
        arg: Arg,
        bufs: &[(u64, Held)],
    ) {
        let relation = bufs
            .iter()
            .map(|&(b, held)| self.relation(b, s, held))
            .min()
            .unwrap_or(Relation::None);
        self.hits.hit(Cell::new(method, state, arg, relation));
        let epoch = self.epoch(s);
        for &(b, _) in bufs {
            let owner = self.owner(b).unwrap_or(s);
            self.uses.insert(
                b,
                Use {
                    owner,
                    last: s,
                    epoch,
                },
            );
        }
        if waits(method) {
            *self.epochs.entry(s).or_default() += 1;
        }
    }

    /// How `buf` stands towards `s`: held by the graph or the capture, else last used by
    /// another stream or by `s`.
    fn relation(&self, buf: u64, s: StreamId, held: Held) -> Relation {
        match self.uses.get(&buf) {
            _ if held.by_graph => Relation::LiveGraph,
            _ if held.by_capture => Relation::CapturingStream,
            Some(u) if u.last != s => Relation::OtherStream,
            _ => Relation::Own,
        }
    }

    /// Records an allocating call of `method` on a stream in `state` that `path` served
    /// ([`Relation::AtCall`] or [`Relation::ByActor`]).
    pub fn allocated(&mut self, method: Method, state: StreamState, arg: Arg, path: Relation) {
        debug_assert!(!waits(method), "an allocation waits for nothing queued");
        self.hits.hit(Cell::new(method, state, arg, path));
    }

    /// Records the driver dropping its handle of `buf` while its owner stream is in `state`.
    pub fn dropped(&mut self, state: StreamState, buf: u64, held: Held) {
        let relation = match self.uses.get(&buf) {
            _ if held.by_graph => Relation::LiveGraph,
            _ if held.by_capture => Relation::CapturingStream,
            Some(u) if self.epoch(u.last) == u.epoch => Relation::Queued,
            Some(u) if u.last != u.owner => Relation::OtherStream,
            _ => Relation::Own,
        };
        self.hits
            .hit(Cell::new(Method::DropHandle, state, Arg::Any, relation));
    }
}

/// The argument class of an allocation or transfer of `bytes`, given the sizes at which
/// allocations change pool.
pub fn size_class(bytes: u64, edges_bytes: &[u64]) -> Arg {
    const ELEM: u64 = 4;
    match bytes {
        0 => Arg::Empty,
        ELEM => Arg::One,
        b if edges_bytes.contains(&b) => Arg::AtEdge,
        b if edges_bytes.contains(&(b + ELEM)) => Arg::BelowEdge,
        b if edges_bytes.iter().any(|&e| e + ELEM == b) => Arg::AboveEdge,
        _ => Arg::Ordinary,
    }
}

#[cfg(test)]
mod tests;
