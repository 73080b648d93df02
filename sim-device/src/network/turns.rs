//! The network's state and its cooperative scheduler: one process runs at a time, and the next
//! is the one whose wait ends earliest in virtual time (then the lowest process index).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};

use lockstep::kernel::Fnv1a;

/// A simulated process, by its index in [`SimNetwork::run`](super::SimNetwork::run)'s list.
pub(super) type Pid = usize;
/// A pipe, by its index in [`Net::pipes`].
pub(super) type PipeId = usize;

/// What a waiting process waits for, besides its deadline.
#[derive(Clone, Copy, Debug)]
pub(super) enum Wait {
    /// Only the deadline (a pause, a connection attempt's round trip, the start).
    Time,
    /// A connection in the backlog of the listener on this port.
    Connection(u16),
    /// A frame, or the close, on this pipe.
    Frame(PipeId),
}

/// Where a process stands.
#[derive(Clone, Copy, Debug)]
pub(super) enum Status {
    /// Waits for `on`, until virtual time `until_ns` at the latest.
    Waiting { on: Wait, until_ns: u64 },
    /// Holds the turn.
    Running,
    /// Returned, died or panicked: never runs again.
    Finished,
}

/// One process's books.
#[derive(Debug)]
pub(super) struct Proc {
    pub name: String,
    pub status: Status,
    pub death: Option<super::Death>,
    /// Frames it sent so far.
    pub sends: u32,
}

/// One direction of a connection: frames in flight, each with its delivery time.
///
/// Invariant: delivery times never decrease along `frames`, and none is after `closed_ns`.
#[derive(Debug)]
pub(super) struct Pipe {
    pub writer: Pid,
    pub reader: Pid,
    pub frames: VecDeque<(u64, Vec<u8>)>,
    /// When the writer's close reaches the reader.
    pub closed_ns: Option<u64>,
    /// The reader closed its end: what is sent is lost.
    pub reader_gone: bool,
}

/// A connection that reached a listener and waits to be accepted.
#[derive(Debug)]
pub(super) struct Pending {
    pub arrived_ns: u64,
    /// Client to listener.
    pub inbound: PipeId,
    /// Listener to client.
    pub outbound: PipeId,
    pub client: Pid,
}

/// A listening port.
#[derive(Debug)]
pub(super) struct Listening {
    pub owner: Pid,
    pub backlog: VecDeque<Pending>,
}

/// One thing a process did on the network, at a virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetEvent {
    /// Virtual time of the event, in nanoseconds.
    pub at_ns: u64,
    /// The process, by its index in the list [`SimNetwork::run`](super::SimNetwork::run) was
    /// given.
    pub process: usize,
    /// What it did, e.g. `connect sim-host:29500: refused`.
    pub what: String,
}

/// The whole network, behind one lock.
#[derive(Debug)]
pub(super) struct Net {
    pub now_ns: u64,
    pub running: Option<Pid>,
    pub procs: Vec<Proc>,
    pub listeners: BTreeMap<u16, Listening>,
    pub pipes: Vec<Pipe>,
    pub events: Vec<NetEvent>,
    pub hash: Fnv1a,
}

impl Net {
    /// Records what the running process `pid` did.
    pub fn event(&mut self, pid: Pid, what: String) {
        self.hash.write_u64(self.now_ns);
        self.hash.write_u64(pid as u64);
        self.hash.write_bytes(what.as_bytes());
        self.events.push(NetEvent {
            at_ns: self.now_ns,
            process: pid,
            what,
        });
    }

    /// When process `pid`'s wait ends: its deadline, or earlier if what it waits for comes.
    fn ready_ns(&self, pid: Pid) -> Option<u64> {
        let Status::Waiting { on, until_ns } = self.procs[pid].status else {
            return None;
        };
        let event_ns = match on {
            Wait::Time => None,
            Wait::Connection(port) => self
                .listeners
                .get(&port)
                .and_then(|l| l.backlog.front())
                .map(|p| p.arrived_ns),
            Wait::Frame(pipe) => {
                let pipe = &self.pipes[pipe];
                pipe.frames.front().map(|f| f.0).or(pipe.closed_ns)
            }
        };
        Some(event_ns.map_or(until_ns, |at| at.min(until_ns)))
    }

