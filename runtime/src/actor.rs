//! One thread per device owns the device's state; clients talk to it through a queue.
//!
//! Guarantees (unit-tested at the bottom of this file; all but the last also model-checked with
//! loom there, by `loom_tests`, which `scripts/loom.sh` runs):
//! - Tasks submitted by one thread run in submission order (one FIFO queue for all threads).
//! - A blocking call runs after, and so observes, every task its thread submitted before it.
//! - Concurrent submitters lose nothing and never deadlock.
//! - The thread ends, dropping the state, once the last [`ActorHandle`] is dropped and every
//!   queued task has run.
//! - A panicking task never takes the thread down: the panic is caught and handed to
//!   [`ActorState::task_panicked`] (plain tasks) or returned to the blocked caller.
//! - After every task, panicked or not, and before the next, the state hears of it
//!   ([`ActorState::task_finished`]): a task that panicked may have left it half-updated.
//!
//! **Architecture Invariant:** the state (and so the device) is touched by the actor thread only;
//! it need not be `Sync`, and nothing in it is locked.
//!
//! The hand-off spins before it parks, on both sides, for a bounded time (`sync::ACTOR_SPIN`,
//! 10 µs, and `sync::CALLER_SPIN`, 200 µs): the actor, having run what was queued, watches a
//! flag that submitters raise before it waits on the condition variable; a blocking caller
//! watches its reply slot before it parks (`reply.rs`, which also makes a blocking call
//! allocate nothing).
//! A thread that spins finds the other side's work within a few hundred nanoseconds, where a
//! futex wake-up costs microseconds; one that finds nothing parks, so an idle device costs no
//! core. Correctness never rests on the spin: the flag is a hint, and both waits re-check their
//! condition under the protocol that parks.
//!
//! An actor can also run inline ([`ActorHandle::inline`]): no thread, the state behind a lock,
//! each task run by the thread that submits it before `submit` returns. Every guarantee above
//! holds (a thread's tasks run in its submission order; a blocking call observes them; a panic
//! is contained the same way); what changes is that an enqueuing call no longer returns before
//! its task ran. It exists for single-threaded simulation (the explorer, the fuzzer), where the
//! two thread hand-offs of every call cost more than the simulated work, and where the device
//! never waits for another thread. The state is touched under the lock only, by one thread at a
//! time. A task must not call back into its own actor (tasks never carry handles, so the
//! runtime's never do): inline, that would wait for a lock its own thread holds.

mod reply;

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::oneshot;
use crate::stream::StreamId;
use crate::sync::{
    ACTOR_SPIN, Arc, AtomicBool, AtomicU64, CALLER_SPIN, Condvar, Mutex, MutexGuard, Ordering,
    Spin, lock, spin_until, thread, wait,
};

/// The state an actor owns.
pub(crate) trait ActorState: Send + 'static {
    /// A non-blocking task submitted on `stream` panicked with `message`. The state should
    /// report it at that stream's next blocking call.
    fn task_panicked(&mut self, stream: StreamId, message: String);

    /// Runs after every task, before the next one. `panicked`: the task panicked and the
    /// panic was caught (returned to its caller, or handed to `task_panicked` just after this),
    /// so the state may be half-updated and should check itself.
    fn task_finished(&mut self, panicked: bool);

    /// Runs with `true` just before a blocking call's task and with `false` just after it,
    /// while the call's caller waits for the reply: the points where the state may change what
    /// calling threads read without the actor (the server publishes its released slices, see
    /// `memory/books.rs`). Never around a task whose caller does not wait.
    fn caller_waits(&mut self, _waits: bool) {}
}

/// Reported if the actor dropped a task unrun, which only a bug in this module could cause.
pub(crate) const ACTOR_DROPPED_TASK: &str = "the actor dropped a task without running it";

/// A queued task. Each catches its own panic ([`run_caught`]), so running one never unwinds.
enum Task<S> {
    /// A task whose caller does not wait for it (or waits through a oneshot channel).
    Plain(Box<dyn RunOnce<S>>),
    /// A blocking call, in its caller's reusable slot.
    Call(reply::Call<S>),
}

/// A plain task's closure, run in its box, which stays allocated: the actor hands spent boxes
/// back through the queue and the next submitter frees them. So a box is freed by a calling
/// thread, usually the one that allocated it, into that thread's cache of free blocks, where
/// its next task's box comes from: freed on the actor, every box would cross between the two
/// cores and the allocator's arena lock with them, which cost the launch path a tenth of its
/// rate on an H200 host.
trait RunOnce<S>: Send {
    /// Runs the closure; later calls do nothing.
    fn run_once(&mut self, state: &mut S);
}

impl<S, F: FnOnce(&mut S) + Send> RunOnce<S> for Option<F> {
    fn run_once(&mut self, state: &mut S) {
        if let Some(task) = self.take() {
            task(state);
        }
    }
}

