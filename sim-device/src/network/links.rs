//! The [`Transport`] of one simulated process: its calls that could block pass the turn
//! (`turns.rs`), its sends are delivered one latency later, and its death (a scripted
//! [`Death`](super::Death)) ends its thread at the send that triggers it.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use lockstep::distributed::{Link, Listener, MAX_FRAME_BYTES, Received, Transport};

use super::turns::{Listening, Net, Pending, Pid, Pipe, PipeId, Shared, Wait};
use super::{CONNECT_NS, Death, LINK_LATENCY_NS, SIM_HOST};

/// The payload a killed process's thread unwinds with (never a panic message: it is the
/// scripted end of the process, caught where its thread started).
pub(super) struct Killed;

/// The network as one simulated process sees it, made for each process by
/// [`SimNetwork::run`](super::SimNetwork::run).
#[derive(Debug)]
pub struct SimTransport {
    pub(super) shared: Arc<Shared>,
    pub(super) pid: Pid,
}

/// One end of a connection between two simulated processes.
#[derive(Debug)]
pub struct SimLink {
    shared: Arc<Shared>,
    pid: Pid,
    outbound: PipeId,
    inbound: PipeId,
    peer: String,
}

/// A port a simulated process listens on.
#[derive(Debug)]
pub struct SimListener {
    shared: Arc<Shared>,
    pid: Pid,
    port: u16,
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Ends process `pid`, which holds the turn, now: its ends close, and its thread unwinds to
/// where it started.
fn die(mut net: MutexGuard<'_, Net>, pid: Pid) -> ! {
    net.close_all(pid);
    net.event(pid, "dies".to_owned());
    drop(net);
    std::panic::resume_unwind(Box::new(Killed))
}

impl Transport for SimTransport {
    type Link = SimLink;
    type Listener = SimListener;

    fn listen(&self, port: u16) -> io::Result<SimListener> {
        let mut net = self.shared.lock();
        if net.listeners.contains_key(&port) {
            net.event(self.pid, format!("listen {port}: in use"));
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("port {port} of {SIM_HOST} is in use"),
            ));
        }
        net.listeners.insert(
            port,
            Listening {
                owner: self.pid,
                backlog: VecDeque::new(),
            },
        );
        net.event(self.pid, format!("listen {port}"));
        Ok(SimListener {
            shared: self.shared.clone(),
            pid: self.pid,
            port,
        })
    }

    /// Takes one round trip ([`CONNECT_NS`]) whatever the timeout, then connects if the port
    /// listens by then, else is refused.
    fn connect(&self, host: &str, port: u16, _timeout: Duration) -> io::Result<SimLink> {
        let net = self.shared.lock();
        let until_ns = net.now_ns.saturating_add(CONNECT_NS);
        let mut net = self.shared.block(net, self.pid, Wait::Time, until_ns);
        let owner = net.listeners.get(&port).map(|l| l.owner);
        let (Some(owner), true) = (owner, host == SIM_HOST) else {
            net.event(self.pid, format!("connect {host}:{port}: refused"));
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "connection refused",
            ));
        };
        let pipe = |net: &mut Net, writer, reader| {
            net.pipes.push(Pipe {
                writer,
                reader,
                frames: VecDeque::new(),
                closed_ns: None,
                reader_gone: false,
            });
            net.pipes.len() - 1
        };
        let inbound = pipe(&mut net, owner, self.pid);
        let outbound = pipe(&mut net, self.pid, owner);
        let pending = Pending {
            arrived_ns: net.now_ns,
            inbound: outbound,
            outbound: inbound,
            client: self.pid,
        };
        net.listeners
            .get_mut(&port)
            .expect("listens: checked above")
            .backlog
            .push_back(pending);
        net.event(self.pid, format!("connect {host}:{port}"));
        let peer = format!("{host}:{port}");
        Ok(SimLink {
            shared: self.shared.clone(),
            pid: self.pid,
            outbound,
            inbound,
            peer,
        })
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.shared.lock().now_ns)
    }

    fn pause(&self, duration: Duration) {
        let net = self.shared.lock();
        let until_ns = net.now_ns.saturating_add(nanos(duration));
        let mut net = self.shared.block(net, self.pid, Wait::Time, until_ns);
        net.event(self.pid, format!("paused {} ns", nanos(duration)));
    }
}