    /// Hands the turn to the waiting process whose wait ends first (ties: the lowest index),
    /// advancing virtual time to that moment if it is later; `None` once every process finished.
    ///
    /// Virtual time only moves here, and only when no process can run at the current time.
    pub fn pick(&mut self) -> Option<Pid> {
        debug_assert!(self.running.is_none(), "one process runs at a time");
        let (ready_ns, pid) = (0..self.procs.len())
            .filter_map(|pid| self.ready_ns(pid).map(|at| (at, pid)))
            .min()?;
        self.now_ns = self.now_ns.max(ready_ns);
        self.procs[pid].status = Status::Running;
        self.running = Some(pid);
        Some(pid)
    }

    /// Closes every end process `pid` holds: its pipes' closes reach their readers one latency
    /// from now, frames still coming to it are lost, and its listeners stop (their pending
    /// connections are closed too).
    pub fn close_all(&mut self, pid: Pid) {
        let ports: Vec<u16> = self
            .listeners
            .iter()
            .filter(|(_, l)| l.owner == pid)
            .map(|(&port, _)| port)
            .collect();
        for port in ports {
            self.stop_listening(port);
        }
        for id in 0..self.pipes.len() {
            if self.pipes[id].writer == pid {
                self.close_writer(id);
            }
            if self.pipes[id].reader == pid {
                self.close_reader(id);
            }
        }
    }

    /// The writer of `pipe` closes it.
    pub fn close_writer(&mut self, pipe: PipeId) {
        let closes_ns = self.now_ns + super::LINK_LATENCY_NS;
        self.pipes[pipe].closed_ns.get_or_insert(closes_ns);
    }

    /// The reader of `pipe` closes it.
    pub fn close_reader(&mut self, pipe: PipeId) {
        let pipe = &mut self.pipes[pipe];
        pipe.reader_gone = true;
        pipe.frames.clear();
    }

    /// The listener on `port` stops; connections not yet accepted are closed.
    pub fn stop_listening(&mut self, port: u16) {
        if let Some(listening) = self.listeners.remove(&port) {
            for pending in listening.backlog {
                self.close_writer(pending.outbound);
                self.close_reader(pending.inbound);
            }
        }
    }
}

/// The network shared by the processes' threads, and the turn they pass.
#[derive(Debug)]
pub(super) struct Shared {
    net: Mutex<Net>,
    turn: Condvar,
}

impl Shared {
    pub fn new(procs: Vec<Proc>) -> Self {
        Self {
            net: Mutex::new(Net {
                now_ns: 0,
                running: None,
                procs,
                listeners: BTreeMap::new(),
                pipes: Vec::new(),
                events: Vec::new(),
                hash: Fnv1a::default(),
            }),
            turn: Condvar::new(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Net> {
        self.net.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives the first turn.
    pub fn start(&self) {
        let mut net = self.lock();
        net.pick();
        drop(net);
        self.turn.notify_all();
    }

    /// Blocks the calling thread until process `pid` holds the turn.
    pub fn await_turn<'a>(&'a self, mut net: MutexGuard<'a, Net>, pid: Pid) -> MutexGuard<'a, Net> {
        while net.running != Some(pid) {
            net = self.turn.wait(net).unwrap_or_else(|p| p.into_inner());
        }
        net
    }

    /// Process `pid`, which holds the turn, waits for `on` until `until_ns` at the latest:
    /// the turn passes (perhaps back to it), and this returns when it holds the turn again.
    pub fn block<'a>(
        &'a self,
        mut net: MutexGuard<'a, Net>,
        pid: Pid,
        on: Wait,
        until_ns: u64,
    ) -> MutexGuard<'a, Net> {
        debug_assert_eq!(net.running, Some(pid), "only the running process blocks");
        net.procs[pid].status = Status::Waiting { on, until_ns };
        net.running = None;
        let next = net.pick();
        if next != Some(pid) {
            self.turn.notify_all();
            net = self.await_turn(net, pid);
        }
        net
    }

    /// Process `pid` is done: what it still holds closes, and the turn passes on.
    pub fn finish(&self, pid: Pid, how: &str) {
        let mut net = self.lock();
        net.close_all(pid);
        net.event(pid, how.to_owned());
        net.procs[pid].status = Status::Finished;
        if net.running == Some(pid) {
            net.running = None;
        }
        net.pick();
        drop(net);
        self.turn.notify_all();
    }

    /// The events so far and their hash.
    pub fn trace(&self) -> (Vec<NetEvent>, u64) {
        let net = self.lock();
        (net.events.clone(), net.hash.0)
    }
}
