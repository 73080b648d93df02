//! `lockstep launch`: one host's world of processes, like torchrun's standalone mode.
//!
//! Each of `nproc` processes runs the program with torchrun's variables (`RANK`, `LOCAL_RANK`,
//! `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `MASTER_ADDR=127.0.0.1`, `MASTER_PORT`), so
//! `lockstep::distributed` finds its rendezvous. Their stdout and stderr are forwarded to the
//! launcher's, each line after `[rank k] `. The launch fails if any process fails; once one has
//! failed, the others get a grace period to end on their own (they usually fail too, their
//! rendezvous or collective broken) and are then killed, so nothing hangs.

mod forward;

use std::ffi::OsString;
use std::io::Write;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

pub use forward::forward_lines;

/// How often the launcher looks at its processes.
const POLL: Duration = Duration::from_millis(20);
/// How long the launcher waits for the forwarders to drain a process's output after it exited
/// (a grandchild that holds the pipe open is not waited for).
const DRAIN: Duration = Duration::from_secs(2);

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
    /// A process could not be started (no such program, not executable); the ranks started
    /// before it were killed.
    #[error("cannot start rank {rank} ({program}): {reason}")]
    Spawn {
        /// The rank that could not start.
        rank: u32,
        /// The program, as given.
        program: String,
        /// The operating system's error.
        reason: std::io::Error,
    },
    /// At least one process ended unsuccessfully; every process has ended or was killed.
    #[error("{}", failed_message(first, others, killed, *grace_ms))]
    Failed {
        /// The process that failed first.
        first: RankExit,
        /// The other processes that failed on their own, by rank.
        others: Vec<RankExit>,
        /// The processes killed after the grace period, by rank.
        killed: Vec<u32>,
        /// The grace period the others had after the first failure, in milliseconds.
        grace_ms: u64,
    },
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

/// Starts the world, forwards its output and waits for every process.
///
/// # Errors
/// [`LaunchError::Failed`] naming every process that failed and those killed after the grace
/// period; a bad configuration or a process that could not start (the ones started are
/// killed).
pub fn launch(config: &LaunchConfig) -> Result<(), LaunchError> {
    if config.nproc == 0 {
        return Err(LaunchError::NoProcess);
    }
    let port = match config.master_port {
        Some(port) => port,
        None => free_port().map_err(LaunchError::Port)?,
    };
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let stderr = Arc::new(Mutex::new(std::io::stderr()));
    let mut world = World::default();
    for rank in 0..config.nproc {
        match spawn(config, rank, port) {
            Ok(mut child) => {
                world.forward(&mut child, rank, &stdout, &stderr);
                world.children.push(Some(child));
            }
            Err(reason) => {
                world.kill_running();
                return Err(LaunchError::Spawn {
                    rank,
                    program: config.program.to_string_lossy().into_owned(),
                    reason,
                });
            }
        }
    }
    let (mut failed, killed) = world.supervise(config.grace);
    world.drain();
    if failed.is_empty() {
        return Ok(());
    }
    let first = failed.remove(0);
    failed.sort_by_key(|exit| exit.rank);
    Err(LaunchError::Failed {
        first,
        others: failed,
        killed,
        grace_ms: u64::try_from(config.grace.as_millis()).unwrap_or(u64::MAX),
    })
}

/// A port the system just handed out on every interface, released for rank 0 to take.
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
    Ok(listener.local_addr()?.port())
}

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
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// The processes of a launch (each `None` once it ended) and their output's forwarders.
#[derive(Default)]
struct World {
    children: Vec<Option<Child>>,
    forwarders: Vec<JoinHandle<()>>,
}

impl World {
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

    /// Waits for every process; once one failed, kills those still running after `grace`.
    /// Returns the failed processes in the order they were seen to end (by rank within one
    /// look), and the killed ranks.
    fn supervise(&mut self, grace: Duration) -> (Vec<RankExit>, Vec<u32>) {
        let mut failed = Vec::new();
        let mut first_failure: Option<Instant> = None;
        loop {
            for (rank, slot) in (0..).zip(self.children.iter_mut()) {
                let Some(child) = slot else { continue };
                // An error of `try_wait` leaves the child to the kill below.
                if let Ok(Some(status)) = child.try_wait() {
                    *slot = None;
                    if !status.success() {
                        failed.push(RankExit { rank, status });
                        first_failure.get_or_insert_with(Instant::now);
                    }
                }
            }
            if self.children.iter().all(Option::is_none) {
                return (failed, Vec::new());
            }
            if first_failure.is_some_and(|at| at.elapsed() >= grace) {
                return (failed, self.kill_running());
            }
            std::thread::sleep(POLL);
        }
    }

    /// Kills and reaps every process still running; returns their ranks.
    fn kill_running(&mut self) -> Vec<u32> {
        let mut killed = Vec::new();
        for (rank, slot) in (0..).zip(self.children.iter_mut()) {
            if let Some(mut child) = slot.take() {
                // Either it is killed now or it ended just before: both are reaped below.
                let _ = child.kill();
                let _ = child.wait();
                killed.push(rank);
            }
        }
        killed
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
            grace_ms: 5000,
        };
        insta::assert_snapshot!(error, @"rank 3 failed first (exit status: 3); then rank 1 (signal: 6 (SIGABRT)), rank 4 (exit status: 1); killed after the 5000 ms grace period: rank 0, 2");
    }
}
