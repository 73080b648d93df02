//! What the rendezvous needs from a network: listen, accept, connect, and whole frames over a
//! connection, each with a timeout, and a clock. TCP implements it (`tcp.rs`); the simulator
//! implements it in memory with virtual time.

use std::io;
use std::time::Duration;

/// What one wait for a frame gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// One whole frame, as the other end sent it.
    Frame(Vec<u8>),
    /// The other end closed the connection.
    Closed,
    /// No frame came within the timeout; the connection is still open.
    TimedOut,
}

/// One connection, carrying whole frames (the transport delimits them).
pub trait Link {
    /// Sends one frame of at most [`MAX_FRAME_BYTES`](super::MAX_FRAME_BYTES).
    ///
    /// # Errors
    /// The transport's failure.
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;

    /// Waits at most `timeout` for the next whole frame, however slowly its bytes come.
    ///
    /// # Errors
    /// The transport's failure (a frame over the limit included, and a frame begun but not
    /// finished within `timeout`: the link is then of no further use).
    fn recv(&mut self, timeout: Duration) -> io::Result<Received>;

    /// The other end, for messages.
    fn peer(&self) -> String;
}

/// Rank 0's listening endpoint.
pub trait Listener {
    /// The connections it accepts.
    type Link: Link;

    /// Waits at most `timeout` for a connection; `None` if none came.
    ///
    /// # Errors
    /// The transport's failure.
    fn accept(&mut self, timeout: Duration) -> io::Result<Option<Self::Link>>;

    /// The port it listens on (the one asked for, or the one the system chose for port 0).
    fn port(&self) -> u16;
}

/// A network and its clock.
pub trait Transport {
    /// A connection between two processes.
    type Link: Link;
    /// Rank 0's endpoint, accepting this transport's connections.
    type Listener: Listener<Link = Self::Link>;

    /// Listens on `port` of every interface of this host.
    ///
    /// # Errors
    /// The transport's failure (the port in use, say).
    fn listen(&self, port: u16) -> io::Result<Self::Listener>;

    /// Connects to `host:port`, waiting at most `timeout`.
    ///
    /// # Errors
    /// The transport's failure: nothing listening, no route, a timeout.
    fn connect(&self, host: &str, port: u16, timeout: Duration) -> io::Result<Self::Link>;

    /// Time since an origin fixed by the transport, never decreasing (virtual in a simulator).
    fn now(&self) -> Duration;

    /// Lets `duration` pass before the next connection attempt.
    fn pause(&self, duration: Duration);
}
