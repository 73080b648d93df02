//! How calling threads hand events to the writer thread without sharing a cache line per
//! event: each thread appends to a buffer of its own, numbering its events from one
//! process-wide sequence, and the writer sweeps every buffer now and then and takes the events
//! in sequence order. A channel shared by all threads cost every recorded launch a contended
//! atomic on a line the polling writer kept reading (a tenth of the H200's launch rate); a
//! thread's own buffer lock is contended only during the writer's sweep of it.
//!
//! **Invariant:** an event's sequence number is taken while its thread holds its buffer's
//! lock. So a sweep that read the counter as `n` before locking any buffer holds, once it has
//! locked them all, every event numbered below `n`: it hands out exactly those, in order, and
//! keeps the later ones for the next sweep. The sequence is consistent with each thread's
//! program order and with what threads learn of each other (a number taken before a call
//! returns is smaller than any taken after another thread heard of that call).

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::format::Event;
use super::writer::Unhashed;
use crate::kernel::Kernel;

/// An event as the writer takes it: the kernel it names if the writer may not have its IR yet
/// (written before it when new), and the bytes whose hash its data still lacks.
pub(super) struct Queued {
    pub event: Event,
    pub kernel: Option<Kernel>,
    pub unhashed: Option<Unhashed>,
}

/// One thread's events the writer has not taken yet, in the thread's order, with their
/// sequence numbers.
type Buffer = Mutex<Vec<(u64, Queued)>>;

/// The buffers of every thread that recorded to one recorder, and their sequence.
#[derive(Default)]
pub(super) struct Queue {
    next_seq: AtomicU64,
    buffers: Mutex<Vec<Arc<Buffer>>>,
}

/// What a thread keeps per queue it pushes to.
struct Local {
    /// The queue's address: [`Queue`]s live as long as the process, so it names one.
    queue: usize,
    buffer: Arc<Buffer>,
    /// Kernels this thread has already handed over (by content hash).
    kernels: HashSet<u64>,
    /// The last of them: a thread launching one kernel again and again skips the set.
    last_kernel: Option<u64>,
}

