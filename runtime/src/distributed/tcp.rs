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

/// Connects to the first of `addrs` (at least one) that answers, within `timeout` in all (see
/// [`first_answer`]).
fn connect_any(addrs: &[SocketAddr], timeout: Duration) -> io::Result<TcpLink> {
    let origin = Instant::now();
    let stream = first_answer(
        addrs,
        timeout,
        || origin.elapsed(),
        TcpStream::connect_timeout,
    )?;
    TcpLink::new(stream)
}

/// What `attempt` gives for the first of `addrs` that answers, within `timeout` in all, as
/// `now` (time since an origin) measures it: each attempt gets an equal share of the time left,
/// so an address that never answers (a route blackholed) leaves the others their time, and one
/// refused at once leaves them its share. The last failure if none answers.
fn first_answer<S>(
    addrs: &[SocketAddr],
    timeout: Duration,
    now: impl Fn() -> Duration,
    mut attempt: impl FnMut(&SocketAddr, Duration) -> io::Result<S>,
) -> io::Result<S> {
    let deadline = now().saturating_add(timeout.min(LONGEST_WAIT));
    let mut last = None;
    for (tried, addr) in addrs.iter().enumerate() {
        let left = deadline.saturating_sub(now());
        let untried = u32::try_from(addrs.len() - tried).unwrap_or(u32::MAX);
        let share = (left / untried).max(Duration::from_millis(1));
        match attempt(addr, share) {
            Ok(answer) => return Ok(answer),
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
            // No rendezvous frame is that long: the peer is not a Lockstep rendezvous (an HTTP
            // server on MASTER_PORT answers `HTTP`). Its first bytes go on as they came, for
            // the decoder to call a stranger's and say what they were.
            return Ok(Received::Frame(header.to_vec()));
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
    use std::cell::{Cell, RefCell};

    use super::*;
    use crate::distributed::frame::Message;

    /// The share of the timeout each address got, when `answers` (per address: how long it
    /// takes, and whether it then answers) meet [`first_answer`] on a clock that moves only by
    /// those times.
    fn shares(answers: &[(Duration, bool)], timeout: Duration) -> Vec<Duration> {
        let addrs: Vec<SocketAddr> = (1..=answers.len() as u16)
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .collect();
        let clock = Cell::new(Duration::ZERO);
        let given = RefCell::new(Vec::new());
        let attempt = |addr: &SocketAddr, share: Duration| {
            given.borrow_mut().push(share);
            let (takes, answers) = answers[usize::from(addr.port() - 1)];
            clock.set(clock.get() + takes.min(share));
            match answers {
                true => Ok(addr.port()),
                false => Err(io::Error::from(io::ErrorKind::TimedOut)),
            }
        };
        let _ = first_answer(&addrs, timeout, || clock.get(), attempt);
        given.into_inner()
    }

    #[test]
    fn a_blackholed_address_leaves_the_next_its_share_of_the_timeout() {
        let hole = (Duration::MAX, false);
        let open = (Duration::ZERO, true);
        // The hole takes its half, 1 s; it took the whole 2 s before.
        assert_eq!(
            shares(&[hole, open], Duration::from_secs(2)),
            [Duration::from_secs(1), Duration::from_secs(1)]
        );
        // One refused at once leaves the next its share: the open one gets the 2 s left.
        let refused = (Duration::ZERO, false);
        assert_eq!(
            shares(&[hole, refused, open], Duration::from_secs(3)),
            [
                Duration::from_secs(1),
                Duration::from_secs(1),
                Duration::from_secs(2)
            ]
        );
        // An endless timeout is bounded, not an overflow.
        assert_eq!(shares(&[open], Duration::MAX), [LONGEST_WAIT]);
    }

    #[test]
    fn a_frame_cut_short_by_the_timeout_is_an_error_and_silence_is_not() {
        let mut listener = Tcp::default().listen(0).expect("loopback listens");
        let mut peer = TcpStream::connect((Ipv4Addr::LOCALHOST, listener.port())).unwrap();
        let mut link = listener
            .accept(Duration::from_secs(60))
            .unwrap()
            .expect("the peer connected");
        // Nothing was sent: silence, however long the wait.
        assert_eq!(
            link.recv(Duration::from_millis(1)).unwrap(),
            Received::TimedOut
        );
        // Half a header, which has arrived (peek waits for it) before the receive starts: the
        // rest never comes, so the receive ends cut short, however long it waits.
        peer.write_all(&[0, 0]).unwrap();
        link.stream.set_read_timeout(None).unwrap();
        let mut arrived = [0; 2];
        while link.stream.peek(&mut arrived).unwrap() < 2 {}
        let error = link.recv(Duration::from_millis(1)).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        insta::assert_snapshot!(error, @"a frame cut short: its bytes did not all come within the timeout");
    }

    /// A rendezvous that reached a server that is not Lockstep's reported "a frame of
    /// 1213486160 bytes, over the limit" (the length its `HTTP` spells): it says so now.
    #[test]
    fn a_peer_that_is_not_a_rendezvous_is_named_a_stranger() {
        let mut listener = Tcp::default().listen(0).expect("loopback listens");
        let mut peer = TcpStream::connect((Ipv4Addr::LOCALHOST, listener.port())).unwrap();
        let mut link = listener
            .accept(Duration::from_secs(60))
            .unwrap()
            .expect("the peer connected");
        peer.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        let Received::Frame(bytes) = link.recv(Duration::from_secs(60)).unwrap() else {
            panic!("the bytes arrived");
        };
        let error = Message::decode(&bytes)
            .unwrap_err()
            .into_error("rank 0 at 127.0.0.1:1");
        insta::assert_snapshot!(error, @r#"malformed rendezvous message from rank 0 at 127.0.0.1:1: not a Lockstep rendezvous: it sent b"HTTP"; is another service at that address and port?"#);
    }
}