impl<S> Task<S> {
    fn plain(task: impl FnOnce(&mut S) + Send + 'static) -> Self
    where
        S: 'static,
    {
        Task::Plain(Box::new(Some(task)))
    }

    /// Runs the task; returns a plain task's spent box, to be freed by a calling thread.
    fn run(self, state: &mut S) -> Option<Box<dyn RunOnce<S>>> {
        match self {
            Task::Plain(mut task) => {
                task.run_once(state);
                Some(task)
            }
            Task::Call(call) => {
                call.serve(state);
                None
            }
        }
    }
}

struct Queue<S> {
    tasks: VecDeque<Task<S>>,
    /// Boxes of plain tasks that ran, which the next submitter frees (see [`RunOnce`]).
    spent: Vec<Box<dyn RunOnce<S>>>,
    /// The actor is blocked on `changed`, waiting for work. Set and cleared by the actor under
    /// the lock, so a submitter that sees it unset knows the actor will find its task without a
    /// signal; only then is the signal (a system call) skipped.
    waiting: bool,
    /// The actor thread, once it runs: a last handle dropped there cannot wait for it to exit.
    actor_thread: Option<thread::ThreadId>,
    /// The actor dropped the state and returned.
    exited: bool,
}

struct Shared<S> {
    queue: Mutex<Queue<S>>,
    /// Live [`ActorHandle`]s. At zero the actor drains the queue and exits. Counted outside
    /// the lock: every handle a client lends a [`Handle`](crate::Handle)'s release is one, so
    /// a lock here would cost each allocation two more trips of the queue's cache line between
    /// the caller's core and the actor's. Only the last drop takes the lock, and it raises
    /// `attention` and signals under it after the count reached zero: an actor that read a
    /// live count under the lock is then waiting, and wakes; one that reads it later sees zero.
    handles: AtomicU64,
    /// Signalled when a task is queued or the last handle drops, and when the actor exits.
    changed: Condvar,
    /// Raised under the lock when a task is queued or the last handle drops, lowered under it
    /// when the actor takes the queue: what the actor spins on before it waits. A hint only:
    /// the actor decides under the lock.
    attention: AtomicBool,
    /// Tasks queued so far; each task's number is its position in the queue's order.
    /// Incremented under the lock, after the push.
    submitted: AtomicU64,
    /// Tasks the actor has run (numbers up to this one), stored after each task.
    completed: AtomicU64,
}

/// A handle to a running actor. Cloning is cheap; the actor lives while any clone does.
pub(crate) struct ActorHandle<S: ActorState> {
    runner: Runner<S>,
}

/// Where an actor's tasks run.
enum Runner<S> {
    /// On the actor thread, which takes them from the shared queue.
    Thread(Arc<Shared<S>>),
    /// On the submitting thread, under the lock; the state drops with the last handle.
    Inline(Arc<Mutex<S>>),
}

impl<S: ActorState> std::fmt::Debug for ActorHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActorHandle")
    }
}

/// The task of a blocking call panicked; the message is the panic's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TaskPanicked(pub String);

impl<S: ActorState> ActorHandle<S> {
    /// Starts the actor thread, which owns `state` from now on.
    pub(crate) fn spawn(name: String, state: S) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                spent: Vec::new(),
                waiting: false,
                actor_thread: None,
                exited: false,
            }),
            handles: AtomicU64::new(1),
            changed: Condvar::new(),
            attention: AtomicBool::new(false),
            submitted: AtomicU64::new(0),
            completed: AtomicU64::new(0),
        });
        let worker = shared.clone();
        let body = move || run(worker, state);
        #[cfg(not(loom))]
        thread::Builder::new()
            .name(name)
            .spawn(body)
            .expect("the OS refused to start the device's actor thread");
        #[cfg(loom)]
        {
            let _ = name;
            thread::spawn(body);
        }
        Self {
            runner: Runner::Thread(shared),
        }
    }

    /// An actor without a thread: each task runs on the thread that submits it, before the
    /// submitting call returns (see the module documentation).
    pub(crate) fn inline(state: S) -> Self {
        Self {
            runner: Runner::Inline(Arc::new(Mutex::new(state))),
        }
    }

    /// Queues `task` and returns at once. Tasks run in submission order. A panic in `task` is
    /// handed to [`ActorState::task_panicked`] with `stream`.
    pub(crate) fn submit(&self, stream: StreamId, task: impl FnOnce(&mut S) + Send + 'static) {
        self.push(Task::plain(move |state: &mut S| {
            if let Err(TaskPanicked(message)) = run_caught(state, task) {
                // The actor must outlive any panic, or every later blocking call would wait for
                // a reply that never comes: a panicking handler is contained too.
                let _ = catch_unwind(AssertUnwindSafe(|| state.task_panicked(stream, message)));
            }
        }));
    }

    /// Queues `task` (on a thread) or runs it now (inline).
    fn push(&self, task: Task<S>) {
        match &self.runner {
            Runner::Thread(shared) => shared.push(task),
            Runner::Inline(state) => drop(task.run(&mut *hold(state))),
        }
    }

    /// Queues `task` and returns a receiver of its result, which arrives once every task
    /// submitted before it has run. A panic in `task` is returned through the receiver (and so
    /// reported once, to this caller), never to [`ActorState::task_panicked`].
    #[cfg_attr(
        all(loom, test),
        allow(dead_code, reason = "the loom models' blocking calls use their slot")
    )]
    pub(crate) fn submit_async<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> oneshot::Receiver<Result<R, TaskPanicked>> {
        let (tx, rx) = oneshot::channel();
        self.push(Task::plain(move |state: &mut S| {
            tx.send(run_caught(state, task));
        }));
        rx
    }

    /// Runs `task` on the actor and waits for its result. The task observes every task the
    /// calling thread submitted before. On a thread, the task and its reply travel in the
    /// calling thread's reusable slot (`reply.rs`): nothing is allocated per call.
    pub(crate) fn submit_blocking<R: Send + 'static>(
        &self,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, TaskPanicked> {
        self.submit_blocking_spinning(CALLER_SPIN, task)
    }

    /// [`submit_blocking`](Self::submit_blocking), the caller spinning as `spin` says before
    /// it parks (a read's caller spins for as long as its transfer takes).
    pub(crate) fn submit_blocking_spinning<R: Send + 'static>(
        &self,
        spin: Spin,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, TaskPanicked> {
        match &self.runner {
            Runner::Inline(state) => run_blocking(&mut *hold(state), task),
            Runner::Thread(shared) => {
                not_paused_here(shared);
                reply::call(spin, task, |call| shared.push(Task::Call(call)))
            }
        }
    }

    /// Returns once the actor has run every task queued before the call (by any thread): spins
    /// on the actor's count of tasks run, then, past the spin, waits for a blocking no-op,
    /// which the FIFO queue runs after them. Inline, every task has run already.
    pub(crate) fn catch_up(&self) {
        let Runner::Thread(shared) = &self.runner else {
            return;
        };
        not_paused_here(shared);
        let queued = shared.submitted.load(Ordering::Acquire);
        if !spin_until(CALLER_SPIN, || {
            shared.completed.load(Ordering::Acquire) >= queued
        }) {
            let _ = self.submit_blocking(|_| ());
        }
    }

    /// Panics, as the call itself would, if a call from this thread would wait for this actor
    /// forever: inline, any call while this thread holds it (inside one of its tasks or an
    /// `exclusive` closure); threaded, a call that `waits` inside this thread's `exclusive`.
    /// For a caller that acts before it submits (records the call), so that it acts only for
    /// calls that are made.
    pub(crate) fn assert_callable(&self, waits: bool) {
        match &self.runner {
            Runner::Inline(state) => not_held_here(state),
            Runner::Thread(shared) if waits => not_paused_here(shared),
            Runner::Thread(_) => {}
        }
    }

    /// Runs `task` on the calling thread while the actor is paused: no other task runs
    /// meanwhile, and the task observes everything submitted before by this thread.
    pub(crate) fn exclusive<R>(
        &self,
        stream: StreamId,
        task: impl FnOnce() -> R,
    ) -> Result<R, TaskPanicked> {
        let shared = match &self.runner {
            Runner::Inline(state) => {
                // Holding the lock keeps every other task out until `task` returns.
                let _paused = hold(state);
                return catch_unwind(AssertUnwindSafe(task))
                    .map_err(|payload| TaskPanicked(panic_message(&*payload)));
            }
            Runner::Thread(shared) => shared,
        };
        let (paused_tx, paused_rx) = oneshot::channel::<()>();
        let (resume_tx, resume_rx) = oneshot::channel::<()>();
        self.submit(stream, move |_| {
            paused_tx.send(());
            // Resumes when the caller is done or its task panicked (dropping `resume_tx`).
            let _ = resume_rx.recv();
        });
        if paused_rx.recv().is_err() {
            return Err(TaskPanicked("the actor never paused".to_owned()));
        }
        let key = Arc::as_ptr(shared) as usize;
        let previous = PAUSED.with(|paused| paused.replace(key));
        let result = catch_unwind(AssertUnwindSafe(task));
        PAUSED.with(|paused| paused.set(previous));
        resume_tx.send(());
        result.map_err(|payload| TaskPanicked(panic_message(&*payload)))
    }
}

