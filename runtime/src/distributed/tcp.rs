//! The rendezvous over TCP: the standard library's blocking sockets, each frame prefixed with
//! its length (`u32`, big-endian).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::frame::MAX_FRAME_BYTES;
use super::transport::{Link, Listener, Received, Transport};

/// How often a listener without a connection looks again.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
/// The longest a receive waits: a longer timeout (`Duration::MAX`, say) means this one, which
/// the clock can represent.
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// How long a send may block (a frame is a few bytes; only a stuck peer takes longer).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP with the host's monotonic clock.
#[derive(Debug)]
pub struct Tcp {
    origin: Instant,
}

impl Default for Tcp {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

/// A listening socket on every IPv4 interface, and IPv4 only: `[::]` would take IPv4 too only
/// where the host's `net.ipv6.bindv6only` is off, which the standard library can neither see
/// nor change, so IPv4 is the one that works everywhere.
#[derive(Debug)]
pub struct TcpRendezvousListener {
    listener: TcpListener,
    port: u16,
}

/// A connected socket.
#[derive(Debug)]
pub struct TcpLink {
    stream: TcpStream,
    peer: String,
}

impl TcpLink {
    fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nonblocking(false)?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(SEND_TIMEOUT))?;
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "an unknown peer".to_owned(), |addr| addr.to_string());
        Ok(Self { stream, peer })
    }
}

impl Transport for Tcp {
    type Link = TcpLink;
    type Listener = TcpRendezvousListener;

    fn listen(&self, port: u16) -> io::Result<TcpRendezvousListener> {
        let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(TcpRendezvousListener { listener, port })
    }

    fn connect(&self, host: &str, port: u16, timeout: Duration) -> io::Result<TcpLink> {
        let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
        if addrs.is_empty() {
            let reason = format!("{host} has no address");
            return Err(io::Error::new(io::ErrorKind::NotFound, reason));
        }
        connect_any(&addrs, timeout)
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn pause(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Connects to the first of `addrs` (at least one) that answers, within `timeout` in all: each
/// attempt gets an equal share of the time left, so an address that never answers (a route
/// blackholed) leaves the others their time, and one refused at once leaves them its share.
fn connect_any(addrs: &[SocketAddr], timeout: Duration) -> io::Result<TcpLink> {
    let deadline = Instant::now() + timeout.min(LONGEST_WAIT);
    let mut last = None;
    for (tried, addr) in addrs.iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        let untried = u32::try_from(addrs.len() - tried).unwrap_or(u32::MAX);
        let share = (left / untried).max(Duration::from_millis(1));
        match TcpStream::connect_timeout(addr, share) {
            Ok(stream) => return TcpLink::new(stream),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address")))
}

impl Listener for TcpRendezvousListener {
    type Link = TcpLink;

    fn accept(&mut self, timeout: Duration) -> io::Result<Option<TcpLink>> {
        let since = Instant::now();
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => return TcpLink::new(stream).map(Some),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    let left = timeout.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    std::thread::sleep(left.min(ACCEPT_POLL));
                }
                Err(err) => return Err(err),
            }
        }
    }

    fn port(&self) -> u16 {
        self.port
    }
}

impl Link for TcpLink {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if frame.len() > MAX_FRAME_BYTES {
            return Err(over_limit(frame.len()));
        }
        let mut bytes = (frame.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(frame);
        self.stream.write_all(&bytes)?;
        self.stream.flush()
    }

    /// Waits at most `timeout` for the whole frame, however its bytes trickle in. A frame
    /// begun but not finished in time is an error ([`io::ErrorKind::TimedOut`]): the stream
    /// is then mid-frame, of no further use.
    fn recv(&mut self, timeout: Duration) -> io::Result<Received> {
        // At least one look at the socket, even at a deadline already reached.
        let deadline = Instant::now() + timeout.clamp(Duration::from_millis(1), LONGEST_WAIT);
        let mut header = [0; 4];
        if let Some(end) = read_by(&mut self.stream, &mut header, deadline)? {
            return Ok(end);
        }
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_FRAME_BYTES {
            return Err(over_limit(len));
        }
        let mut frame = vec![0; len];
        match read_by(&mut self.stream, &mut frame, deadline)? {
            None => Ok(Received::Frame(frame)),
            Some(Received::TimedOut) => Err(cut_short()),
            Some(end) => Ok(end),
        }
    }

    fn peer(&self) -> String {
        self.peer.clone()
    }
}

/// Fills `buf` by `deadline`, each read waiting only what is left of it. `Some` if the
/// connection closed, or if the time ran out before any byte came; a frame's header begun but
/// not finished in time is an error.
fn read_by(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> io::Result<Option<Received>> {
    let mut filled = 0;
    while filled < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return timed_out(filled);
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Ok(Some(Received::Closed)),
            Ok(read) => filled += read,
            Err(err) => match err.kind() {
                io::ErrorKind::Interrupted => {}
                io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                    return Ok(Some(Received::Closed));
                }
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    return timed_out(filled);
                }
                _ => return Err(err),
            },
        }
    }
    Ok(None)
}

/// A read whose time ran out after `filled` bytes: nothing of a frame yet, or a frame cut
/// short.
fn timed_out(filled: usize) -> io::Result<Option<Received>> {
    if filled == 0 {
        Ok(Some(Received::TimedOut))
    } else {
        Err(cut_short())
    }
}

/// The error of a frame whose bytes did not all come within the timeout.
fn cut_short() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "a frame cut short: its bytes did not all come within the timeout",
    )
}

/// The error of a frame of `len` bytes, sent or announced, past [`MAX_FRAME_BYTES`].
fn over_limit(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a frame of {len} bytes, over the limit of {MAX_FRAME_BYTES}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address whose connections hang: a listener whose backlog is full (Linux drops the
    /// SYNs that would overflow it), and the connections that fill it.
    fn blackholed() -> (SocketAddr, TcpListener, Vec<TcpStream>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        while held.len() < 10_000 {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                Ok(stream) => held.push(stream),
                Err(err) if err.kind() == io::ErrorKind::TimedOut => return (addr, listener, held),
                Err(err) => panic!("filling the backlog: {err}"),
            }
        }
        panic!("the backlog never filled");
    }

    #[test]
    fn a_blackholed_address_leaves_the_next_its_share_of_the_timeout() {
        let (hole, _listener, _held) = blackholed();
        let open = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let started = Instant::now();
        let link = connect_any(&[hole, open.local_addr().unwrap()], Duration::from_secs(2));
        let elapsed = started.elapsed();
        assert!(link.is_ok(), "{link:?}");
        // The hole takes its half, 1 s; it took the whole 2 s before.
        assert!(elapsed < Duration::from_millis(1_800), "{elapsed:?}");
    }
}
