//! An in-memory network with virtual time, for simulated processes that run the real
//! rendezvous (`lockstep::distributed::bootstrap`) over it.
//!
//! **Processes are threads taking turns.** The rendezvous's drivers are blocking loops, so each
//! simulated process runs on a thread of its own, but only one runs at a time: a process holds
//! the turn until it calls something that could block (`accept`, `recv`, `connect`, `pause`),
//! where it says what it waits for and until when. The turn then goes to the waiting process
//! whose wait ends earliest in virtual time (what it waits for has come, or its deadline has
//! passed), the lowest index first among equals; virtual time advances to that moment only
//! when no process can run at the current one. Sends and listens never block. So which process
//! runs, and what it sees, is a function of the processes' programs and start times alone:
//! the same processes give the same [`NetEvent`]s, in the same order, at the same virtual
//! times, on every run. Nothing here reads the wall clock.
//!
//! **The network.** One host, [`SIM_HOST`]; a port listens from `listen` until its listener
//! drops. A connection attempt takes one round trip ([`CONNECT_NS`]) and is refused if nothing
//! listens by then; a frame arrives [`LINK_LATENCY_NS`] after it was sent, in order, and so
//! does a close. A frame sent to an end that closed is lost; connections not yet accepted close
//! with their listener.
//!
//! **Death.** A process dies at a send ([`Death`]): its thread unwinds from that call (its ends
//! close, as the kernel closes a dead process's sockets) and [`SimNetwork::run`] reports
//! [`ProcessEnd::Died`]. A process that never starts is simply not run.

mod links;
mod turns;

#[cfg(test)]
mod tests;

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

pub use links::{SimLink, SimListener, SimTransport};
pub use turns::NetEvent;

use links::Killed;
use turns::{Proc, Shared, Status, Wait};

/// The one host of the simulated network: every process runs on it.
pub const SIM_HOST: &str = "sim-host";
/// Virtual time a frame (or a close) takes from one end of a connection to the other.
pub const LINK_LATENCY_NS: u64 = 50_000;
/// Virtual time a connection attempt takes, accepted or refused: one round trip.
pub const CONNECT_NS: u64 = 2 * LINK_LATENCY_NS;

/// When a simulated process dies: at one of its sends, counted from 1 over all its
/// connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Death {
    /// Right after its `n`-th send, which is delivered.
    AfterSend(u32),
    /// At its `n`-th send, which is lost.
    AtSend(u32),
}

/// One simulated process: when it starts, whether it dies, and its program, which gets the
/// network as its [`Transport`](lockstep::distributed::Transport).
pub struct SimProcess<'a, T> {
    /// For the trace and as the peer its connections name, e.g. `rank 2`.
    pub name: String,
    /// Virtual time at which it starts.
    pub start_ns: u64,
    /// Where it dies, if it does.
    pub death: Option<Death>,
    /// What it runs.
    pub program: Box<dyn FnOnce(&SimTransport) -> T + Send + 'a>,
}

/// How a simulated process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessEnd<T> {
    /// Its program returned this.
    Returned(T),
    /// It died as its [`Death`] scripted.
    Died,
}

/// What a run of simulated processes did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkRun<T> {
    /// Each process's end, in the order they were given.
    pub ends: Vec<ProcessEnd<T>>,
    /// Everything they did on the network, in order.
    pub events: Vec<NetEvent>,
    /// A hash of `events`: equal for equal processes.
    pub trace_hash: u64,
}

/// The in-memory network: runs simulated processes over it, one at a time.
#[derive(Debug)]
pub struct SimNetwork;

impl SimNetwork {
    /// Runs `processes` over a fresh network until every one has returned or died.
    ///
    /// # Panics
    /// If a program panics (a bug, not a scripted death): once every other process has
    /// finished, with that panic.
    pub fn run<T: Send>(processes: Vec<SimProcess<'_, T>>) -> NetworkRun<T> {
        let procs = processes
            .iter()
            .map(|p| Proc {
                name: p.name.clone(),
                status: Status::Waiting {
                    on: Wait::Time,
                    until_ns: p.start_ns,
                },
                death: p.death,
                sends: 0,
            })
            .collect();
        let shared = Arc::new(Shared::new(procs));
        let results: Vec<std::thread::Result<T>> = std::thread::scope(|scope| {
            let threads: Vec<_> = processes
                .into_iter()
                .enumerate()
                .map(|(pid, process)| {
                    let shared = shared.clone();
                    scope.spawn(move || run_process(&shared, pid, process.program))
                })
                .collect();
            shared.start();
            threads
                .into_iter()
                .map(|thread| thread.join().expect("a process catches its panics"))
                .collect()
        });
        let mut ends = Vec::with_capacity(results.len());
        for result in results {
            match result {
                Ok(value) => ends.push(ProcessEnd::Returned(value)),
                Err(payload) if payload.is::<Killed>() => ends.push(ProcessEnd::Died),
                Err(payload) => panic::resume_unwind(payload),
            }
        }
        let (events, trace_hash) = shared.trace();
        NetworkRun {
            ends,
            events,
            trace_hash,
        }
    }
}

/// One process's thread: waits for its first turn, runs its program, and passes the turn on
/// however the program ends.
fn run_process<T>(
    shared: &Arc<Shared>,
    pid: usize,
    program: Box<dyn FnOnce(&SimTransport) -> T + Send + '_>,
) -> std::thread::Result<T> {
    let net = shared.lock();
    let mut net = shared.await_turn(net, pid);
    net.event(pid, "starts".to_owned());
    drop(net);
    let transport = SimTransport {
        shared: shared.clone(),
        pid,
    };
    let result = panic::catch_unwind(AssertUnwindSafe(move || program(&transport)));
    let how = match &result {
        Ok(_) => "returns",
        Err(payload) if payload.is::<Killed>() => "is dead",
        Err(_) => "panicked",
    };
    shared.finish(pid, how);
    result
}
