//! Stopping a world: each rank leads a process group of its own, so a signal to the group
//! reaches the rank and whatever it started; and the signals that ask the launcher to stop,
//! caught so it can pass them on to those groups before it ends.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use signal_hook::SigId;
use signal_hook::flag;
use signal_hook::low_level::{signal_name, unregister};

/// The signals that ask the launcher to stop, passed on to every rank: a terminal's Ctrl-C
/// (SIGINT) and Ctrl-\ (SIGQUIT), which no longer reach the ranks from the terminal, each in
/// a group of its own; a scheduler's SIGTERM; a closed terminal's SIGHUP.
const FORWARDED: [Signal; 4] = [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT];

/// How many launches catch the signals now (tests run several at once).
static LAUNCHES: Mutex<usize> = Mutex::new(0);
/// Whether no launch does: a signal then has its default action, emulated (signal-hook's
/// handler, once installed, stays installed).
static UNCAUGHT: AtomicBool = AtomicBool::new(true);
/// The emulated default actions, registered once, before any launch's own.
static DEFAULTS: OnceLock<Result<(), String>> = OnceLock::new();

/// The [`FORWARDED`] signals, caught for one launch. Invariant: while it lives, each arrival
/// of one sets its flag instead of ending the process; once every launch's is dropped, they
/// end the process as by default again.
pub(super) struct Signals {
    flags: Vec<(Signal, Arc<AtomicBool>)>,
    ids: Vec<SigId>,
}

impl Signals {
    /// Starts catching the signals.
    ///
    /// # Errors
    /// The operating system's, installing a handler.
    pub(super) fn catch() -> io::Result<Self> {
        DEFAULTS
            .get_or_init(|| {
                FORWARDED
                    .iter()
                    .try_for_each(|signal| {
                        flag::register_conditional_default(signal.as_raw(), &UNCAUGHT).map(drop)
                    })
                    .map_err(|err| err.to_string())
            })
            .clone()
            .map_err(io::Error::other)?;
        *LAUNCHES.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        UNCAUGHT.store(false, Ordering::SeqCst);
        // From here on, dropping `signals` (on an error too) undoes the count.
        let mut signals = Self {
            flags: Vec::new(),
            ids: Vec::new(),
        };
        for signal in FORWARDED {
            let received = Arc::new(AtomicBool::new(false));
            signals
                .ids
                .push(flag::register(signal.as_raw(), Arc::clone(&received))?);
            signals.flags.push((signal, received));
        }
        Ok(signals)
    }

    /// A signal that came since the last look, if any (the first of [`FORWARDED`] if several).
    pub(super) fn take(&self) -> Option<Signal> {
        self.flags
            .iter()
            .find(|(_, received)| received.swap(false, Ordering::SeqCst))
            .map(|&(signal, _)| signal)
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            unregister(id);
        }
        let mut launches = LAUNCHES.lock().unwrap_or_else(PoisonError::into_inner);
        *launches -= 1;
        if *launches == 0 {
            UNCAUGHT.store(true, Ordering::SeqCst);
        }
    }
}

/// `SIGTERM` or the like, for messages.
pub(super) fn name(signal: Signal) -> &'static str {
    signal_name(signal.as_raw()).unwrap_or("a signal")
}

/// Sends `signal` to every process of the group `group` leads or led (nothing if it is
/// empty).
pub(super) fn signal_group(group: Pid, signal: Signal) {
    // The one failure that matters, ESRCH, means nothing is left to signal.
    let _ = kill_process_group(group, signal);
}

/// Whether the group `group` leads or led has a process that is not a zombie. `kill` counts
/// zombies, and an orphan's stays one where the system's first process does not reap (a
/// container without an init); `/proc`, where there is one, tells them apart.
pub(super) fn group_alive(group: Pid) -> bool {
    if test_kill_process_group(group).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path().join("stat"))
            .is_ok_and(|stat| lives_in(&stat, group.as_raw_pid()))
    })
}

/// Whether a `/proc/PID/stat` line is of a process in `group` that is not a zombie.
fn lives_in(stat: &str, group: i32) -> bool {
    // `PID (COMM) STATE PPID PGRP ...`, where COMM may hold spaces and parentheses.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let pgrp = fields.nth(1).and_then(|field| field.parse::<i32>().ok());
    state != Some("Z") && pgrp == Some(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_tells_a_live_member_from_a_zombie_and_a_stranger() {
        assert!(lives_in("42 (sleep) S 1 40 40 0 -1 4194304", 40));
        assert!(lives_in("43 (a (b) c) R 1 40 40 0", 40));
        assert!(!lives_in("44 (sleep) Z 1 40 40 0 -1", 40));
        assert!(!lives_in("45 (sleep) S 1 41 41 0 -1", 40));
        assert!(!lives_in("garbage", 40));
    }
}
