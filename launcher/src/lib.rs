//! `lockstep launch`: one host's world of processes, like torchrun's standalone mode.
//!
//! Each of `nproc` processes runs the program with torchrun's variables (`RANK`, `LOCAL_RANK`,
//! `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR=127.0.0.1`, `MASTER_PORT`), so
//! `lockstep::distributed` finds its rendezvous. Their stdout and stderr are forwarded to the
//! launcher's, each line after `[rank k] `. The launch fails if any process fails; once one has
//! failed, the others get a grace period to end on their own (they usually fail too, their
//! rendezvous or collective broken) and are then stopped, so nothing hangs.
//!
//! Each rank leads a process group of its own, and stopping a rank stops its group: `SIGTERM`,
//! then [`TERM_GRACE`] later `SIGKILL` for what is left, so a rank that is a wrapper (a shell
//! script, a job step) takes what it started with it. The launcher passes `SIGINT`, `SIGTERM`,
//! `SIGHUP` and `SIGQUIT` on to every group the same way (a terminal's Ctrl-C or Ctrl-\ no
//! longer reaches the ranks by itself), and a second such signal cuts the grace short.
//! Invariant: when [`launch`] returns, no process of any rank's group is left, a rank's leftover child
//! included (short of one stuck in the kernel past `SIGKILL`). Unix only.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod forward;
mod stop;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use thiserror::Error;

pub use forward::forward_lines;
use stop::Signals;

/// How often the launcher looks at its processes.
const POLL: Duration = Duration::from_millis(20);
/// How long the launcher waits for the forwarders to drain a process's output after it exited
/// (a grandchild that holds the pipe open is not waited for).
const DRAIN: Duration = Duration::from_secs(2);
/// How long a rank's process group has to end after `SIGTERM` (or the signal passed on) before
/// `SIGKILL`.
pub const TERM_GRACE: Duration = Duration::from_secs(5);
/// How long the launcher waits for `SIGKILL` to empty the groups (a process stuck in the
/// kernel, in a driver say, can take longer; it is not waited for).
const KILL_WAIT: Duration = Duration::from_secs(1);

/// What to launch.
#[derive(Clone, Debug)]
pub struct LaunchConfig {
    /// How many processes, ranks `0..nproc`, each on GPU `LOCAL_RANK` = its rank; at least 1.
    pub nproc: u32,
    /// The rendezvous port; `None` picks a free one.
    pub master_port: Option<u16>,
    /// How long the others may run once one process failed.
    pub grace: Duration,
    /// The program every process runs (looked up on `PATH` like a shell does).
    pub program: OsString,
    /// Its arguments, the same for every process.
    pub args: Vec<OsString>,
}

/// How a process of the world ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankExit {
    /// The process's `RANK`.
    pub rank: u32,
    /// How it ended: an exit code or a signal.
    pub status: ExitStatus,
}

/// Why a launch failed.
#[derive(Debug, Error)]
pub enum LaunchError {
    /// `nproc` is 0; nothing was started.
    #[error("--nproc must be at least 1")]
    NoProcess,
    /// No `master_port` was given and the system handed out none; nothing was started.
    #[error("no free port for the rendezvous: {0}")]
    Port(std::io::Error),
    /// The launcher could not catch the signals it passes on to the ranks; nothing was
    /// started.
    #[error("cannot catch SIGINT, SIGTERM, SIGHUP and SIGQUIT to pass them on to the ranks: {0}")]
    Signals(std::io::Error),
    /// A process could not be started (no such program, not executable); the ranks started
    /// before it were stopped.
    #[error("cannot start rank {rank} ({program}): {reason}")]
    Spawn {
        /// The rank that could not start.
        rank: u32,
        /// The program, as given.
        program: String,
        /// The operating system's error.
        reason: std::io::Error,
    },
    /// The launcher got `SIGINT`, `SIGTERM`, `SIGHUP` or `SIGQUIT` and passed it on to every
    /// rank's process group; every process has ended or was killed.
    #[error("{}{}", stopped_message(signal, stopped), forced_message(forced))]
    Stopped {
        /// The signal's name, e.g. `SIGINT`.
        signal: &'static str,
        /// The ranks still running when it came, by rank.
        stopped: Vec<u32>,
        /// The ranks whose process group outlived the signal by [`TERM_GRACE`] and got
        /// `SIGKILL`, by rank.
        forced: Vec<u32>,
    },
    /// At least one process ended unsuccessfully; every process has ended or was killed.
    #[error("{}{}", failed_message(first, others, killed, *grace_ms), forced_message(forced))]
    Failed {
        /// The process that failed first.
        first: RankExit,
        /// The other processes that failed on their own, by rank.
        others: Vec<RankExit>,
        /// The processes still running after the grace period, by rank: their groups got
        /// `SIGTERM`, then `SIGKILL` [`TERM_GRACE`] later if still there.
        killed: Vec<u32>,
        /// The ranks whose process group outlived `SIGTERM` by [`TERM_GRACE`] and got
        /// `SIGKILL` (an ended rank's too, for what it left running), by rank.
        forced: Vec<u32>,
        /// The grace period the others had after the first failure, in milliseconds.
        grace_ms: u64,
    },
}

