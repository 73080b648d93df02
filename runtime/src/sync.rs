//! The synchronisation primitives the actor and client hand-off use. Under `cfg(loom)` they are
//! loom's, so the model checks in `actor.rs` (`scripts/loom.sh`) can explore every interleaving
//! of that hand-off; otherwise std's.

#[cfg(loom)]
pub(crate) use loom::hint::spin_loop;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::{thread, thread_local};

#[cfg(not(loom))]
pub(crate) use std::hint::spin_loop;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::{thread, thread_local};

/// Locks `mutex`, ignoring poisoning: every critical section in this crate leaves the guarded
/// state consistent before anything in it can panic, so a poisoned lock holds valid data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Waits on `cond`, ignoring poisoning (see [`lock`]).
pub(crate) fn wait<'a, T>(cond: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cond.wait(guard)
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(not(loom))]
/// How long a thread spins on a hand-off before it parks. A blocking call's task on an idle
/// device takes about a microsecond; parking and waking a thread costs a futex round of about
/// 5 µs on a virtualised GPU host, and a GPU read or launch completes in 10–30 µs, so a waiter
/// that spins this long usually never parks, and one that parks has spun for a bounded time.
pub(crate) const SPIN_BUDGET: std::time::Duration = std::time::Duration::from_micros(50);

/// Spins until `ready` holds or [`SPIN_BUDGET`] has passed, and says whether it held. Only
/// timing depends on the clock read here: callers re-check `ready` under their own protocol
/// before parking, so a budget cut short or run long changes no outcome.
#[cfg(not(loom))]
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    /// Checks between two clock reads: a clock read costs about as much as 30 checks.
    const CHECKS_PER_CLOCK_READ: u32 = 64;
    let start = std::time::Instant::now();
    loop {
        for _ in 0..CHECKS_PER_CLOCK_READ {
            if ready() {
                return true;
            }
            spin_loop();
        }
        if start.elapsed() >= SPIN_BUDGET {
            return ready();
        }
    }
}

/// Under loom one spin: loom explores every interleaving at each check, so a spin of many
/// iterations only multiplies equivalent schedules. The model still sees both outcomes: the
/// value arriving during the spin, and the spin giving up so the thread parks.
#[cfg(loom)]
pub(crate) fn spin_until(mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    spin_loop();
    ready()
}
