//! One thread per device owns the device's state; clients talk to it through a queue.
//!
//! Guarantees (model-checked by `tests/loom.rs`):
//! - Tasks submitted by one thread run in submission order (one FIFO queue for all threads).
//! - A blocking call runs after, and so observes, every task its thread submitted before it.
//! - Concurrent submitters lose nothing and never deadlock.
//! - The thread ends, dropping the state, once the last [`ActorHandle`] is dropped and every
//!   queued task has run.
//! - A panicking task never takes the thread down: the panic is caught and handed to
//!   [`ActorState::task_panicked`] (plain tasks) or returned to the blocked caller.
//!
//! **Architecture Invariant:** the state (and so the device) is touched by the actor thread only;
//! it need not be `Sync`, and nothing in it is locked.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::oneshot;
use crate::stream::StreamId;
use crate::sync::{Arc, Condvar, Mutex, lock, thread, wait};

/// The state an actor owns.
pub(crate) trait ActorState: Send + 'static {
    /// A non-blocking task submitted on `stream` panicked with `message`. The state should
    /// report it at that stream's next blocking call.
    fn task_panicked(&mut self, stream: StreamId, message: String);
}

/// Reported if the actor dropped a task unrun, which only a bug in this module could cause.
pub(crate) const ACTOR_DROPPED_TASK: &str = "the actor dropped a task without running it";

type Task<S> = Box<dyn FnOnce(&mut S) + Send>;

struct Queue<S> {
    tasks: VecDeque<(StreamId, Task<S>)>,
    /// Live [`ActorHandle`]s. At zero the actor drains the queue and exits.
    handles: usize,
}

struct Shared<S> {
    queue: Mutex<Queue<S>>,
    /// Signalled when a task is queued or the last handle drops.
    changed: Condvar,
}

/// A handle to a running actor. Cloning is cheap; the actor lives while any clone does.
pub(crate) struct ActorHandle<S: ActorState> {
    shared: Arc<Shared<S>>,
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
                handles: 1,
            }),
            changed: Condvar::new(),
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
        Self { shared }
    }

    /// Queues `task` and returns at once. Tasks run in submission order.
    pub(crate) fn submit(&self, stream: StreamId, task: impl FnOnce(&mut S) + Send + 'static) {
        lock(&self.shared.queue)
            .tasks
            .push_back((stream, Box::new(task)));
        self.shared.changed.notify_one();
    }

    /// Queues `task` and returns a receiver of its result, which arrives once every task
    /// submitted before it has run. A panic in `task` is returned through the receiver (and so
    /// reported once, to this caller), never to [`ActorState::task_panicked`].
    pub(crate) fn submit_async<R: Send + 'static>(
        &self,
        stream: StreamId,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> oneshot::Receiver<Result<R, TaskPanicked>> {
        let (tx, rx) = oneshot::channel();
        self.submit(stream, move |state| {
            let result = catch_unwind(AssertUnwindSafe(|| task(state)));
            tx.send(result.map_err(|payload| TaskPanicked(panic_message(&*payload))));
        });
        rx
    }

    /// Runs `task` on the actor and waits for its result. The task observes every task the
    /// calling thread submitted before.
    pub(crate) fn submit_blocking<R: Send + 'static>(
        &self,
        stream: StreamId,
        task: impl FnOnce(&mut S) -> R + Send + 'static,
    ) -> Result<R, TaskPanicked> {
        self.submit_async(stream, task)
            .recv()
            .unwrap_or_else(|_| Err(TaskPanicked(ACTOR_DROPPED_TASK.to_owned())))
    }

    /// Runs `task` on the calling thread while the actor is paused: no other task runs
    /// meanwhile, and the task observes everything submitted before by this thread.
    pub(crate) fn exclusive<R>(
        &self,
        stream: StreamId,
        task: impl FnOnce() -> R,
    ) -> Result<R, TaskPanicked> {
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
        let result = catch_unwind(AssertUnwindSafe(task));
        resume_tx.send(());
        result.map_err(|payload| TaskPanicked(panic_message(&*payload)))
    }
}

impl<S: ActorState> Clone for ActorHandle<S> {
    fn clone(&self) -> Self {
        lock(&self.shared.queue).handles += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<S: ActorState> Drop for ActorHandle<S> {
    fn drop(&mut self) {
        let last = {
            let mut queue = lock(&self.shared.queue);
            queue.handles -= 1;
            queue.handles == 0
        };
        if last {
            self.shared.changed.notify_one();
        }
    }
}

fn run<S: ActorState>(shared: Arc<Shared<S>>, mut state: S) {
    loop {
        let (stream, task) = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(next) = queue.tasks.pop_front() {
                    break next;
                }
                if queue.handles == 0 {
                    drop(queue);
                    // Dropping the state runs the device's teardown on this thread.
                    drop(state);
                    return;
                }
                queue = wait(&shared.changed, queue);
            }
        };
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task(&mut state))) {
            state.task_panicked(stream, panic_message(&*payload));
        }
    }
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
