//! The pools' books, shared by the calling threads and the actor: an allocation that the pools
//! can serve is taken by the calling thread under a short lock, without a round trip to the
//! actor, and the actor is told through the queue (`Server::register`, in `server/`).
//!
//! **Who owns what.** Under the lock ([`Books`]): the pools (`DeviceMemory`, every slice and
//! page count), the next buffer id, the slices handed out at a call whose registration has not
//! run yet (`in_flight`), the slices released whose users are done but not yet back in their
//! pools (`returning`, still counted in use), the streams whose allocations may be served at
//! the call, and whether the device is lost. The actor alone: the pages (device buffers), each
//! buffer's access history, and deferred frees.
//!
//! **Architecture Invariant (allocation at the call is deterministic).** What a calling thread
//! reads under the lock changes only (a) at callers' own calls: allocations, `allocation_mode`
//! and persistent windows, or (b) at a publication point, where released slices return to their
//! pools, pages are added or given back, layouts installed, budgets set, capture windows opened
//! and closed. A publication point is the task of a blocking call, while its caller waits
//! (`ActorState::caller_waits`), or a caller that missed and has seen the actor run every task
//! queued before its call (`ActorHandle::catch_up`). Never a task no caller waits for. So which
//! slice an allocation gets, and whether it is served at the call or by the actor, depends on
//! the calls a program made and never on how far the actor got: one program run twice on a
//! simulator allocates alike, threaded or inline. The one exception is device loss, noted at
//! once (it only ever turns on): an allocation served at the call, like a write or a launch,
//! may succeed after a loss that no call has reported yet, and fails with `DeviceLost` once
//! one has.
//!
//! **The path of an allocation.** (1) If the pools serve it from what is published: taken at
//! the call, no wait. (2) If they miss on a stream the actor serves: the caller waits until the
//! actor has run every task queued before (it spins on a counter; the released slices it waits
//! for are usually those of its own last drops), publishes, and tries once more. (3) Otherwise
//! (a new page, the stream's first allocation, an overflowing size): a blocking call, where the
//! actor publishes, reclaims, grows the pools within their caps and the budget, retries once
//! after a cleanup, and returns `OutOfMemory` typed, at the call. Pages are only ever added
//! there, so a budget is never crossed at a call.
//!
//! **Ordering.** A slice in a pool's free list was released by a task that already ran, and a
//! pool serves only its own stream (the persistent pool: a slice whose users all completed), so
//! a slice taken at a call is reused in stream order exactly as if the actor had taken it: the
//! registration task, queued before the call returns (or, for an `empty` outside a capture
//! window, at the handle's first use: `handle.rs`), runs after the release, and every later use
//! of the handle is queued after the registration. The registration records the allocation as
//! a write on the allocating stream, as the actor's own allocation does. A slice whose handle
//! dropped before any use was never registered: it goes back at the drop
//! ([`Books::give_back_unused`]), to its pool at the next publication like a released one.
//!
//! `Server::check_invariants` counts the in-flight and returning slices as held
//! ([`Invariant::BytesInUse`](crate::invariant::Invariant::BytesInUse)), and checks that each
//! in-flight buffer id is fresh ([`Invariant::InFlight`](crate::invariant::Invariant::InFlight)).

use std::collections::{BTreeMap, BTreeSet};

use super::{DeviceMemory, PoolRef, SliceLocation};
use crate::actor::{ActorHandle, ActorState};
use crate::error::ServerError;
use crate::ids::BufferId;
use crate::stream::StreamId;
use crate::sync::{Mutex, lock};

/// Tries to serve `size_bytes` on `stream` at the call: from what is published, then, after a
/// miss, once `actor` has run every task queued before, from what that published (the path in
/// the module documentation). Neither served: the caller must ask the actor.
pub(crate) fn take_at_call<S: ActorState>(
    books: &Mutex<Books>,
    actor: &ActorHandle<S>,
    stream: StreamId,
    size_bytes: u64,
) -> Result<AtCall, ServerError> {
    let at_call = lock(books).take_at_call(stream, size_bytes, false)?;
    if at_call != AtCall::Missed {
        return Ok(at_call);
    }
    actor.catch_up();
    lock(books).take_at_call(stream, size_bytes, true)
}

/// How the device's allocations were served: at the call, or by the actor. Test hook: the
/// explorer checks that its seeds take both paths.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocationPaths {
    /// Served by the calling thread from a page the pools held.
    pub at_call: u64,
    /// Served by the actor, in a blocking call (including those refused).
    pub by_actor: u64,
}