fn stopped_message(signal: &str, stopped: &[u32]) -> String {
    let ranks: Vec<String> = stopped.iter().map(u32::to_string).collect();
    match ranks.as_slice() {
        [] => format!("stopped by {signal}, every rank had ended"),
        ranks => format!(
            "stopped by {signal}, passed on to rank {}",
            ranks.join(", ")
        ),
    }
}

/// What a message adds for ranks whose groups needed `SIGKILL` (nothing when none did).
fn forced_message(forced: &[u32]) -> String {
    if forced.is_empty() {
        return String::new();
    }
    let ranks: Vec<String> = forced.iter().map(u32::to_string).collect();
    format!(
        "; still running {} s later, so killed with SIGKILL: rank {}",
        TERM_GRACE.as_secs(),
        ranks.join(", ")
    )
}

fn failed_message(first: &RankExit, others: &[RankExit], killed: &[u32], grace_ms: u64) -> String {
    let mut message = format!("rank {} failed first ({})", first.rank, first.status);
    if !others.is_empty() {
        let others: Vec<String> = others
            .iter()
            .map(|exit| format!("rank {} ({})", exit.rank, exit.status))
            .collect();
        message += &format!("; then {}", others.join(", "));
    }
    if !killed.is_empty() {
        let ranks: Vec<String> = killed.iter().map(u32::to_string).collect();
        message += &format!(
            "; killed after the {grace_ms} ms grace period: rank {}",
            ranks.join(", ")
        );
    }
    message
}

/// How [`World::stop`] ended the ranks.
struct Stop {
    /// The ranks still running when the stop began.
    running: Vec<u32>,
    /// The ranks whose group outlived the first signal and got `SIGKILL`.
    forced: Vec<u32>,
}

/// Starts the world, forwards its output and waits for every process.
///
/// # Errors
/// [`LaunchError::Failed`] naming every process that failed and those stopped after the grace
/// period; [`LaunchError::Stopped`] if the launcher got a signal to stop; a bad configuration
/// or a process that could not start (the ones started are stopped).
pub fn launch(config: &LaunchConfig) -> Result<(), LaunchError> {
    if config.nproc == 0 {
        return Err(LaunchError::NoProcess);
    }
    let port = match config.master_port {
        Some(port) => port,
        None => free_port().map_err(LaunchError::Port)?,
    };
    let signals = Signals::catch().map_err(LaunchError::Signals)?;
    let mut world = World::default();
    if let Err((rank, reason)) = world.start(config, port) {
        world.stop(Signal::TERM, &signals);
        world.drain();
        let program = config.program.to_string_lossy().into_owned();
        return Err(LaunchError::Spawn {
            rank,
            program,
            reason,
        });
    }
    let (mut failed, signal) = world.supervise(config.grace, &signals);
    let Stop { running, forced } = world.stop(signal.unwrap_or(Signal::TERM), &signals);
    world.drain();
    if let Some(signal) = signal {
        let signal = stop::name(signal);
        return Err(LaunchError::Stopped {
            signal,
            stopped: running,
            forced,
        });
    }
    if failed.is_empty() {
        return Ok(());
    }
    let first = failed.remove(0);
    failed.sort_by_key(|exit| exit.rank);
    Err(LaunchError::Failed {
        first,
        others: failed,
        killed: running,
        forced,
        grace_ms: u64::try_from(config.grace.as_millis()).unwrap_or(u64::MAX),
    })
}