impl<S: ActorState> Clone for ActorHandle<S> {
    fn clone(&self) -> Self {
        let runner = match &self.runner {
            Runner::Thread(shared) => {
                // Relaxed, as `Arc`'s clone: the new handle comes from a live one.
                shared.handles.fetch_add(1, Ordering::Relaxed);
                Runner::Thread(shared.clone())
            }
            Runner::Inline(state) => Runner::Inline(state.clone()),
        };
        Self { runner }
    }
}

impl<S: ActorState> Drop for ActorHandle<S> {
    /// The last handle waits until the actor has run every queued task and dropped the state,
    /// so the device's teardown is finished when the last client is gone (a driver must not be
    /// unloaded by process exit while the actor still tears it down). Dropped on the actor thread
    /// itself (a handle captured by a task), it cannot wait: the actor exits after that task.
    /// Inline, the last handle drops the state itself.
    fn drop(&mut self) {
        let Runner::Thread(shared) = &self.runner else {
            return;
        };
        if shared.handles.fetch_sub(1, Ordering::AcqRel) > 1 {
            return;
        }
        let mut queue = lock(&shared.queue);
        shared.attention.store(true, Ordering::Release);
        shared.changed.notify_all();
        if queue.actor_thread == Some(thread::current().id()) {
            return;
        }
        while !queue.exited {
            queue = wait(&shared.changed, queue);
        }
    }
}

impl<S> Shared<S> {
    /// Queues `task`, waking the actor only if it waits on the condition variable: a spinning
    /// actor sees `attention`, and one that is running tasks takes the queue when done.
    fn push(&self, task: Task<S>) {
        let waiting = {
            let mut queue = lock(&self.queue);
            // Spent boxes only free memory (their closures ran): quick, and on this thread.
            queue.spent.clear();
            queue.tasks.push_back(task);
            self.submitted.fetch_add(1, Ordering::Release);
            self.attention.store(true, Ordering::Release);
            queue.waiting
        };
        if waiting {
            self.changed.notify_one();
        }
    }
}

fn run<S: ActorState>(shared: Arc<Shared<S>>, mut state: S) {
    // Tasks are taken from the shared queue a batch at a time (all that are queued), so the
    // lock is taken once per batch rather than once per task while submitters keep it busy.
    let mut batch: VecDeque<Task<S>> = VecDeque::new();
    let mut spent: Vec<Box<dyn RunOnce<S>>> = Vec::new();
    let mut completed = 0u64;
    lock(&shared.queue).actor_thread = Some(thread::current().id());
    loop {
        // Spin briefly before taking the lock to wait: a submitter that comes back within the
        // spin (the next call of a loop) finds the actor awake, with no wake-up to pay.
        spin_until(ACTOR_SPIN, || shared.attention.load(Ordering::Acquire));
        {
            let mut queue = lock(&shared.queue);
            queue.spent.append(&mut spent);
            loop {
                if !queue.tasks.is_empty() {
                    std::mem::swap(&mut batch, &mut queue.tasks);
                    shared.attention.store(false, Ordering::Relaxed);
                    break;
                }
                if shared.handles.load(Ordering::Acquire) == 0 {
                    drop(queue);
                    // Dropping the state runs the device's teardown on this thread.
                    drop(state);
                    lock(&shared.queue).exited = true;
                    shared.changed.notify_all();
                    return;
                }
                queue.waiting = true;
                queue = wait(&shared.changed, queue);
                queue.waiting = false;
            }
        }
        while let Some(task) = batch.pop_front() {
            spent.extend(task.run(&mut state));
            completed += 1;
            shared.completed.store(completed, Ordering::Release);
        }
    }
}