impl Listener for SimListener {
    type Link = SimLink;

    fn accept(&mut self, timeout: Duration) -> io::Result<Option<SimLink>> {
        let net = self.shared.lock();
        let until_ns = net.now_ns.saturating_add(nanos(timeout));
        let mut net = self
            .shared
            .block(net, self.pid, Wait::Connection(self.port), until_ns);
        loop {
            let now_ns = net.now_ns;
            let listening = net
                .listeners
                .get_mut(&self.port)
                .expect("listens until dropped");
            if listening
                .backlog
                .front()
                .is_some_and(|p| p.arrived_ns <= now_ns)
            {
                let pending = listening.backlog.pop_front().expect("checked above");
                let peer = net.procs[pending.client].name.clone();
                net.event(self.pid, format!("accept {peer}"));
                return Ok(Some(SimLink {
                    shared: self.shared.clone(),
                    pid: self.pid,
                    outbound: pending.outbound,
                    inbound: pending.inbound,
                    peer,
                }));
            }
            if now_ns >= until_ns {
                net.event(self.pid, "accept: timed out".to_owned());
                return Ok(None);
            }
            net = self
                .shared
                .block(net, self.pid, Wait::Connection(self.port), until_ns);
        }
    }

    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        let mut net = self.shared.lock();
        if net
            .listeners
            .get(&self.port)
            .is_some_and(|l| l.owner == self.pid)
        {
            net.stop_listening(self.port);
            net.event(self.pid, format!("stops listening on {}", self.port));
        }
    }
}

impl Link for SimLink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if frame.len() > MAX_FRAME_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a frame of {} bytes, over the limit of {MAX_FRAME_BYTES}",
                    frame.len()
                ),
            ));
        }
        let mut net = self.shared.lock();
        let proc = &mut net.procs[self.pid];
        proc.sends += 1;
        let (sends, death) = (proc.sends, proc.death);
        if death == Some(Death::AtSend(sends)) {
            die(net, self.pid);
        }
        let deliver_ns = net.now_ns + LINK_LATENCY_NS;
        let pipe = &mut net.pipes[self.outbound];
        let lost = pipe.reader_gone;
        if !lost {
            pipe.frames.push_back((deliver_ns, frame.to_vec()));
        }
        let what = format!(
            "send {} bytes to {}{}",
            frame.len(),
            self.peer,
            if lost { ": lost" } else { "" }
        );
        net.event(self.pid, what);
        if death == Some(Death::AfterSend(sends)) {
            die(net, self.pid);
        }
        Ok(())
    }

    fn recv(&mut self, timeout: Duration) -> io::Result<Received> {
        let net = self.shared.lock();
        let until_ns = net.now_ns.saturating_add(nanos(timeout));
        let wait = Wait::Frame(self.inbound);
        let mut net = self.shared.block(net, self.pid, wait, until_ns);
        loop {
            let now_ns = net.now_ns;
            let pipe = &mut net.pipes[self.inbound];
            if pipe.frames.front().is_some_and(|f| f.0 <= now_ns) {
                let (_, frame) = pipe.frames.pop_front().expect("checked above");
                net.event(
                    self.pid,
                    format!("recv {} bytes from {}", frame.len(), self.peer),
                );
                return Ok(Received::Frame(frame));
            }
            if pipe.frames.is_empty() && pipe.closed_ns.is_some_and(|at| at <= now_ns) {
                net.event(self.pid, format!("recv from {}: closed", self.peer));
                return Ok(Received::Closed);
            }
            if now_ns >= until_ns {
                net.event(self.pid, format!("recv from {}: timed out", self.peer));
                return Ok(Received::TimedOut);
            }
            net = self.shared.block(net, self.pid, wait, until_ns);
        }
    }

    fn peer(&self) -> String {
        self.peer.clone()
    }
}

impl Drop for SimLink {
    fn drop(&mut self) {
        let mut net = self.shared.lock();
        net.close_writer(self.outbound);
        net.close_reader(self.inbound);
    }
}