/// A port the system just handed out on every interface, released for rank 0 to take.
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
    Ok(listener.local_addr()?.port())
}

/// Starts `rank` as the leader of a process group of its own.
fn spawn(config: &LaunchConfig, rank: u32, port: u16) -> std::io::Result<Child> {
    let nproc = config.nproc.to_string();
    Command::new(&config.program)
        .args(&config.args)
        .env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", &nproc)
        .env("LOCAL_WORLD_SIZE", &nproc)
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// The processes of a launch (each `None` once it ended), the process groups they lead, and
/// their output's forwarders.
///
/// Invariant: a group is `Some` while it may hold a process of ours: from its rank's start
/// until a look finds it empty once its rank ended. An empty group's id is free for the system
/// to reuse, so it is never signalled again.
#[derive(Default)]
struct World {
    children: Vec<Option<Child>>,
    groups: Vec<Option<Pid>>,
    forwarders: Vec<JoinHandle<()>>,
}

impl World {
    /// Starts every rank, forwarding its output; the rank that could not start, and why.
    fn start(&mut self, config: &LaunchConfig, port: u16) -> Result<(), (u32, std::io::Error)> {
        let stdout = Arc::new(Mutex::new(std::io::stdout()));
        let stderr = Arc::new(Mutex::new(std::io::stderr()));
        for rank in 0..config.nproc {
            let mut child = spawn(config, rank, port).map_err(|reason| (rank, reason))?;
            self.forward(&mut child, rank, &stdout, &stderr);
            self.groups.push(Some(Pid::from_child(&child)));
            self.children.push(Some(child));
        }
        Ok(())
    }

    /// Forwards `child`'s stdout and stderr to ours, prefixed, each on its own thread.
    fn forward<O, E>(
        &mut self,
        child: &mut Child,
        rank: u32,
        stdout: &Arc<Mutex<O>>,
        stderr: &Arc<Mutex<E>>,
    ) where
        O: Write + Send + 'static,
        E: Write + Send + 'static,
    {
        let prefix = format!("[rank {rank}] ");
        if let Some(pipe) = child.stdout.take() {
            let (prefix, to) = (prefix.clone(), stdout.clone());
            // A failed write (our output closed) only ends the forwarding.
            self.forwarders.push(std::thread::spawn(move || {
                let _ = forward_lines(pipe, &prefix, &to);
            }));
        }
        if let Some(pipe) = child.stderr.take() {
            let to = stderr.clone();
            self.forwarders.push(std::thread::spawn(move || {
                let _ = forward_lines(pipe, &prefix, &to);
            }));
        }
    }

    /// Waits for every process, until one failed and `grace` passed since, or a signal came.
    /// Returns the failed processes in the order they were seen to end (by rank within one
    /// look), and the signal.
    fn supervise(&mut self, grace: Duration, signals: &Signals) -> (Vec<RankExit>, Option<Signal>) {
        let mut failed = Vec::new();
        let mut first_failure: Option<Instant> = None;
        loop {
            let ended = self.reap();
            if !ended.is_empty() {
                self.forget_empty_groups();
            }
            for exit in ended.into_iter().filter(|exit| !exit.status.success()) {
                first_failure.get_or_insert_with(Instant::now);
                failed.push(exit);
            }
            if self.children.iter().all(Option::is_none) {
                return (failed, None);
            }
            if let Some(signal) = signals.take() {
                return (failed, Some(signal));
            }
            if first_failure.is_some_and(|at| at.elapsed() >= grace) {
                return (failed, None);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops every rank's process group, an ended rank's too (what it left running): sends
    /// `signal`, waits up to [`TERM_GRACE`] for the groups to empty (less if another signal
    /// comes), then `SIGKILL`s what is left, and reaps every rank. Returns the ranks that were
    /// still running, and those whose group `SIGKILL` ended.
    fn stop(&mut self, signal: Signal, signals: &Signals) -> Stop {
        let running: Vec<u32> = (0..)
            .zip(&self.children)
            .filter_map(|(rank, child)| child.as_ref().map(|_| rank))
            .collect();
        self.forget_empty_groups();
        self.signal_groups(signal);
        self.await_groups(TERM_GRACE, || signals.take().is_some());
        let forced: Vec<u32> = (0..)
            .zip(&self.groups)
            .filter_map(|(rank, group)| group.map(|_| rank))
            .collect();
        self.signal_groups(Signal::KILL);
        self.await_groups(KILL_WAIT, || false);
        for mut child in self.children.iter_mut().filter_map(Option::take) {
            // Killed now, or ended just before: either way reaped here.
            let _ = child.wait();
        }
        Stop { running, forced }
    }

    /// Reaps the ranks and forgets the groups that ended, until no group is left, `limit`
    /// passed, or `cut_short` says so.
    fn await_groups(&mut self, limit: Duration, mut cut_short: impl FnMut() -> bool) {
        let until = Instant::now() + limit;
        loop {
            self.reap();
            self.forget_empty_groups();
            let empty = self.groups.iter().all(Option::is_none);
            if empty || Instant::now() >= until || cut_short() {
                return;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Reaps the ranks that ended, and returns how. A rank whose `try_wait` fails is left to
    /// [`stop`](Self::stop).
    fn reap(&mut self) -> Vec<RankExit> {
        let mut ended = Vec::new();
        for (rank, slot) in (0..).zip(self.children.iter_mut()) {
            let Some(child) = slot else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                *slot = None;
                ended.push(RankExit { rank, status });
            }
        }
        ended
    }

    /// Forgets the groups of ended ranks that have no process left.
    fn forget_empty_groups(&mut self) {
        for (group, child) in self.groups.iter_mut().zip(&self.children) {
            if child.is_none() && group.is_some_and(|group| !stop::group_alive(group)) {
                *group = None;
            }
        }
    }

    /// Sends `signal` to every group that may still hold a process of ours.
    fn signal_groups(&self, signal: Signal) {
        for &group in self.groups.iter().flatten() {
            stop::signal_group(group, signal);
        }
    }

    /// Waits (boundedly) for the forwarders to pass on what the processes wrote last.
    fn drain(self) {
        let until = Instant::now() + DRAIN;
        for forwarder in self.forwarders {
            while !forwarder.is_finished() && Instant::now() < until {
                std::thread::sleep(POLL);
            }
            if forwarder.is_finished() {
                // A forwarder does not panic; if it did, its lines are lost, nothing more.
                let _ = forwarder.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::path::{Path, PathBuf};

    /// One launch at a time: a signal raised for one would reach every launch catching it.
    static ONE_LAUNCH: Mutex<()> = Mutex::new(());

    /// A fresh folder for one test's files.
    fn scratch(test: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("lockstep-launch-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Holds the launch to this test (the lock is held before a test looks at the clock).
    fn one_launch() -> std::sync::MutexGuard<'static, ()> {
        ONE_LAUNCH
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Launches `nproc` ranks of `sh -c script`, `$1` being `dir`.
    fn launch_sh(nproc: u32, grace_ms: u64, script: &str, dir: &Path) -> Result<(), LaunchError> {
        launch(&LaunchConfig {
            nproc,
            master_port: None,
            grace: Duration::from_millis(grace_ms),
            program: "sh".into(),
            args: vec!["-c".into(), script.into(), "sh".into(), dir.into()],
        })
    }

    /// Starts a `sleep` in the background and writes its pid to `$1/sleep$RANK`.
    const START_SLEEP: &str =
        r#"sleep 60 & echo $! > "$1/tmp$RANK" && mv "$1/tmp$RANK" "$1/sleep$RANK""#;
    /// Rank 1 waits for rank 0's `sleep` to start, then fails.
    const RANK_1_FAILS: &str =
        r#"if [ "$RANK" = 1 ]; then while [ ! -f "$1/sleep0" ]; do sleep 0.02; done; exit 3; fi"#;

    /// Whether the process whose pid is in `file` still runs (a zombie does not).
    fn runs(file: &Path) -> bool {
        let pid = std::fs::read_to_string(file).unwrap();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        stat.is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    }

    #[test]
    fn a_rank_stopped_after_the_grace_period_takes_its_children_with_it() {
        let _one = one_launch();
        let dir = scratch("grace");
        let script = format!("{RANK_1_FAILS}; {START_SLEEP}; wait");
        let error = launch_sh(2, 200, &script, &dir).unwrap_err();
        assert_eq!(
            error.to_string(),
            "rank 1 failed first (exit status: 3); killed after the 200 ms grace period: rank 0"
        );
        assert!(
            !runs(&dir.join("sleep0")),
            "rank 0's sleep outlived the launch"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn what_a_rank_left_running_ends_with_the_launch() {
        let _one = one_launch();
        let dir = scratch("left");
        assert!(launch_sh(1, 200, &format!("{START_SLEEP}; exit 0"), &dir).is_ok());
        assert!(
            !runs(&dir.join("sleep0")),
            "rank 0's sleep outlived the launch"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_rank_that_ignores_sigterm_is_killed_after_the_term_grace() {
        let _one = one_launch();
        let dir = scratch("ignores");
        let script = format!("{RANK_1_FAILS}; trap '' TERM; {START_SLEEP}; wait");
        let error = launch_sh(2, 100, &script, &dir).unwrap_err();
        // Rank 0's group ignores SIGTERM, so only SIGKILL, TERM_GRACE later, ends it.
        assert!(matches!(&error, LaunchError::Failed { forced, .. } if forced == &[0]));
        assert_eq!(
            error.to_string(),
            "rank 1 failed first (exit status: 3); killed after the 100 ms grace period: rank 0; \
             still running 5 s later, so killed with SIGKILL: rank 0"
        );
        assert!(
            !runs(&dir.join("sleep0")),
            "rank 0's sleep outlived the launch"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_signal_to_the_launcher_is_passed_on_to_every_rank() {
        use signal_hook::consts::{SIGQUIT, SIGTERM};
        passes_on(SIGTERM, "SIGTERM", &format!("{START_SLEEP}; wait"));
        // A background job of `sh` ignores SIGQUIT (POSIX), so each rank is its `sleep`; and
        // leaves no core file.
        let sleep_as_rank = r#"ulimit -c 0; echo $$ > "$1/tmp$RANK" && mv "$1/tmp$RANK" "$1/sleep$RANK" && exec sleep 60"#;
        passes_on(SIGQUIT, "SIGQUIT", sleep_as_rank);
    }

    /// Raises `signal` in a launch of two ranks of `script`, each writing the pid of a `sleep`
    /// to `$1/sleep$RANK`, and checks that it ended both ranks and their sleeps.
    fn passes_on(signal: std::ffi::c_int, name: &str, script: &str) {
        let _one = one_launch();
        let dir = scratch(name);
        let watched = dir.clone();
        let raiser = std::thread::spawn(move || {
            let started = |rank| watched.join(format!("sleep{rank}")).exists();
            let until = Instant::now() + Duration::from_secs(20);
            while !(started(0) && started(1)) && Instant::now() < until {
                std::thread::sleep(POLL);
            }
            // The launch catches it (it started the ranks): the test process lives on.
            signal_hook::low_level::raise(signal).unwrap();
        });
        let error = launch_sh(2, 60_000, script, &dir).unwrap_err();
        raiser.join().unwrap();
        // The ranks end on the signal itself: no group needed SIGKILL.
        assert_eq!(
            error.to_string(),
            format!("stopped by {name}, passed on to rank 0, 1")
        );
        assert!(matches!(&error, LaunchError::Stopped { forced, .. } if forced.is_empty()));
        assert!(
            !runs(&dir.join("sleep0")) && !runs(&dir.join("sleep1")),
            "a sleep outlived the launch"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn failures_name_each_rank_and_the_killed_ones() {
        let exit = |rank, raw| RankExit {
            rank,
            status: ExitStatus::from_raw(raw),
        };
        let error = LaunchError::Failed {
            first: exit(3, 3 << 8),
            others: vec![exit(1, 6), exit(4, 1 << 8)],
            killed: vec![0, 2],
            forced: vec![2],
            grace_ms: 5000,
        };
        insta::assert_snapshot!(error, @"rank 3 failed first (exit status: 3); then rank 1 (signal: 6 (SIGABRT)), rank 4 (exit status: 1); killed after the 5000 ms grace period: rank 0, 2; still running 5 s later, so killed with SIGKILL: rank 2");
    }
}