std::thread_local! {
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

impl Local {
    /// Whether this thread hands over kernel `hash` for the first time.
    fn first_time(&mut self, hash: u64) -> bool {
        if self.last_kernel == Some(hash) {
            return false;
        }
        self.last_kernel = Some(hash);
        self.kernels.insert(hash)
    }
}

impl Queue {
    /// Appends `event` to the calling thread's buffer. `kernel` goes with it only if this
    /// thread never handed it over before: this thread's earlier events precede this one, so
    /// the writer has the IR before any call of this thread names it, and later launches share
    /// nothing with the writer but the buffer.
    pub(super) fn push(
        &'static self,
        event: Event,
        kernel: Option<&Kernel>,
        unhashed: Option<Unhashed>,
    ) {
        let mut queued = Some(Queued {
            event,
            kernel: None,
            unhashed,
        });
        let pushed = LOCALS.try_with(|locals| {
            let mut locals = locals.borrow_mut();
            let local = self.local(&mut locals);
            let mut queued = queued.take().expect("pushed once");
            queued.kernel = kernel
                .filter(|k| local.first_time(k.content_hash()))
                .cloned();
            self.push_to(&local.buffer, queued);
        });
        // A call from a thread-local's destructor after this thread's entries are gone (a
        // client kept in a thread-local, dropped as the thread ends): a buffer of its own,
        // with the kernel; the writer takes it and drops the buffer.
        if pushed.is_err() {
            let mut queued = queued.take().expect("pushed once");
            queued.kernel = kernel.cloned();
            let buffer = Arc::new(Buffer::default());
            self.buffers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(Arc::clone(&buffer));
            self.push_to(&buffer, queued);
        }
    }

    /// Appends `queued` to `buffer`, numbered while its lock is held (the module's invariant).
    fn push_to(&self, buffer: &Buffer, queued: Queued) {
        let mut buffer = buffer.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        buffer.push((seq, queued));
    }

    /// The calling thread's entry for this queue, registering its buffer at first use.
    fn local<'a>(&'static self, locals: &'a mut Vec<Local>) -> &'a mut Local {
        let me = std::ptr::from_ref(self) as usize;
        let at = match locals.iter().position(|local| local.queue == me) {
            Some(at) => at,
            None => {
                let buffer = Arc::new(Buffer::default());
                let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
                buffers.push(Arc::clone(&buffer));
                locals.push(Local {
                    queue: me,
                    buffer,
                    kernels: HashSet::new(),
                    last_kernel: None,
                });
                locals.len() - 1
            }
        };
        &mut locals[at]
    }

    /// Sweeps every buffer: appends to `ready`, in sequence order, every event numbered below
    /// the counter as it was when the sweep began (the module's invariant: all of them are
    /// pushed by then), together with those `held` back by earlier sweeps; later events stay
    /// in `held`. Buffers of threads that ended are dropped once empty.
    pub(super) fn take(&self, held: &mut Vec<(u64, Queued)>, ready: &mut Vec<Queued>) {
        let bound = self.next_seq.load(Ordering::Relaxed);
        let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        buffers.retain(|buffer| {
            let mut events = buffer.lock().unwrap_or_else(PoisonError::into_inner);
            // Read under the lock: at 1, the thread that pushed is gone (its last push came
            // before this lock) and nobody can push again. Read after the lock was let go, a
            // thread could push and end in between, and its last events would be dropped.
            let pushed_to = Arc::strong_count(buffer) > 1;
            held.append(&mut events);
            pushed_to
        });
        drop(buffers);
        // Each buffer is in order: a stable sort merges the runs.
        held.sort_by_key(|(seq, _)| *seq);
        let later = held.partition_point(|(seq, _)| *seq < bound);
        ready.extend(held.drain(..later).map(|(_, queued)| queued));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::Op;

    fn call(thread: u32, call: u64) -> Event {
        Event::Call {
            call,
            device: 0,
            thread,
            stream: 0,
            op: Op::Flush,
            at_ns: 0,
        }
    }

    /// Threads push while the writer sweeps: every event comes out once, in sequence order,
    /// each thread's in its program order.
    #[test]
    fn sweeps_hand_out_every_event_once_in_each_threads_order() {
        let queue: &'static Queue = Box::leak(Box::default());
        const THREADS: u32 = 4;
        const EACH: u64 = 20_000;
        let pushers: Vec<_> = (0..THREADS)
            .map(|thread| {
                std::thread::spawn(move || {
                    (0..EACH).for_each(|i| queue.push(call(thread, i), None, None))
                })
            })
            .collect();
        let (mut held, mut ready) = (Vec::new(), Vec::new());
        while pushers.iter().any(|p| !p.is_finished()) {
            queue.take(&mut held, &mut ready);
        }
        pushers.into_iter().for_each(|p| p.join().unwrap());
        queue.take(&mut held, &mut ready);
        assert!(
            held.is_empty(),
            "{} events held back after the last push",
            held.len()
        );
        assert_eq!(ready.len() as u64, u64::from(THREADS) * EACH);
        let mut next = vec![0; THREADS as usize];
        for queued in ready {
            let Event::Call { thread, call, .. } = queued.event else {
                unreachable!("only calls were pushed")
            };
            assert_eq!(call, next[thread as usize], "thread {thread} out of order");
            next[thread as usize] += 1;
        }
        assert!(
            queue.buffers.lock().unwrap().is_empty(),
            "ended threads' buffers kept"
        );
    }

    /// A client kept in a thread-local records its drop as the thread ends, maybe after the
    /// queue's own thread-local is gone: the event is kept all the same.
    #[test]
    fn a_push_from_a_thread_locals_destructor_is_kept() {
        let queue: &'static Queue = Box::leak(Box::default());
        struct PushOnDrop(&'static Queue);
        impl Drop for PushOnDrop {
            fn drop(&mut self) {
                self.0.push(call(7, 1), None, None);
            }
        }
        std::thread_local! {
            static LATE: RefCell<Option<PushOnDrop>> = const { RefCell::new(None) };
        }
        std::thread::spawn(move || {
            // Registered before the queue's thread-local, so destroyed after it (on platforms
            // that destroy thread-locals in reverse order of first use).
            LATE.with(|late| *late.borrow_mut() = Some(PushOnDrop(queue)));
            queue.push(call(7, 0), None, None);
        })
        .join()
        .unwrap();
        let (mut held, mut ready) = (Vec::new(), Vec::new());
        queue.take(&mut held, &mut ready);
        let calls: Vec<u64> = ready
            .iter()
            .map(|queued| match queued.event {
                Event::Call { call, .. } => call,
                _ => unreachable!("only calls were pushed"),
            })
            .collect();
        assert_eq!(calls, [0, 1]);
        assert!(
            queue.buffers.lock().unwrap().is_empty(),
            "ended threads' buffers kept"
        );
    }
}