std::thread_local! {
    /// The inline actor whose state this thread holds (its address), or 0.
    static HOLDING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The threaded actor this thread paused in `exclusive` (its address), or 0.
    static PAUSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A call that waits for a threaded actor, made inside an `exclusive` closure that paused that
/// very actor, would wait for it forever: that panics, naming the mistake, instead (the
/// closure's panic is `exclusive`'s `TaskPanicked`).
fn not_paused_here<S>(shared: &Arc<Shared<S>>) {
    // `assert!`, not `assert_ne!`: the message is the caller's `TaskPanicked`, and the two
    // addresses compared would only clutter it.
    let key = Arc::as_ptr(shared) as usize;
    assert!(
        PAUSED.with(std::cell::Cell::get) != key,
        "a client call that waits for the device was made inside `exclusive`, which pauses \
         the device's actor; it would wait forever: make it before or after `exclusive`"
    );
}

/// Panics, naming the mistake, if this thread holds inline actor `state` (inside one of its
/// tasks or `exclusive` closures): a call would wait for itself.
fn not_held_here<S>(state: &Arc<Mutex<S>>) {
    let key = Arc::as_ptr(state) as usize;
    assert!(
        HOLDING.with(std::cell::Cell::get) != key,
        "an inline client was called from inside one of its own tasks or `exclusive` closures; \
         it would wait for itself: call it after that closure returns"
    );
}

/// An inline actor's state, held by this thread until dropped.
struct Held<'a, S> {
    guard: MutexGuard<'a, S>,
    previous: usize,
}

/// Locks an inline actor's state. A thread that already holds it (a task or an `exclusive`
/// closure calling back into its own client) would wait for itself forever: that panics,
/// naming the mistake, instead.
fn hold<S>(state: &Arc<Mutex<S>>) -> Held<'_, S> {
    not_held_here(state);
    let key = Arc::as_ptr(state) as usize;
    let previous = HOLDING.with(|holding| holding.replace(key));
    Held {
        guard: lock(state),
        previous,
    }
}

impl<S> Drop for Held<'_, S> {
    fn drop(&mut self) {
        HOLDING.with(|holding| holding.set(self.previous));
    }
}

impl<S> std::ops::Deref for Held<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.guard
    }
}

impl<S> std::ops::DerefMut for Held<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.guard
    }
}

/// Runs `task`, catching its panic, then tells the state it finished
/// ([`ActorState::task_finished`]). Every task of every runner goes through here.
///
/// The state is reached through `AssertUnwindSafe`: a panic may leave it half-updated, which
/// is why `task_finished` hears of the panic, to check the state before the next task runs.
fn run_caught<S: ActorState, R>(
    state: &mut S,
    task: impl FnOnce(&mut S) -> R,
) -> Result<R, TaskPanicked> {
    let result = catch_unwind(AssertUnwindSafe(|| task(state)))
        .map_err(|payload| TaskPanicked(panic_message(&*payload)));
    let panicked = result.is_err();
    // Contained like `task_panicked`: the actor outlives a panicking check.
    let _ = catch_unwind(AssertUnwindSafe(|| state.task_finished(panicked)));
    result
}

