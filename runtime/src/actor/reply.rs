//! The hand-off of a blocking call: its task travels to the actor in a slot that the calling
//! thread reuses for every call of the same type, and the reply comes back in the same slot.
//! No heap allocation per call: the slot is made once per thread and call type, and queuing it
//! clones an `Arc`.
//!
//! Protocol (one atomic, `state`, beside the slot's lock):
//! - The caller puts the task in the slot, sets `WAITING` and queues the slot.
//! - The actor takes the task, runs it, puts the reply in the slot and swaps `state` to `DONE`;
//!   if the swap returns `PARKED`, it unparks the caller.
//! - The caller spins until `DONE` (bounded: `sync::CALLER_SPIN`, longer for a large read);
//!   then it swaps `WAITING` for `PARKED` and parks until `DONE`. If that swap fails, the reply
//!   is already there.
//!
//! So a reply is never missed: either the actor's swap sees `PARKED` and unparks (an unpark
//! before the park makes the park return), or the caller's swap sees `DONE`. Spurious wake-ups
//! only re-check `state`. A slot is reused only after its reply was taken, and the caller holds
//! its thread until then, so one slot never carries two calls at once.
//!
//! The slots are `std::sync::Arc`s even under loom: loom's `Arc` cannot be made a trait object,
//! and what the models must explore is the atomic and the lock inside, which are loom's.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use super::{ACTOR_DROPPED_TASK, ActorState, TaskPanicked, run_blocking};
use crate::sync::{AtomicU8, Mutex, Ordering, Spin, lock, spin_until, thread, thread_local};

/// The call is queued or running; its caller spins.
const WAITING: u8 = 0;
/// The caller gave up spinning and parks (or is about to).
const PARKED: u8 = 1;
/// The reply is in the slot.
const DONE: u8 = 2;

/// What a slot holds: nothing, a task on its way to the actor, or the reply on its way back.
enum Exchange<F, R> {
    Empty,
    Task(F),
    Reply(Result<R, TaskPanicked>),
}

/// One thread's slot for blocking calls whose task is an `F` returning an `R`.
struct Slot<F, R> {
    state: AtomicU8,
    exchange: Mutex<Exchange<F, R>>,
    caller: thread::Thread,
}

/// A queued blocking call, as the actor sees it: whatever the task's type.
pub(super) trait Serve<S>: Send + Sync {
    /// Runs the task on `state` and hands the reply back.
    fn serve(&self, state: &mut S);
    /// The task will never run: its caller gets [`ACTOR_DROPPED_TASK`].
    fn abandon(&self);
}

/// A blocking call in the actor's queue. Dropped unserved (only a bug in the actor could do
/// that), it answers its caller with [`ACTOR_DROPPED_TASK`] instead of leaving it parked.
pub(super) struct Call<S>(Option<Arc<dyn Serve<S>>>);

impl<S> Call<S> {
    pub(super) fn serve(mut self, state: &mut S) {
        if let Some(slot) = self.0.take() {
            slot.serve(state);
        }
    }
}

impl<S> Drop for Call<S> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.abandon();
        }
    }
}

impl<F, R> Slot<F, R> {
    fn new() -> Self {
        Self {
            state: AtomicU8::new(DONE),
            exchange: Mutex::new(Exchange::Empty),
            caller: thread::current(),
        }
    }

    fn reply(&self, reply: Result<R, TaskPanicked>) {
        *lock(&self.exchange) = Exchange::Reply(reply);
        if self.state.swap(DONE, Ordering::AcqRel) == PARKED {
            self.caller.unpark();
        }
    }

    /// Waits for the reply: spins, then parks.
    fn wait(&self, spin: Spin) -> Result<R, TaskPanicked> {
        let done = || self.state.load(Ordering::Acquire) == DONE;
        if !spin_until(spin, done)
            && self
                .state
                .compare_exchange(WAITING, PARKED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            while !done() {
                thread::park();
            }
        }
        match std::mem::replace(&mut *lock(&self.exchange), Exchange::Empty) {
            Exchange::Reply(reply) => reply,
            // `DONE` is set only after a reply was put in the slot.
            Exchange::Empty | Exchange::Task(_) => Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned())),
        }
    }
}