/// What [`Books::take_at_call`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtCall {
    /// Served: the buffer's id, its slice in flight until [`Books::registered`] (or, never
    /// used, [`Books::give_back_unused`]). `lazy`: the slice came from the stream's own pools
    /// outside a capture, so its registration may wait for the handle's first use.
    Taken { buffer: BufferId, lazy: bool },
    /// The stream's pools had no room in what is published: publishing may give them some.
    Missed,
    /// Only the actor can serve it: the stream's first allocation, or a size that overflows.
    ActorOnly,
}

/// What calling threads and the actor share about memory. See the module documentation.
#[derive(Debug)]
pub(crate) struct Books {
    pub memory: DeviceMemory,
    next_buffer: u64,
    /// Slices taken at a call, by the buffer they become once `Server::register` runs.
    in_flight: BTreeMap<BufferId, SliceLocation>,
    /// Released slices whose users are done, back in their pools at the next publication.
    returning: Vec<SliceLocation>,
    /// Streams the actor opened and served an allocation on (in a blocking call): only these
    /// are served at the call, so the registration finds its stream open.
    served: BTreeSet<StreamId>,
    /// Streams in a capture window (`graph_prepare` to `stop_capture`): their allocations are
    /// registered at once, so that the capture sees them (`AllocationInCapture`).
    capturing: BTreeSet<StreamId>,
    /// The device is lost, for this reason: every allocation fails with it.
    lost: Option<String>,
    paths: AllocationPaths,
}

impl Books {
    pub fn new(memory: DeviceMemory) -> Self {
        Self {
            memory,
            next_buffer: 0,
            in_flight: BTreeMap::new(),
            returning: Vec::new(),
            served: BTreeSet::new(),
            capturing: BTreeSet::new(),
            lost: None,
            paths: AllocationPaths::default(),
        }
    }

    /// A fresh buffer id. Ids are never reused.
    pub fn next_buffer(&mut self) -> BufferId {
        let id = BufferId(self.next_buffer);
        self.next_buffer += 1;
        id
    }

    /// Serves `size_bytes` on `stream` at the call if a page its pools hold has room, after
    /// publishing if the caller is at a publication point (`published`). A lost device refuses.
    pub fn take_at_call(
        &mut self,
        stream: StreamId,
        size_bytes: u64,
        published: bool,
    ) -> Result<AtCall, ServerError> {
        if let Some(reason) = &self.lost {
            return Err(ServerError::DeviceLost {
                reason: reason.clone(),
            });
        }
        let size = self.memory.slot_bytes(size_bytes);
        let Some(size) = size.filter(|_| self.served.contains(&stream)) else {
            return Ok(AtCall::ActorOnly);
        };
        if published {
            self.publish();
        }
        let Ok(slice) = self.memory.try_alloc(stream, size) else {
            return Ok(AtCall::Missed);
        };
        let id = self.next_buffer();
        self.in_flight.insert(id, slice);
        self.paths.at_call += 1;
        let lazy = slice.pool != PoolRef::Persistent && !self.capturing.contains(&stream);
        Ok(AtCall::Taken { buffer: id, lazy })
    }

    /// A released slice whose users are done: back in its pool at the next publication.
    pub fn release(&mut self, slice: SliceLocation) {
        self.returning.push(slice);
    }

    /// The last handle to `buffer`, taken at a call and never registered, dropped: no task
    /// ever named it, so its slice returns as a released one does, without the actor.
    pub fn give_back_unused(&mut self, buffer: BufferId) {
        let slice = self
            .in_flight
            .remove(&buffer)
            .expect("an unregistered buffer is in flight until its last handle drops");
        self.returning.push(slice);
    }

    /// Opens or closes `stream`'s capture window: its persistent window, and no lazy
    /// registration meanwhile (the server, at `graph_prepare` and `stop_capture`).
    pub fn capture_window(&mut self, stream: StreamId, open: bool) {
        self.memory.persistent_window(stream, open);
        if open {
            self.capturing.insert(stream);
        } else {
            self.capturing.remove(&stream);
        }
    }

    /// Returns the released slices to their pools. Only at a publication point (module doc).
    pub fn publish(&mut self) {
        for slice in self.returning.drain(..) {
            self.memory.free(slice);
        }
    }

