//! The synchronisation primitives the actor and client hand-off use. Under `cfg(loom)` they are
//! loom's, so the model checks in `actor.rs` (`scripts/loom.sh`) can explore every interleaving
//! of that hand-off; otherwise std's.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::{thread, thread_local};

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

/// How a thread spins on a hand-off before it parks: busy for `busy`, then yielding its core
/// between checks until `total` has passed. Parking and waking a thread costs a futex round of
/// about 5 µs on a virtualised GPU host; a blocking call's task on an idle device takes about a
/// microsecond, and a small GPU read or launch completes in 10–30 µs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spin {
    pub busy: std::time::Duration,
    pub total: std::time::Duration,
}

/// The actor, having run its batch: a client that calls again at once (the next call of a
/// loop) finds it awake; one that comes later pays a wake-up. Busy only: an idle actor yielding
/// would stay runnable and, on a machine with more runnable threads than cores, be scheduled
/// late when work comes, where a parked one is woken at once.
pub(crate) const ACTOR_SPIN: Spin = Spin {
    busy: std::time::Duration::from_micros(10),
    total: std::time::Duration::from_micros(10),
};

/// A blocking caller, waiting for its reply or for the actor to catch up: long enough for a
/// small GPU read (10–30 µs on CUDA, 60–80 µs through wgpu's Vulkan on the H200, where a
/// 50 µs spin parked the caller of every read), yielding after the busy part so that the
/// actor it waits for gets a core.
pub(crate) const CALLER_SPIN: Spin = Spin {
    busy: std::time::Duration::from_micros(10),
    total: std::time::Duration::from_micros(200),
};

/// What a blocking read's caller assumes the copy engine moves per nanosecond (20 GB/s, below
/// PCIe 4's 25), so that its spin outlasts the transfer on the common links.
const READ_SPIN_BYTES_PER_NANO: u64 = 20;
/// The longest a blocking read's caller spins (a 1 GB read at [`READ_SPIN_BYTES_PER_NANO`]).
const READ_SPIN_MAX: std::time::Duration = std::time::Duration::from_millis(50);

impl Spin {
    /// A blocking read of `bytes`: [`CALLER_SPIN`], plus the transfer's time at
    /// [`READ_SPIN_BYTES_PER_NANO`], at most [`READ_SPIN_MAX`]. A read waits for its copy, and
    /// a caller parked meanwhile pays its wake-up after it: on the H200's (virtualised) host
    /// about 70 µs per 256 MiB read, which reached 53.7–53.9 GB/s with the caller parked,
    /// 54.6–54.7 spinning and 55.1 straight on the device. A spinning caller holds a core the
    /// way `cudaMemcpy` does, yielding it to any other runnable thread after the busy part.
    pub(crate) fn for_read(bytes: u64) -> Spin {
        let transfer = std::time::Duration::from_nanos(bytes / READ_SPIN_BYTES_PER_NANO);
        Spin {
            busy: CALLER_SPIN.busy,
            total: (CALLER_SPIN.total + transfer).min(READ_SPIN_MAX),
        }
    }
}

/// Spins as `spin` says until `ready` holds, and says whether it held. Only timing depends on
/// the clock read here: callers re-check `ready` under their own protocol before parking, so a
/// spin cut short or run long changes no outcome.
#[cfg(not(loom))]
pub(crate) fn spin_until(spin: Spin, mut ready: impl FnMut() -> bool) -> bool {
    /// Checks between two clock reads: a clock read costs about as much as 30 checks.
    const CHECKS_PER_CLOCK_READ: u32 = 32;
    if !spinning_pays() {
        return ready();
    }
    let start = std::time::Instant::now();
    loop {
        for _ in 0..CHECKS_PER_CLOCK_READ {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        let spun = start.elapsed();
        if spun >= spin.total {
            return ready();
        }
        if spun >= spin.busy {
            thread::yield_now();
        }
    }
}

/// Whether this process may spin: only with four cores or more. A spinner holds a core that
/// the thread it waits for may need; with fewer cores than the caller, the actor and the rest
/// of the machine want (a laptop, a loaded CI runner: measured on two cores, a `memory_usage`
/// round trip went from 1.7 µs parked to 22 µs spinning), parking at once, so the woken thread
/// gets the core, is faster.
#[cfg(not(loom))]
fn spinning_pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| thread::available_parallelism().is_ok_and(|cores| cores.get() >= 4))
}

/// Under loom one check: loom explores every interleaving at each check, so each further check
/// only multiplies equivalent schedules (a value that arrives between two checks is one that
/// arrived before a later first check). The model still sees both outcomes: the value there in
/// time, and the spin giving up so the thread parks. A second check behind a yield made the
/// models three times slower (268 s against 82 s on one core) and reached no other outcome.
#[cfg(loom)]
pub(crate) fn spin_until(_spin: Spin, mut ready: impl FnMut() -> bool) -> bool {
    ready()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_read_spins_for_its_transfer_within_bounds() {
        assert_eq!(Spin::for_read(0).total, CALLER_SPIN.total);
        // 256 MiB at 20 bytes per nanosecond.
        assert_eq!(
            Spin::for_read(256 << 20).total,
            CALLER_SPIN.total + Duration::from_nanos((256 << 20) / 20)
        );
        assert_eq!(Spin::for_read(u64::MAX).total, READ_SPIN_MAX);
        assert_eq!(Spin::for_read(256 << 20).busy, CALLER_SPIN.busy);
    }
}
