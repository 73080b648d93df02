//! The synchronisation primitives the actor and client hand-off use. Under `cfg(loom)` they are
//! loom's, so the model checks in `actor.rs` (`scripts/loom.sh`) can explore every interleaving
//! of that hand-off; otherwise std's.

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread;

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