    /// Released slices not yet published.
    pub fn returning(&self) -> impl Iterator<Item = SliceLocation> + '_ {
        self.returning.iter().copied()
    }

    /// The actor took over `buffer`, taken at a call; returns its slice.
    pub fn registered(&mut self, buffer: BufferId) -> Option<SliceLocation> {
        self.in_flight.remove(&buffer)
    }

    /// The actor served an allocation on `stream` (open from now on).
    pub fn served_by_actor(&mut self, stream: StreamId) {
        self.served.insert(stream);
        self.paths.by_actor += 1;
    }

    /// The actor was asked to serve an allocation it refused.
    pub fn refused_by_actor(&mut self) {
        self.paths.by_actor += 1;
    }

    pub fn lose(&mut self, reason: &str) {
        self.lost.get_or_insert_with(|| reason.to_owned());
    }

    pub fn paths(&self) -> AllocationPaths {
        self.paths
    }

    /// Slices taken at a call and not yet registered.
    pub fn in_flight(&self) -> impl Iterator<Item = (BufferId, SliceLocation)> + '_ {
        self.in_flight.iter().map(|(&id, &slice)| (id, slice))
    }

    /// Whether `buffer` is below every id handed out so far.
    pub fn issued(&self, buffer: BufferId) -> bool {
        buffer.0 < self.next_buffer
    }

    /// Self-test hook (`PlantedDefect::ReissueInFlight`): puts live `buffer` back in flight.
    pub fn reissue(&mut self, buffer: BufferId, slice: SliceLocation) {
        self.in_flight.insert(buffer, slice);
    }
}

