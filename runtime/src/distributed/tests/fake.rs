//! A network for the rendezvous's drivers, in one thread, whose clock moves only when a driver
//! waits or a test says so: no socket, no thread, no wall clock.
//!
//! Each end of a connection is scripted: what arrives on it and when ([`Arrival`]), and for
//! rank 0 what its listener accepts and when ([`Accept`]). A wait of the driver (`accept`,
//! `recv`) moves the clock to the moment what it waits for comes, or to the end of its
//! timeout if nothing does; `pause` lets its duration pass; `connect` and `send` take no
//! time; a test moves it too (a slow `make_id`). So every deadline and timeout is decided by
//! arithmetic on the script, the same on every run and on any machine.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::time::Duration;

use super::super::MAX_FRAME_BYTES;
use super::super::transport::{Link, Listener, Received, Transport};

/// `n` milliseconds: every moment of a script, counted from the world's origin.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One process's clock, shared by its network and its links; a default one reads zero. Time
/// never goes back; an endless wait reaches `Duration::MAX`.
#[derive(Clone, Debug, Default)]
pub struct Clock(Rc<Cell<Duration>>);

impl Clock {
    /// A clock that reads `now`.
    pub fn at(now: Duration) -> Self {
        Self(Rc::new(Cell::new(now)))
    }

    pub fn now(&self) -> Duration {
        self.0.get()
    }

    /// Moves to `moment` if that is later.
    pub fn reach(&self, moment: Duration) {
        self.0.set(self.now().max(moment));
    }

    /// Lets `duration` pass.
    pub fn pass(&self, duration: Duration) {
        self.0.set(self.now().saturating_add(duration));
    }
}

/// What comes in on one end of a connection, in order.
#[derive(Clone, Debug)]
pub enum Arrival {
    /// A whole frame, its first byte at `begins` and its last at `ends`.
    Frame {
        begins: Duration,
        ends: Duration,
        frame: Vec<u8>,
    },
    /// The other end closes at `at`; nothing comes after.
    Close { at: Duration },
}

impl Arrival {
    /// A frame whose bytes all come at `at`.
    pub fn frame(at: Duration, frame: &[u8]) -> Self {
        Self::Frame {
            begins: at,
            ends: at,
            frame: frame.to_vec(),
        }
    }
}

/// A frame one end sent, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sent {
    pub at: Duration,
    pub frame: Vec<u8>,
}

/// What one end of a connection did, for the test (and for the other end's script).
#[derive(Debug, Default)]
pub struct EndLog {
    pub sent: RefCell<Vec<Sent>>,
    /// When this end was dropped (closed), if it was.
    pub closed_at: Cell<Option<Duration>>,
}

/// One end of a scripted connection.
#[derive(Debug)]
pub struct FakeLink {
    clock: Clock,
    peer: String,
    arrivals: VecDeque<Arrival>,
    log: Rc<EndLog>,
}

impl FakeLink {
    /// An end on `clock`'s process, connected to `peer`, that receives `arrivals` (in order of
    /// time). Returns the log of what it sends and when it closes.
    pub fn new(clock: &Clock, peer: &str, arrivals: Vec<Arrival>) -> (Self, Rc<EndLog>) {
        let log = Rc::new(EndLog::default());
        let link = Self {
            clock: clock.clone(),
            peer: peer.to_owned(),
            arrivals: arrivals.into(),
            log: log.clone(),
        };
        (link, log)
    }
}

impl Link for FakeLink {
    /// Takes no time; refuses a frame over the limit, as TCP does.
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if frame.len() > MAX_FRAME_BYTES {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "over the limit"));
        }
        self.log.sent.borrow_mut().push(Sent {
            at: self.clock.now(),
            frame: frame.to_vec(),
        });
        Ok(())
    }

    /// The next arrival if it is complete by the timeout (the clock moves to it); a frame
    /// begun but not finished by then is an error, as on TCP; else the whole timeout passes.
    fn recv(&mut self, timeout: Duration) -> io::Result<Received> {
        let until = self.clock.now().saturating_add(timeout);
        match self.arrivals.front() {
            Some(&Arrival::Close { at }) if at <= until => {
                self.clock.reach(at);
                Ok(Received::Closed)
            }
            Some(&Arrival::Frame { ends, .. }) if ends <= until => {
                self.clock.reach(ends);
                let Some(Arrival::Frame { frame, .. }) = self.arrivals.pop_front() else {
                    unreachable!("the front is a frame");
                };
                Ok(Received::Frame(frame))
            }
            Some(&Arrival::Frame { begins, .. }) if begins <= until => {
                self.clock.reach(until);
                Err(io::Error::new(io::ErrorKind::TimedOut, "a frame cut short"))
            }
            _ => {
                self.clock.reach(until);
                Ok(Received::TimedOut)
            }
        }
    }

    fn peer(&self) -> String {
        self.peer.clone()
    }
}