/// Runs a blocking call's task as [`run_caught`] does, between the two
/// [`ActorState::caller_waits`] calls (each contained like `task_panicked`).
fn run_blocking<S: ActorState, R>(
    state: &mut S,
    task: impl FnOnce(&mut S) -> R,
) -> Result<R, TaskPanicked> {
    let _ = catch_unwind(AssertUnwindSafe(|| state.caller_waits(true)));
    let result = run_caught(state, task);
    let _ = catch_unwind(AssertUnwindSafe(|| state.caller_waits(false)));
    result
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Records what the actor ran, which plain tasks panicked, and what `task_finished` heard.
    /// If `on_drop` is set, the entries are sent on it when the actor drops the state.
    #[derive(Default)]
    struct Log {
        entries: Vec<(u32, u32)>,
        panics: Vec<(StreamId, String)>,
        finished: Vec<bool>,
        /// `task_finished` panics after recording.
        finish_panics: bool,
        on_drop: Option<mpsc::Sender<Vec<(u32, u32)>>>,
    }

    impl ActorState for Log {
        fn task_panicked(&mut self, stream: StreamId, message: String) {
            self.panics.push((stream, message));
        }

        fn task_finished(&mut self, panicked: bool) {
            self.finished.push(panicked);
            assert!(!self.finish_panics, "task_finished boom");
        }
    }

    impl Drop for Log {
        fn drop(&mut self) {
            if let Some(on_drop) = self.on_drop.take() {
                let _ = on_drop.send(std::mem::take(&mut self.entries));
            }
        }
    }

    const S: StreamId = StreamId(1);

    fn spawn() -> ActorHandle<Log> {
        ActorHandle::spawn("actor-test".to_owned(), Log::default())
    }

    fn entries(actor: &ActorHandle<Log>) -> Vec<(u32, u32)> {
        actor
            .submit_blocking(|log| log.entries.clone())
            .expect("reading the log does not panic")
    }

    fn panics(actor: &ActorHandle<Log>) -> Vec<(StreamId, String)> {
        actor
            .submit_blocking(|log| log.panics.clone())
            .expect("reading the log does not panic")
    }

    #[test]
    fn tasks_from_one_thread_run_in_submission_order() {
        let actor = spawn();
        for i in 0..1000 {
            actor.submit(S, move |log| log.entries.push((0, i)));
        }
        let expected: Vec<_> = (0..1000).map(|i| (0, i)).collect();
        assert_eq!(entries(&actor), expected);
    }

    #[test]
    fn tasks_run_on_the_named_actor_thread() {
        let actor = spawn();
        let name = actor
            .submit_blocking(|_| std::thread::current().name().map(str::to_owned))
            .unwrap();
        assert_eq!(name.as_deref(), Some("actor-test"));
        let actor_thread = actor
            .submit_blocking(|_| std::thread::current().id())
            .unwrap();
        assert_ne!(actor_thread, std::thread::current().id());
    }

    #[test]
    fn submit_blocking_observes_every_earlier_submit() {
        let actor = spawn();
        for round in 0..100 {
            actor.submit(S, move |log| log.entries.push((0, 2 * round)));
            actor.submit(S, move |log| log.entries.push((0, 2 * round + 1)));
            let seen = actor.submit_blocking(|log| log.entries.len()).unwrap();
            assert_eq!(seen, 2 * (round as usize + 1));
        }
    }

    #[test]
    fn submit_blocking_observes_earlier_submits_of_its_thread_under_contention() {
        let actor = spawn();
        let others: Vec<_> = (1..=3)
            .map(|id| {
                let actor = actor.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        actor.submit(StreamId(u64::from(id)), move |log| {
                            log.entries.push((id, i))
                        });
                        if i % 10 == 9 {
                            let mine = actor
                                .submit_blocking(move |log| {
                                    log.entries.iter().filter(|(who, _)| *who == id).count()
                                })
                                .unwrap();
                            assert_eq!(mine, i as usize + 1);
                        }
                    }
                })
            })
            .collect();
        for other in others {
            other.join().unwrap();
        }
        let all = entries(&actor);
        assert_eq!(all.len(), 600);
        for id in 1..=3 {
            let mine: Vec<u32> = all
                .iter()
                .filter(|(who, _)| *who == id)
                .map(|(_, i)| *i)
                .collect();
            assert_eq!(mine, (0..200).collect::<Vec<_>>(), "thread {id}");
        }
    }

    #[test]
    fn a_panicking_submit_is_reported_to_task_panicked_and_the_actor_keeps_running() {
        let actor = spawn();
        actor.submit(S, |log| log.entries.push((0, 0)));
        actor.submit(StreamId(7), |_| panic!("boom on {}", 7));
        actor.submit(StreamId(8), |_| panic!("static boom"));
        actor.submit(StreamId(9), |_| std::panic::panic_any(42_u32));
        actor.submit(S, |log| log.entries.push((0, 1)));
        assert_eq!(entries(&actor), vec![(0, 0), (0, 1)]);
        assert_eq!(
            panics(&actor),
            vec![
                (StreamId(7), "boom on 7".to_owned()),
                (StreamId(8), "static boom".to_owned()),
                (StreamId(9), "a panic with a non-string payload".to_owned()),
            ]
        );
    }

    #[test]
    fn a_panicking_submit_blocking_is_returned_to_the_caller_only() {
        let actor = spawn();
        let result: Result<(), _> = actor.submit_blocking(|log| {
            log.entries.push((0, 0));
            panic!("blocking boom {}", 5)
        });
        assert_eq!(result, Err(TaskPanicked("blocking boom 5".to_owned())));
        let result: Result<(), _> = actor.submit_blocking(|_| panic!("static"));
        assert_eq!(result, Err(TaskPanicked("static".to_owned())));
        // Reported exactly once: not also to `task_panicked`.
        assert_eq!(panics(&actor), vec![]);
        // The actor keeps running, and the work done before the panic stays done.
        actor.submit(S, |log| log.entries.push((0, 1)));
        assert_eq!(entries(&actor), vec![(0, 0), (0, 1)]);
    }

    #[test]
    fn a_panicking_submit_async_is_returned_through_the_receiver_only() {
        let actor = spawn();
        let ok = actor.submit_async(|log| {
            log.entries.push((0, 0));
            7
        });
        let failed = actor.submit_async(|_| -> u32 { panic!("async boom") });
        assert_eq!(ok.recv(), Ok(Ok(7)));
        assert_eq!(
            failed.recv(),
            Ok(Err(TaskPanicked("async boom".to_owned())))
        );
        assert_eq!(panics(&actor), vec![]);
    }

    /// The tasks of every kind, on `actor`: a plain one, then a plain, a blocking and an
    /// asynchronous one that panic. Returns what `task_finished` heard, read by a last task.
    fn finished_after_each_kind(actor: &ActorHandle<Log>) -> Vec<bool> {
        actor.submit(S, |log| log.entries.push((0, 0)));
        actor.submit(S, |_| panic!("plain"));
        let blocking: Result<(), _> = actor.submit_blocking(|_| panic!("blocking"));
        assert_eq!(blocking, Err(TaskPanicked("blocking".to_owned())));
        let pending = actor.submit_async(|_| -> u32 { panic!("async") });
        assert_eq!(pending.recv(), Ok(Err(TaskPanicked("async".to_owned()))));
        actor
            .submit_blocking(|log| log.finished.clone())
            .expect("reading the log does not panic")
    }

    #[test]
    fn task_finished_follows_every_task_and_hears_of_its_panic() {
        for actor in [spawn(), ActorHandle::inline(Log::default())] {
            assert_eq!(finished_after_each_kind(&actor), [false, true, true, true]);
            assert_eq!(panics(&actor), vec![(S, "plain".to_owned())]);
        }
    }

    #[test]
    fn a_panicking_task_finished_is_contained() {
        let log = || {
            let mut log = Log::default();
            log.finish_panics = true;
            log
        };
        for actor in [
            ActorHandle::spawn("actor-test".to_owned(), log()),
            ActorHandle::inline(log()),
        ] {
            assert_eq!(finished_after_each_kind(&actor), [false, true, true, true]);
            assert_eq!(entries(&actor), vec![(0, 0)]);
        }
    }

    #[test]
    fn exclusive_runs_while_no_task_runs_and_returns_its_result() {
        let actor = spawn();
        let counter = |count: &Arc<AtomicUsize>| {
            let count = count.clone();
            move |_: &mut Log| {
                count.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Tasks of this thread, and of another thread that keeps submitting meanwhile.
        let mine = Arc::new(AtomicUsize::new(0));
        let theirs = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(std::sync::Barrier::new(2));
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let submitter = {
            let actor = actor.clone();
            let (theirs, started) = (theirs.clone(), started.clone());
            std::thread::spawn(move || {
                actor.submit(StreamId(2), counter(&theirs));
                started.wait();
                while stop_rx.try_recv().is_err() {
                    actor.submit(StreamId(2), counter(&theirs));
                    std::thread::yield_now();
                }
            })
        };
        started.wait();
        for _ in 0..1000 {
            actor.submit(S, counter(&mine));
        }
        let result = actor.exclusive(S, || {
            // Every task this thread submitted before has run.
            assert_eq!(mine.load(Ordering::SeqCst), 1000);
            // None runs while we hold the actor, although more are queued meanwhile.
            actor.submit(S, counter(&mine));
            let theirs_before = theirs.load(Ordering::SeqCst);
            for _ in 0..10_000 {
                std::thread::yield_now();
                assert_eq!(
                    mine.load(Ordering::SeqCst),
                    1000,
                    "a task ran during exclusive"
                );
                assert_eq!(
                    theirs.load(Ordering::SeqCst),
                    theirs_before,
                    "a task ran during exclusive"
                );
            }
            "done"
        });
        assert_eq!(result, Ok("done"));
        stop_tx.send(()).unwrap();
        submitter.join().unwrap();
        // The actor resumed and ran what was queued meanwhile.
        actor.submit_blocking(|_| ()).unwrap();
        assert_eq!(mine.load(Ordering::SeqCst), 1001);
        assert!(theirs.load(Ordering::SeqCst) >= 1);
        assert_eq!(panics(&actor), vec![]);
    }

    #[test]
    fn a_panic_inside_exclusive_is_returned_and_the_actor_resumes() {
        let actor = spawn();
        actor.submit(S, |log| log.entries.push((0, 0)));
        let result: Result<(), _> = actor.exclusive(S, || panic!("exclusive boom {}", 1));
        assert_eq!(result, Err(TaskPanicked("exclusive boom 1".to_owned())));
        actor.submit(S, |log| log.entries.push((0, 1)));
        assert_eq!(entries(&actor), vec![(0, 0), (0, 1)]);
        assert_eq!(panics(&actor), vec![]);
    }

    fn spawn_reporting_drop() -> (ActorHandle<Log>, mpsc::Receiver<Vec<(u32, u32)>>) {
        let (dropped_tx, dropped_rx) = mpsc::channel();
        let mut log = Log::default();
        log.on_drop = Some(dropped_tx);
        (ActorHandle::spawn("actor-test".to_owned(), log), dropped_rx)
    }

    /// The only timeout in these tests: a guard against hanging if the actor never exits.
    fn wait_for_drop(dropped: &mpsc::Receiver<Vec<(u32, u32)>>) -> Vec<(u32, u32)> {
        dropped
            .recv_timeout(Duration::from_secs(10))
            .expect("the actor did not drop its state after the last handle dropped")
    }

    #[test]
    fn the_state_is_dropped_once_the_last_handle_drops() {
        let (actor, dropped) = spawn_reporting_drop();
        let clone = actor.clone();
        actor.submit(S, |log| log.entries.push((0, 0)));
        drop(actor);
        // The clone keeps the actor alive: a blocking call is answered (so the state was alive
        // when it ran), and the state has not been dropped after it either.
        assert_eq!(entries(&clone), vec![(0, 0)]);
        assert_eq!(dropped.try_recv(), Err(mpsc::TryRecvError::Empty));
        // The actor is idle, waiting for work, when the last handle goes.
        drop(clone);
        assert_eq!(wait_for_drop(&dropped), vec![(0, 0)]);
    }

    #[test]
    fn tasks_queued_before_the_last_handle_drops_run_before_the_state_drops() {
        let (actor, dropped) = spawn_reporting_drop();
        for i in 0..1000 {
            actor.submit(S, move |log| log.entries.push((0, i)));
        }
        drop(actor);
        assert_eq!(
            wait_for_drop(&dropped),
            (0..1000).map(|i| (0, i)).collect::<Vec<_>>()
        );
    }

    // ---- inline actors -------------------------------------------------------------------

    #[test]
    fn inline_tasks_run_on_the_submitting_thread_before_submit_returns() {
        let actor = ActorHandle::inline(Log::default());
        let here = std::thread::current().id();
        let ran_on = Arc::new(Mutex::new(None));
        let seen = ran_on.clone();
        actor.submit(S, move |log| {
            log.entries.push((0, 0));
            *lock(&seen) = Some(std::thread::current().id());
        });
        assert_eq!(*lock(&ran_on), Some(here));
        let pending = actor.submit_async(|log| log.entries.len());
        assert_eq!(pending.recv(), Ok(Ok(1)));
        assert_eq!(entries(&actor), vec![(0, 0)]);
    }

    #[test]
    fn inline_panics_are_contained_as_on_a_thread() {
        let actor = ActorHandle::inline(Log::default());
        actor.submit(StreamId(7), |_| panic!("inline boom"));
        let blocking: Result<(), _> = actor.submit_blocking(|_| panic!("inline blocking"));
        assert_eq!(blocking, Err(TaskPanicked("inline blocking".to_owned())));
        let exclusive: Result<(), _> = actor.exclusive(S, || panic!("inline exclusive"));
        assert_eq!(exclusive, Err(TaskPanicked("inline exclusive".to_owned())));
        actor.submit(S, |log| log.entries.push((0, 1)));
        assert_eq!(entries(&actor), vec![(0, 1)]);
        assert_eq!(
            panics(&actor),
            vec![(StreamId(7), "inline boom".to_owned())]
        );
    }

    #[test]
    fn an_inline_call_from_inside_exclusive_panics_instead_of_waiting_for_itself() {
        let actor = ActorHandle::inline(Log::default());
        let result = actor.exclusive(S, || actor.submit(S, |log| log.entries.push((0, 0))));
        let Err(TaskPanicked(message)) = result else {
            panic!("a call back into the actor must fail, got {result:?}");
        };
        assert!(message.contains("would wait for itself"), "{message}");
        // The actor is usable afterwards, and the refused task never ran.
        assert_eq!(entries(&actor), vec![]);
    }

    /// A blocking call inside `exclusive` waited forever for the actor `exclusive` paused.
    #[test]
    fn a_blocking_call_from_inside_exclusive_fails_instead_of_waiting_forever() {
        let actor = spawn();
        let result = actor.exclusive(S, || {
            actor.submit(S, |log| log.entries.push((1, 1)));
            actor.submit_blocking(|log| log.entries.len())
        });
        let Err(TaskPanicked(message)) = result else {
            panic!("a blocking call inside exclusive must fail, got {result:?}");
        };
        assert!(message.contains("would wait forever"), "{message}");
        // The actor resumed; the task queued inside ran, the blocking one never did.
        assert_eq!(entries(&actor), vec![(1, 1)]);
        // Another actor may still be waited for inside the closure.
        let other = spawn();
        assert_eq!(
            actor.exclusive(S, || other.submit_blocking(|_| 7)).unwrap(),
            Ok(7)
        );
    }

    #[test]
    fn inline_submitters_on_several_threads_lose_nothing() {
        let actor = ActorHandle::inline(Log::default());
        std::thread::scope(|scope| {
            for id in 1..=3u32 {
                let actor = actor.clone();
                scope.spawn(move || {
                    for i in 0..200 {
                        actor.submit(StreamId(u64::from(id)), move |log| {
                            log.entries.push((id, i))
                        });
                    }
                });
            }
        });
        let all = entries(&actor);
        for id in 1..=3 {
            let mine: Vec<u32> = all.iter().filter(|e| e.0 == id).map(|e| e.1).collect();
            assert_eq!(mine, (0..200).collect::<Vec<_>>(), "thread {id}");
        }
    }

    #[test]
    fn an_inline_state_drops_with_the_last_handle_on_the_dropping_thread() {
        let (dropped_tx, dropped) = mpsc::channel();
        let mut log = Log::default();
        log.on_drop = Some(dropped_tx);
        let actor = ActorHandle::inline(log);
        let clone = actor.clone();
        actor.submit(S, |log| log.entries.push((0, 0)));
        drop(actor);
        assert_eq!(dropped.try_recv(), Err(mpsc::TryRecvError::Empty));
        drop(clone);
        assert_eq!(dropped.try_recv(), Ok(vec![(0, 0)]));
    }
}

/// Model checks of the guarantees listed at the top of this module: loom runs each model under
/// every interleaving of the actor thread and the submitters (up to a preemption bound), so a
/// lost wake-up, a lost task or a deadlock in the hand-off fails them. Loom also fails a model
/// whose threads do not all end, so each one checks that the actor exits once its handles drop.
/// Run them with `scripts/loom.sh`.
#[cfg(all(test, loom))]
mod loom_tests {
    use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    /// Preemptions explored per interleaving unless `LOOM_MAX_PREEMPTIONS` says otherwise.
    const PREEMPTION_BOUND: usize = 3;

    fn check(model: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = builder.preemption_bound.or(Some(PREEMPTION_BOUND));
        builder.check(model);
    }

    /// What the state saw when the actor dropped it.
    #[derive(Debug)]
    struct Dropped {
        entries: Vec<(u32, u32)>,
        /// How many handles had been released (by the count in [`Log::released`]).
        released: usize,
    }

    #[derive(Default)]
    struct Log {
        entries: Vec<(u32, u32)>,
        /// Where to report the drop, and the count of released handles to report with it.
        on_drop: Option<(oneshot::Sender<Dropped>, Arc<AtomicUsize>)>,
    }

    impl ActorState for Log {
        fn task_panicked(&mut self, stream: StreamId, message: String) {
            panic!("no task of these models panics, but one on {stream} did: {message}");
        }

        fn task_finished(&mut self, panicked: bool) {
            assert!(!panicked, "no task of these models panics");
        }
    }

    impl Drop for Log {
        fn drop(&mut self) {
            if let Some((on_drop, released)) = self.on_drop.take() {
                on_drop.send(Dropped {
                    entries: std::mem::take(&mut self.entries),
                    released: released.load(Ordering::Relaxed),
                });
            }
        }
    }

    fn spawn() -> ActorHandle<Log> {
        ActorHandle::spawn("loom-actor".to_owned(), Log::default())
    }

    fn push(who: u32, what: u32) -> impl FnOnce(&mut Log) + Send + 'static {
        move |log| log.entries.push((who, what))
    }

    fn entries_of(entries: &[(u32, u32)], who: u32) -> Vec<u32> {
        entries
            .iter()
            .filter(|(by, _)| *by == who)
            .map(|(_, what)| *what)
            .collect()
    }

    #[test]
    fn tasks_from_one_thread_run_in_order() {
        check(|| {
            let actor = spawn();
            actor.submit(StreamId(0), push(0, 1));
            actor.submit(StreamId(0), push(0, 2));
            let seen = actor.submit_blocking(|log| log.entries.clone()).unwrap();
            assert_eq!(seen, [(0, 1), (0, 2)]);
        });
    }

    #[test]
    fn a_blocking_call_sees_every_prior_submit_of_its_thread() {
        check(|| {
            let actor = spawn();
            let other = {
                let actor = actor.clone();
                loom::thread::spawn(move || actor.submit(StreamId(1), push(1, 1)))
            };
            actor.submit(StreamId(0), push(0, 1));
            let seen = actor.submit_blocking(|log| log.entries.clone()).unwrap();
            // The other thread's task may or may not have run yet; this thread's has.
            assert_eq!(entries_of(&seen, 0), [1]);
            // Once the other thread is joined, its submit happened before this call too.
            other.join().unwrap();
            let seen = actor.submit_blocking(|log| log.entries.clone()).unwrap();
            assert_eq!(entries_of(&seen, 1), [1]);
            assert_eq!(seen.len(), 2);
        });
    }

    #[test]
    fn concurrent_submitters_lose_nothing_and_do_not_deadlock() {
        check(|| {
            let actor = spawn();
            let submitter = |actor: &ActorHandle<Log>, who: u32| {
                let stream = StreamId(u64::from(who));
                actor.submit(stream, push(who, 1));
                let seen = actor
                    .submit_blocking(move |log| {
                        log.entries.push((who, 2));
                        log.entries.clone()
                    })
                    .unwrap();
                assert_eq!(entries_of(&seen, who), [1, 2]);
            };
            let other = {
                let actor = actor.clone();
                loom::thread::spawn(move || submitter(&actor, 1))
            };
            submitter(&actor, 0);
            other.join().unwrap();
            let all = actor.submit_blocking(|log| log.entries.clone()).unwrap();
            assert_eq!(all.len(), 4);
            assert_eq!(entries_of(&all, 0), [1, 2]);
            assert_eq!(entries_of(&all, 1), [1, 2]);
        });
    }

    #[test]
    fn the_state_is_dropped_after_the_last_handle_and_every_task() {
        check(|| {
            let (dropped_tx, dropped_rx) = oneshot::channel();
            let released = Arc::new(AtomicUsize::new(0));
            let actor = ActorHandle::spawn(
                "loom-actor".to_owned(),
                Log {
                    entries: Vec::new(),
                    on_drop: Some((dropped_tx, released.clone())),
                },
            );
            let other = {
                let actor = actor.clone();
                let released = released.clone();
                loom::thread::spawn(move || {
                    actor.submit(StreamId(1), push(1, 1));
                    released.fetch_add(1, Ordering::Relaxed);
                    drop(actor);
                })
            };
            actor.submit(StreamId(0), push(0, 1));
            released.fetch_add(1, Ordering::Relaxed);
            drop(actor);
            let dropped = dropped_rx
                .recv()
                .expect("the actor dropped its state without reporting it");
            // Both handles were gone before the state was dropped...
            assert_eq!(dropped.released, 2);
            // ...and every task queued through them had run.
            assert_eq!(entries_of(&dropped.entries, 0), [1]);
            assert_eq!(entries_of(&dropped.entries, 1), [1]);
            other.join().unwrap();
        });
    }

    /// The blocking hand-off (`reply.rs`): one thread's calls reuse one slot, and each gets
    /// its own reply, whether it arrives during the caller's spin or after the caller parked,
    /// while another thread's tasks keep the actor busy.
    #[test]
    fn a_reused_reply_slot_returns_each_call_its_own_reply() {
        check(|| {
            let actor = spawn();
            let other = {
                let actor = actor.clone();
                loom::thread::spawn(move || actor.submit(StreamId(1), push(1, 1)))
            };
            for call in 1..=2u32 {
                // One closure type for every round: every call goes through the same slot.
                let seen = actor
                    .submit_blocking(move |log| {
                        log.entries.push((0, call));
                        entries_of(&log.entries, 0)
                    })
                    .unwrap();
                assert_eq!(seen, (1..=call).collect::<Vec<_>>());
            }
            other.join().unwrap();
        });
    }

    /// Two threads block at once, each on its own slot: neither reply is lost or crossed, and
    /// the actor, spinning or waiting between them, serves both.
    #[test]
    fn concurrent_blocking_callers_each_get_their_reply() {
        check(|| {
            let actor = spawn();
            let other = {
                let actor = actor.clone();
                loom::thread::spawn(move || actor.submit_blocking(|_| 1u32).unwrap())
            };
            assert_eq!(actor.submit_blocking(|_| 0u32), Ok(0));
            assert_eq!(other.join().unwrap(), 1);
        });
    }

    #[test]
    fn exclusive_runs_after_prior_tasks_and_while_no_task_runs() {
        check(|| {
            let actor = spawn();
            // Relaxed on purpose: only the actor's hand-off may order these accesses.
            let ran = Arc::new(AtomicBool::new(false));
            let busy = Arc::new(AtomicBool::new(false));
            {
                let ran = ran.clone();
                actor.submit(StreamId(0), move |_| ran.store(true, Ordering::Relaxed));
            }
            let other = {
                let actor = actor.clone();
                let busy = busy.clone();
                loom::thread::spawn(move || {
                    actor.submit(StreamId(1), move |log| {
                        busy.store(true, Ordering::Relaxed);
                        log.entries.push((1, 1));
                        busy.store(false, Ordering::Relaxed);
                    });
                })
            };
            let result = actor.exclusive(StreamId(0), || {
                assert!(ran.load(Ordering::Relaxed), "a prior task had not run");
                assert!(!busy.load(Ordering::Relaxed), "a task ran during exclusive");
                7
            });
            assert_eq!(result, Ok(7));
            other.join().unwrap();
            // The actor resumed: the other thread's task runs before this blocking call.
            let seen = actor.submit_blocking(|log| log.entries.clone()).unwrap();
            assert_eq!(seen, [(1, 1)]);
        });
    }
}