/// Model checks of the allocation path (`scripts/loom.sh`): the real books and actor, with an
/// actor state that does what the server does with them (register, release, publish while a
/// caller waits, serve a miss by growing a page) and no device. Loom runs every interleaving of
/// the calling threads and the actor, so a slice handed out twice, a release lost, or a slice
/// that depends on how far the actor got fails them.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::memory::{MemoryConfiguration, PageId, PoolLayout};
    use crate::sync::Arc;

    const ALIGNMENT: u64 = 256;

    fn check(model: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = builder.preemption_bound.or(Some(3));
        builder.check(model);
    }

    /// The server's part, without a device: pages are numbers.
    struct Actor {
        books: Arc<Mutex<Books>>,
        live: BTreeMap<BufferId, SliceLocation>,
        pages: u64,
    }

    impl ActorState for Actor {
        fn task_panicked(&mut self, stream: StreamId, message: String) {
            panic!("no task of these models panics, but one on {stream} did: {message}");
        }

        fn task_finished(&mut self, panicked: bool) {
            assert!(!panicked, "no task of these models panics");
        }

        fn caller_waits(&mut self, _waits: bool) {
            lock(&self.books).publish();
        }
    }

    impl Actor {
        fn register(&mut self, buffer: BufferId) {
            let slice = lock(&self.books).registered(buffer).expect("in flight");
            assert!(self.live.insert(buffer, slice).is_none(), "registered once");
        }

        fn release(&mut self, buffer: BufferId) {
            let slice = self.live.remove(&buffer).expect("live");
            lock(&self.books).release(slice);
        }

        /// A blocking allocation: the pools, grown by a page if need be.
        fn allocate(&mut self, stream: StreamId, size_bytes: u64) -> BufferId {
            let mut books = lock(&self.books);
            let size = books.memory.slot_bytes(size_bytes).expect("small");
            let slice = match books.memory.try_alloc(stream, size) {
                Ok(slice) => slice,
                Err(need) => {
                    self.pages += 1;
                    books.memory.grow(stream, need, PageId(self.pages), size)
                }
            };
            books.served_by_actor(stream);
            let id = books.next_buffer();
            drop(books);
            assert!(self.live.insert(id, slice).is_none(), "a fresh id");
            id
        }

        /// Every live slice is distinct, and the pools count exactly the live, in-flight and
        /// returning slices as in use.
        fn consistent(&self) {
            let books = lock(&self.books);
            let held: Vec<SliceLocation> = self
                .live
                .values()
                .copied()
                .chain(books.in_flight().map(|(_, slice)| slice))
                .chain(books.returning())
                .collect();
            for (i, a) in held.iter().enumerate() {
                for b in &held[i + 1..] {
                    let apart = a.page != b.page
                        || a.offset + a.size <= b.offset
                        || b.offset + b.size <= a.offset;
                    assert!(apart, "slices {a:?} and {b:?} overlap");
                }
            }
            assert_eq!(books.memory.usage().allocations, held.len() as u64);
        }
    }

    /// An actor over books whose one sliced pool carves pages of `slices` slices.
    fn start(slices: u64) -> (ActorHandle<Actor>, Arc<Mutex<Books>>) {
        let config = MemoryConfiguration {
            pools: vec![PoolLayout {
                page_bytes: slices * ALIGNMENT,
                max_slice_bytes: ALIGNMENT,
                cap_bytes: 64 * ALIGNMENT,
            }],
        };
        let books = Arc::new(Mutex::new(Books::new(DeviceMemory::new(config, ALIGNMENT))));
        let actor = Actor {
            books: books.clone(),
            live: BTreeMap::new(),
            pages: 0,
        };
        (ActorHandle::spawn("loom-books".to_owned(), actor), books)
    }

    /// A client's allocation, as `ComputeClient::allocate` makes it.
    fn allocate(
        actor: &ActorHandle<Actor>,
        books: &Mutex<Books>,
        stream: StreamId,
    ) -> (BufferId, SliceLocation) {
        match take_at_call(books, actor, stream, ALIGNMENT).expect("not lost") {
            AtCall::Taken { buffer: id, .. } => {
                let slice = lock(books)
                    .in_flight()
                    .find(|&(i, _)| i == id)
                    .expect("in flight")
                    .1;
                actor.submit(stream, move |a| a.register(id));
                (id, slice)
            }
            AtCall::Missed | AtCall::ActorOnly => {
                let id = actor
                    .submit_blocking(move |a| a.allocate(stream, ALIGNMENT))
                    .unwrap();
                let slice = actor.submit_blocking(move |a| a.live[&id]).unwrap();
                (id, slice)
            }
        }
    }

    /// A drop, as `Handle`'s: the release rides on the queue.
    fn release(actor: &ActorHandle<Actor>, stream: StreamId, id: BufferId) {
        actor.submit(stream, move |a| a.release(id));
    }

    /// The invariant of the module: a program's allocations do not depend on how far the actor
    /// got. The actor serves the stream's first allocation with a page of two slices; the
    /// second is served at the call; after a drop, the third misses what is published, catches
    /// up and takes the released slice, however the release and the calls interleave.
    #[test]
    fn a_released_slice_is_reused_at_the_call_whatever_the_actor_did() {
        check(|| {
            let (actor, books) = start(2);
            let s = StreamId(0);
            let (first, slice) = allocate(&actor, &books, s);
            let (second, _) = allocate(&actor, &books, s);
            release(&actor, s, first);
            let (third, again) = allocate(&actor, &books, s);
            assert_ne!(first, third);
            assert_eq!(again, slice);
            assert_eq!(
                lock(&books).paths(),
                AllocationPaths {
                    at_call: 2,
                    by_actor: 1
                }
            );
            release(&actor, s, second);
            release(&actor, s, third);
            actor.submit_blocking(|a| a.consistent()).unwrap();
        });
    }

    /// A slice taken at the call and dropped before any use (`handle.rs`: never registered)
    /// goes back without the actor, at the drop, and is reused at the call once published,
    /// while the actor runs the release of another slice: no slice is handed out twice, and
    /// the books stay consistent, whatever the actor did meanwhile.
    #[test]
    fn a_slice_dropped_unused_returns_without_the_actor() {
        check(|| {
            let (actor, books) = start(3);
            let s = StreamId(0);
            let (first, _) = allocate(&actor, &books, s);
            let (second, second_slice) = allocate(&actor, &books, s);
            release(&actor, s, second);
            let (unused, unused_slice) = match take_at_call(&books, &actor, s, ALIGNMENT).unwrap() {
                AtCall::Taken { buffer, lazy } => {
                    assert!(lazy, "a stream pool's slice outside a capture");
                    let books = lock(&books);
                    (
                        buffer,
                        books.in_flight().find(|&(i, _)| i == buffer).unwrap().1,
                    )
                }
                other => panic!("the page has room for a third slice: {other:?}"),
            };
            lock(&books).give_back_unused(unused);
            // The page is full until the catch-up publishes both returns, whatever the actor
            // did meanwhile: then the two allocations take exactly those two slices.
            let (again, again_slice) = allocate(&actor, &books, s);
            let (last, last_slice) = allocate(&actor, &books, s);
            assert!(again != unused && last != unused, "ids are never reused");
            let mut reused = [again_slice, last_slice].map(|l| l.offset);
            let mut returned = [second_slice, unused_slice].map(|l| l.offset);
            reused.sort_unstable();
            returned.sort_unstable();
            assert_eq!(reused, returned);
            for id in [first, again, last] {
                release(&actor, s, id);
            }
            actor.submit_blocking(|a| a.consistent()).unwrap();
        });
    }

    /// Two threads allocate at the call from one stream's page while the actor registers:
    /// they never get the same slice, and once both released, the books are consistent.
    #[test]
    fn concurrent_allocations_at_the_call_never_share_a_slice() {
        check(|| {
            let (actor, books) = start(4);
            let s = StreamId(0);
            // The stream's first allocation is the actor's; its page has room for the others.
            let (first, _) = allocate(&actor, &books, s);
            let other = {
                let (actor, books) = (actor.clone(), books.clone());
                loom::thread::spawn(move || allocate(&actor, &books, s))
            };
            let (mine, my_slice) = allocate(&actor, &books, s);
            let (theirs, their_slice) = other.join().unwrap();
            assert_ne!(mine, theirs);
            assert_ne!(my_slice, their_slice);
            for id in [first, mine, theirs] {
                release(&actor, s, id);
            }
            actor.submit_blocking(|a| a.consistent()).unwrap();
        });
    }
}