impl<S, F, R> Serve<S> for Slot<F, R>
where
    S: ActorState,
    F: FnOnce(&mut S) -> R + Send,
    R: Send,
{
    fn serve(&self, state: &mut S) {
        let exchange = std::mem::replace(&mut *lock(&self.exchange), Exchange::Empty);
        let reply = match exchange {
            Exchange::Task(task) => run_blocking(state, task),
            // A slot is queued only with its task in it.
            Exchange::Empty | Exchange::Reply(_) => {
                Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned()))
            }
        };
        self.reply(reply);
    }

    fn abandon(&self) {
        let unserved = matches!(*lock(&self.exchange), Exchange::Task(_));
        if unserved {
            self.reply(Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned())));
        }
    }
}

thread_local! {
    /// This thread's slots, one per (task, reply) type.
    static SLOTS: RefCell<HashMap<TypeId, Arc<dyn Any + Send + Sync>>> =
        RefCell::new(HashMap::new());
}

/// This thread's slot for calls of type `F` returning `R`, made on first use. A thread whose
/// thread-locals are being destroyed gets a fresh slot.
fn slot<F, R>() -> Arc<Slot<F, R>>
where
    F: Send + 'static,
    R: Send + 'static,
{
    let made = SLOTS.try_with(|slots| {
        let mut slots = slots.borrow_mut();
        let slot = slots
            .entry(TypeId::of::<Slot<F, R>>())
            .or_insert_with(|| Arc::new(Slot::<F, R>::new()));
        Arc::clone(slot)
            .downcast::<Slot<F, R>>()
            .expect("slots are keyed by their own type")
    });
    made.unwrap_or_else(|_| Arc::new(Slot::new()))
}

/// Sends `task` to the actor through `queue` (which must queue the call once) and waits for its
/// reply, spinning as `spin` says before it parks: the hand-off of every blocking call on an
/// actor thread.
pub(super) fn call<S, F, R>(
    spin: Spin,
    task: F,
    queue: impl FnOnce(Call<S>),
) -> Result<R, TaskPanicked>
where
    S: ActorState,
    F: FnOnce(&mut S) -> R + Send + 'static,
    R: Send + 'static,
{
    let slot = slot::<F, R>();
    debug_assert_eq!(
        slot.state.load(Ordering::Relaxed),
        DONE,
        "a thread's slot carries one call at a time"
    );
    *lock(&slot.exchange) = Exchange::Task(task);
    // Published to the actor by the queue's lock, with the slot.
    slot.state.store(WAITING, Ordering::Relaxed);
    let serve: Arc<dyn Serve<S>> = slot.clone();
    queue(Call(Some(serve)));
    slot.wait(spin)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::stream::StreamId;
    use crate::sync::CALLER_SPIN;

    #[derive(Default)]
    struct Counter(u32);

    impl ActorState for Counter {
        fn task_panicked(&mut self, _: StreamId, _: String) {}
        fn task_finished(&mut self, _: bool) {}
    }

    #[test]
    fn a_call_dropped_unserved_answers_its_caller() {
        let reply = call(CALLER_SPIN, |c: &mut Counter| c.0, drop);
        assert_eq!(reply, Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned())));
        // The slot is usable again.
        let mut counter = Counter(7);
        let reply = call(
            CALLER_SPIN,
            |c: &mut Counter| c.0,
            |call| call.serve(&mut counter),
        );
        assert_eq!(reply, Ok(7));
    }

    #[test]
    fn one_thread_reuses_one_slot_per_call_type() {
        let task = |c: &mut Counter| c.0;
        fn slot_of<F: Send + 'static>(_: &F) -> Arc<Slot<F, u32>> {
            slot::<F, u32>()
        }
        let first = slot_of(&task);
        let mut counter = Counter(1);
        for expected in 1..4 {
            let reply = call(CALLER_SPIN, task, |call| call.serve(&mut counter));
            assert_eq!(reply, Ok(expected));
            counter.0 += 1;
        }
        assert!(Arc::ptr_eq(&first, &slot_of(&task)));
        let other = std::thread::spawn(move || Arc::as_ptr(&slot_of(&task)) as usize)
            .join()
            .unwrap();
        assert_ne!(other, Arc::as_ptr(&first) as usize, "slots are per thread");
    }
}