impl Drop for FakeLink {
    fn drop(&mut self) {
        self.log.closed_at.set(Some(self.clock.now()));
    }
}

/// What rank 0's listener does at its next accepts, in order.
#[derive(Debug)]
pub enum Accept {
    /// A connection comes at `at` (a script lists them by time).
    Connection { at: Duration, link: FakeLink },
    /// The next accept fails with this at once.
    Fails(io::Error),
    /// Every accept from here on fails at once with this OS error.
    FailsForever(i32),
}

/// Rank 0's scripted listener.
#[derive(Debug)]
pub struct FakeListener {
    clock: Clock,
    script: VecDeque<Accept>,
}

impl Listener for FakeListener {
    type Link = FakeLink;

    fn accept(&mut self, timeout: Duration) -> io::Result<Option<FakeLink>> {
        let until = self.clock.now().saturating_add(timeout);
        match self.script.front() {
            Some(&Accept::FailsForever(code)) => Err(io::Error::from_raw_os_error(code)),
            Some(Accept::Fails(_)) => match self.script.pop_front() {
                Some(Accept::Fails(err)) => Err(err),
                _ => unreachable!("the front fails"),
            },
            Some(&Accept::Connection { at, .. }) if at <= until => {
                self.clock.reach(at);
                match self.script.pop_front() {
                    Some(Accept::Connection { link, .. }) => Ok(Some(link)),
                    _ => unreachable!("the front is a connection"),
                }
            }
            _ => {
                self.clock.reach(until);
                Ok(None)
            }
        }
    }

    fn port(&self) -> u16 {
        PORT
    }
}

/// The port every scripted rank 0 listens on.
pub const PORT: u16 = 29_500;

/// One process's network: rank 0's listener, or the rank 0 another rank connects to.
#[derive(Debug, Default)]
pub struct FakeNet {
    clock: Clock,
    listener: RefCell<Option<FakeListener>>,
    /// From when until when (both included) rank 0 listens, for `connect`.
    listening: Option<(Duration, Duration)>,
    /// The end `connect` hands out once rank 0 listens.
    link: RefCell<Option<FakeLink>>,
    /// When each connection attempt was made.
    attempts: RefCell<Vec<Duration>>,
}

impl FakeNet {
    /// Rank 0's network: its clock and what its listener accepts.
    pub fn serving(clock: &Clock, script: Vec<Accept>) -> Self {
        let listener = FakeListener {
            clock: clock.clone(),
            script: script.into(),
        };
        Self {
            clock: clock.clone(),
            listener: RefCell::new(Some(listener)),
            ..Self::default()
        }
    }

    /// Another rank's network: rank 0 listens from `from` to `until` (nowhere for `None`),
    /// and a connection made then is `link`.
    pub fn joining(clock: &Clock, listening: Option<(Duration, Duration)>, link: FakeLink) -> Self {
        Self {
            clock: clock.clone(),
            listening,
            link: RefCell::new(Some(link)),
            ..Self::default()
        }
    }

    /// When each connection attempt was made.
    pub fn attempts(&self) -> Vec<Duration> {
        self.attempts.borrow().clone()
    }

    /// When the connection was made, if it was (the last attempt succeeded).
    pub fn connected_at(&self) -> Option<Duration> {
        match *self.link.borrow() {
            Some(_) => None,
            None => self.attempts.borrow().last().copied(),
        }
    }
}

impl Transport for FakeNet {
    type Link = FakeLink;
    type Listener = FakeListener;

    fn listen(&self, _port: u16) -> io::Result<FakeListener> {
        self.listener
            .borrow_mut()
            .take()
            .ok_or_else(|| io::Error::from(io::ErrorKind::AddrInUse))
    }

    /// Takes no time: refused unless rank 0 listens now.
    fn connect(&self, _host: &str, _port: u16, _timeout: Duration) -> io::Result<FakeLink> {
        let now = self.clock.now();
        self.attempts.borrow_mut().push(now);
        let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
        match self.listening {
            Some((from, until)) if from <= now && now <= until => {
                self.link.borrow_mut().take().ok_or_else(refused)
            }
            _ => Err(refused()),
        }
    }

    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn pause(&self, duration: Duration) {
        self.clock.pass(duration);
    }
}
