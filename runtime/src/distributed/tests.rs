//! The rendezvous over loopback TCP: every rank a thread, timeouts short, errors exact.

use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::*;

fn options(timeout_ms: u64) -> RendezvousOptions {
    RendezvousOptions {
        timeout: Duration::from_millis(timeout_ms),
        retry_interval: Duration::from_millis(10),
        join_frame_timeout: Duration::from_millis(200),
        verdict_margin: Duration::from_millis(200),
    }
}

fn env(rank: u32, world_size: u32, port: u16) -> WorldEnv {
    WorldEnv {
        rank,
        world_size,
        local_rank: rank,
        master_addr: "127.0.0.1".to_owned(),
        master_port: port,
    }
}

/// Rank 0 of a world of `world_size` serving on a port the system picks, in a thread.
fn rank_zero(
    world_size: u32,
    timeout_ms: u64,
) -> (u16, JoinHandle<Result<Vec<u8>, BootstrapError>>) {
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let serving = thread::spawn(move || {
        serve(&tcp, listener, world_size, options(timeout_ms), || {
            Ok(b"the-id".to_vec())
        })
    });
    (port, serving)
}

/// A rank other than 0, joining after `delay_ms`.
fn rank(
    rank: u32,
    world_size: u32,
    port: u16,
    timeout_ms: u64,
    delay_ms: u64,
) -> JoinHandle<Result<World, BootstrapError>> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(delay_ms));
        let env = env(rank, world_size, port);
        bootstrap(&Tcp::default(), &env, options(timeout_ms), || {
            unreachable!("only rank 0 makes the id")
        })
    })
}

/// The message with the test's port replaced, for snapshots.
fn message(error: &BootstrapError, port: u16) -> String {
    error.to_string().replace(&port.to_string(), "PORT")
}

/// Asserts that rank 0 (serving, or bootstrapping like the others) and each of `others` failed
/// with `expected`.
fn every_rank_failed_with<Outcome: PartialEq + std::fmt::Debug>(
    zero: JoinHandle<Result<Outcome, BootstrapError>>,
    others: impl IntoIterator<Item = JoinHandle<Result<World, BootstrapError>>>,
    expected: &BootstrapError,
) {
    assert_eq!(zero.join().unwrap(), Err(expected.clone()), "rank 0");
    for other in others {
        assert_eq!(other.join().unwrap(), Err(expected.clone()), "another rank");
    }
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = Tcp::default().listen(0).expect("loopback listens");
    listener.port()
}

#[test]
fn rank_zero_serves_every_rank_the_same_id() {
    let (port, zero) = rank_zero(4, 5_000);
    let others: Vec<_> = (1..4).map(|r| rank(r, 4, port, 5_000, 0)).collect();
    assert_eq!(zero.join().unwrap(), Ok(b"the-id".to_vec()));
    for (r, other) in (1..).zip(others) {
        assert_eq!(
            other.join().unwrap(),
            Ok(World {
                rank: r,
                world_size: 4,
                local_rank: r,
                id: b"the-id".to_vec()
            })
        );
    }
}

#[test]
fn a_world_of_one_needs_no_peer() {
    let tcp = Tcp::default();
    let world = bootstrap(&tcp, &env(0, 1, 0), options(1_000), || Ok(vec![9]));
    assert_eq!(
        world,
        Ok(World {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            id: vec![9]
        })
    );
}

#[test]
fn a_late_rank_and_a_late_rank_zero_still_meet() {
    // Rank 2 comes 300 ms after the others; rank 1 starts before rank 0 listens and retries.
    let port = closed_port();
    let early = rank(1, 3, port, 5_000, 0);
    thread::sleep(Duration::from_millis(100));
    let late = rank(2, 3, port, 5_000, 300);
    let tcp = Tcp::default();
    let zero = bootstrap(&tcp, &env(0, 3, port), options(5_000), || Ok(vec![1]));
    assert_eq!(zero.map(|w| w.id), Ok(vec![1]));
    assert_eq!(early.join().unwrap().map(|w| w.id), Ok(vec![1]));
    assert_eq!(late.join().unwrap().map(|w| w.id), Ok(vec![1]));
}

#[test]
fn a_rank_that_never_comes_times_out_everywhere() {
    let (port, zero) = rank_zero(4, 400);
    let one = rank(1, 4, port, 5_000, 0);
    let expected = BootstrapError::RankTimeout {
        world_size: 4,
        missing: vec![2, 3],
        timeout_ms: 400,
    };
    every_rank_failed_with(zero, [one], &expected);
    insta::assert_snapshot!(expected, @"rendezvous timed out after 400 ms: ranks [2, 3] of a world of 4 never joined");
    let one_missing = BootstrapError::RankTimeout {
        world_size: 2,
        missing: vec![1],
        timeout_ms: 400,
    };
    insta::assert_snapshot!(one_missing, @"rendezvous timed out after 400 ms: rank 1 of a world of 2 never joined");
}

#[test]
fn a_mismatched_world_size_aborts_every_joined_rank() {
    let (port, zero) = rank_zero(3, 5_000);
    let two = rank(2, 3, port, 5_000, 0);
    // Rank 2 joins first (well before rank 1), so it is among the ranks rank 0 tells.
    let one = rank(1, 2, port, 5_000, 500);
    let expected = BootstrapError::WorldSizeMismatch {
        rank: 1,
        expected: 3,
        actual: 2,
    };
    every_rank_failed_with(zero, [one, two], &expected);
    insta::assert_snapshot!(expected, @"world size mismatch: rank 1 has WORLD_SIZE=2, rank 0 has WORLD_SIZE=3");
}

#[test]
fn a_rank_that_joins_twice_aborts_every_joined_rank() {
    let (port, zero) = rank_zero(3, 5_000);
    let first = rank(1, 3, port, 5_000, 0);
    let second = rank(1, 3, port, 5_000, 200);
    let expected = BootstrapError::DuplicateRank { rank: 1 };
    every_rank_failed_with(zero, [first, second], &expected);
    insta::assert_snapshot!(expected, @"rank 1 joined twice: two processes have RANK=1");
}

#[test]
fn a_dead_rank_zero_is_unreachable() {
    let port = closed_port();
    let error = rank(1, 2, port, 300, 0).join().unwrap().unwrap_err();
    let BootstrapError::Unreachable { attempts, .. } = &error else {
        panic!("expected Unreachable, got {error:?}");
    };
    assert!(*attempts >= 2, "it retried: {attempts} attempts");
    let text = message(&error, port).replace(&format!("{attempts} connection"), "N connection");
    insta::assert_snapshot!(text, @"rank 0 at 127.0.0.1:PORT is unreachable: N connection attempts in 300 ms failed, the last with: Connection refused (os error 111)");
}

#[test]
fn a_rank_zero_that_dies_after_accepting_is_reported() {
    let tcp = Tcp::default();
    let mut listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, 5_000, 0);
    let link = listener.accept(Duration::from_secs(5)).unwrap();
    drop((link, listener));
    let error = one.join().unwrap().unwrap_err();
    assert_eq!(
        error,
        BootstrapError::RankZeroClosed {
            addr: format!("127.0.0.1:{port}"),
            rank: 1
        }
    );
    insta::assert_snapshot!(message(&error, port), @"rank 0 at 127.0.0.1:PORT closed the connection before rank 1 had the communicator id");
}

#[test]
fn a_silent_rank_zero_times_out() {
    let tcp = Tcp::default();
    let mut listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, 300, 0);
    let _held = listener.accept(Duration::from_secs(5)).unwrap();
    let error = one.join().unwrap().unwrap_err();
    insta::assert_snapshot!(message(&error, port), @"rank 0 at 127.0.0.1:PORT sent no reply within 500 ms of rank 1 joining");
}

#[test]
fn strangers_are_ignored_and_other_versions_refused() {
    let (port, zero) = rank_zero(2, 5_000);
    let tcp = Tcp::default();
    let mut stranger = tcp
        .connect("127.0.0.1", port, Duration::from_secs(1))
        .unwrap();
    stranger.send(b"GET / HTTP/1.1").unwrap();
    let mut newer = tcp
        .connect("127.0.0.1", port, Duration::from_secs(1))
        .unwrap();
    newer.send(b"LKRV\0\x03\x01").unwrap();
    let Ok(Received::Frame(reply)) = newer.recv(Duration::from_secs(5)) else {
        panic!("rank 0 answers a peer of another version");
    };
    let error = zero.join().unwrap().unwrap_err();
    let BootstrapError::VersionMismatch { peer, .. } = &error else {
        panic!("expected VersionMismatch, got {error:?}");
    };
    let text = error.to_string().replace(peer.as_str(), "PEER");
    insta::assert_snapshot!(text, @"rendezvous protocol version mismatch: this process speaks version 2, PEER speaks 3");
    assert_eq!(
        Message::decode(&reply),
        Ok(Message::Refused(BootstrapError::Aborted {
            reason: error.to_string()
        }))
    );
    assert_eq!(
        stranger.recv(Duration::from_secs(1)).unwrap(),
        Received::Closed
    );
}

#[test]
fn a_failed_id_reaches_every_rank() {
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, 5_000, 0);
    let zero = serve(&tcp, listener, 2, options(5_000), || {
        Err("no NCCL".to_owned())
    });
    let expected = BootstrapError::Id {
        reason: "no NCCL".to_owned(),
    };
    assert_eq!(zero, Err(expected));
    let error = one.join().unwrap().unwrap_err();
    insta::assert_snapshot!(error, @"rank 0 aborted the rendezvous: rank 0 could not make the communicator id: no NCCL");
}

#[test]
fn rank_zero_reports_a_port_in_use() {
    let tcp = Tcp::default();
    let held = tcp.listen(0).expect("loopback listens");
    let port = held.port();
    let error = bootstrap(&tcp, &env(0, 2, port), options(100), || Ok(vec![])).unwrap_err();
    insta::assert_snapshot!(message(&error, port), @"rank 0 cannot listen on port PORT for the rendezvous: Address already in use (os error 98)");
}

/// Rank 0 of a world of `world_size` on `port`, starting after `delay_ms`.
fn late_rank_zero(
    world_size: u32,
    port: u16,
    timeout_ms: u64,
    delay_ms: u64,
) -> JoinHandle<Result<World, BootstrapError>> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(delay_ms));
        let env = env(0, world_size, port);
        bootstrap(&Tcp::default(), &env, options(timeout_ms), || {
            Ok(b"the-id".to_vec())
        })
    })
}

#[test]
fn a_rank_that_started_long_before_rank_zero_still_hears_its_verdict() {
    // Rank 1 at 0 ms, rank 0 at 500 ms (deadline 1500 ms), rank 2 at 1300 ms: rank 2 joins in
    // time, so every rank has the id. Rank 1 waits for the reply from its connection (500 ms)
    // on, to 1700 ms, not from its start, which ended at 1200 ms, before rank 2 came.
    let port = closed_port();
    let one = rank(1, 3, port, 1_000, 0);
    let zero = late_rank_zero(3, port, 1_000, 500);
    let two = rank(2, 3, port, 1_000, 1_300);
    for (r, outcome) in [(0, zero), (1, one), (2, two)] {
        assert_eq!(
            outcome.join().unwrap().map(|world| (world.rank, world.id)),
            Ok((r, b"the-id".to_vec())),
            "rank {r}"
        );
    }
}

#[test]
fn a_rank_that_started_before_rank_zero_hears_which_rank_is_missing() {
    // Rank 0 starts 500 ms after rank 1 and times out at 1500 ms, past rank 1's start plus the
    // timeout and margin (1200 ms): rank 1 still hears the verdict, not a silence.
    let port = closed_port();
    let one = rank(1, 3, port, 1_000, 0);
    let zero = late_rank_zero(3, port, 1_000, 500);
    let expected = BootstrapError::RankTimeout {
        world_size: 3,
        missing: vec![2],
        timeout_ms: 1_000,
    };
    every_rank_failed_with(zero, [one], &expected);
}

#[test]
fn a_timeout_with_a_thousand_missing_ranks_reaches_the_joined_rank_cut_and_counted() {
    // 1098 missing ranks would take 4392 bytes to list, over a frame's 4096.
    let (port, zero) = rank_zero(1100, 400);
    let one = rank(1, 1100, port, 5_000, 0);
    let expected = BootstrapError::ManyRanksTimeout {
        world_size: 1100,
        first_missing: (2..66).collect(),
        missing_count: 1098,
        timeout_ms: 400,
    };
    every_rank_failed_with(zero, [one], &expected);
    insta::assert_snapshot!(expected, @"rendezvous timed out after 400 ms: 1098 ranks of a world of 1100 never joined, the first 64 listed: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65]");
}

#[test]
fn a_peer_trickling_its_join_does_not_hold_rank_zero_past_its_timeout() {
    // A join sent one byte every 150 ms takes 2.85 s; each byte comes within the 200 ms a first
    // frame may take, but the frame as a whole does not, so rank 0 drops it and times out.
    let (port, zero) = rank_zero(2, 500);
    let started = std::time::Instant::now();
    let trickler = thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_nodelay(true).unwrap();
        let join = Message::Join {
            rank: 1,
            world_size: 2,
        }
        .encode();
        let mut framed = (join.len() as u32).to_be_bytes().to_vec();
        framed.extend_from_slice(&join);
        for byte in framed {
            if std::io::Write::write_all(&mut stream, &[byte]).is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(150));
        }
    });
    let outcome = zero.join().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        outcome,
        Err(BootstrapError::RankTimeout {
            world_size: 2,
            missing: vec![1],
            timeout_ms: 500
        })
    );
    assert!(
        elapsed < Duration::from_millis(1_000),
        "rank 0 took {elapsed:?}"
    );
    trickler.join().unwrap();
}

#[test]
fn a_frame_cut_short_by_the_timeout_is_an_error_and_silence_is_not() {
    let tcp = Tcp::default();
    let mut listener = tcp.listen(0).expect("loopback listens");
    let mut peer = std::net::TcpStream::connect(("127.0.0.1", listener.port())).unwrap();
    let mut link = listener.accept(Duration::from_secs(5)).unwrap().unwrap();
    assert_eq!(
        link.recv(Duration::from_millis(50)).unwrap(),
        Received::TimedOut
    );
    std::io::Write::write_all(&mut peer, &[0, 0]).unwrap();
    let error = link.recv(Duration::from_millis(50)).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    insta::assert_snapshot!(error, @"a frame cut short: its bytes did not all come within the timeout");
}

/// Accept failures, in order; endless for a listener that never accepts again.
type AcceptErrors = Box<dyn Iterator<Item = std::io::Error> + Send>;

/// TCP whose listener fails with `errors` before it accepts.
struct FlakyTcp {
    tcp: Tcp,
    errors: std::sync::Mutex<Option<AcceptErrors>>,
}

struct FlakyListener {
    listener: TcpRendezvousListener,
    errors: AcceptErrors,
}

impl Transport for FlakyTcp {
    type Link = TcpLink;
    type Listener = FlakyListener;

    fn listen(&self, port: u16) -> std::io::Result<FlakyListener> {
        Ok(FlakyListener {
            listener: self.tcp.listen(port)?,
            errors: self.errors.lock().unwrap().take().expect("listens once"),
        })
    }

    fn connect(&self, host: &str, port: u16, timeout: Duration) -> std::io::Result<TcpLink> {
        self.tcp.connect(host, port, timeout)
    }

    fn now(&self) -> Duration {
        self.tcp.now()
    }

    fn pause(&self, duration: Duration) {
        self.tcp.pause(duration);
    }
}

impl Listener for FlakyListener {
    type Link = TcpLink;

    fn accept(&mut self, timeout: Duration) -> std::io::Result<Option<TcpLink>> {
        match self.errors.next() {
            Some(error) => Err(error),
            None => self.listener.accept(timeout),
        }
    }

    fn port(&self) -> u16 {
        self.listener.port()
    }
}

/// TCP whose listener fails with `errors` first.
fn flaky(errors: impl Iterator<Item = std::io::Error> + Send + 'static) -> FlakyTcp {
    FlakyTcp {
        tcp: Tcp::default(),
        errors: std::sync::Mutex::new(Some(Box::new(errors))),
    }
}

/// Rank 0 of a world of two over a listener failing with `errors` first, and rank 1.
fn serve_through(errors: Vec<std::io::Error>) -> (Result<Vec<u8>, BootstrapError>, u16) {
    let flaky = flaky(errors.into_iter());
    let listener = flaky.listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, 1_000, 0);
    let zero = serve(&flaky, listener, 2, options(5_000), || Ok(vec![7]));
    // Rank 1 has the id, or (rank 0 gone before it joined) finds rank 0 unreachable.
    let _ = one.join().unwrap();
    (zero, port)
}

#[test]
fn accept_failures_of_the_moment_do_not_end_the_rendezvous() {
    use std::io::{Error, ErrorKind};
    let errors = vec![
        Error::from(ErrorKind::ConnectionAborted),
        Error::from(ErrorKind::ConnectionReset),
        Error::from(ErrorKind::Interrupted),
        Error::from_raw_os_error(24), // EMFILE
        Error::from_raw_os_error(23), // ENFILE
        Error::from(ErrorKind::OutOfMemory),
    ];
    assert_eq!(serve_through(errors).0, Ok(vec![7]));
}

#[test]
fn an_accept_that_keeps_failing_for_the_moment_ends_at_the_deadline() {
    // Descriptors that never come back: every accept fails with EMFILE.
    let flaky = flaky(std::iter::repeat_with(|| {
        std::io::Error::from_raw_os_error(24)
    }));
    let listener = flaky.listen(0).expect("loopback listens");
    let (done, outcome) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(serve(&flaky, listener, 2, options(300), || Ok(vec![7])));
    });
    let outcome = outcome
        .recv_timeout(Duration::from_secs(10))
        .expect("rank 0 still accepting 10 s after its 300 ms timeout");
    assert_eq!(
        outcome,
        Err(BootstrapError::RankTimeout {
            world_size: 2,
            missing: vec![1],
            timeout_ms: 300
        })
    );
}

#[test]
fn a_silent_connection_near_the_deadline_does_not_hold_the_verdict_past_it() {
    // Rank 2 never comes; a connection that says nothing arrives 450 ms into rank 0's 500. A
    // first frame may take 2 s, but rank 0 still decides at 500 ms, while rank 1 (waiting
    // until 800 ms) can hear it.
    let patient = RendezvousOptions {
        join_frame_timeout: Duration::from_secs(2),
        verdict_margin: Duration::from_millis(300),
        ..options(500)
    };
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let zero = thread::spawn(move || serve(&tcp, listener, 3, patient, || Ok(vec![1])));
    let one = thread::spawn(move || {
        bootstrap(&Tcp::default(), &env(1, 3, port), patient, || {
            unreachable!("only rank 0 makes the id")
        })
    });
    let silent = thread::spawn(move || {
        thread::sleep(Duration::from_millis(450));
        let stream = std::net::TcpStream::connect(("127.0.0.1", port));
        thread::sleep(Duration::from_millis(1_500));
        drop(stream);
    });
    let expected = BootstrapError::RankTimeout {
        world_size: 3,
        missing: vec![2],
        timeout_ms: 500,
    };
    every_rank_failed_with(zero, [one], &expected);
    silent.join().unwrap();
}

#[test]
fn an_id_made_after_the_joined_ranks_stopped_waiting_fails_every_rank() {
    // Rank 2 joins 400 ms into rank 0's 500; the id then takes 400 ms, past the 200 ms margin
    // rank 1 waits beyond the timeout: no rank may go on with the id while rank 1 gave up.
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let zero = thread::spawn(move || {
        serve(&tcp, listener, 3, options(500), || {
            thread::sleep(Duration::from_millis(400));
            Ok(vec![1])
        })
    });
    let one = rank(1, 3, port, 500, 0);
    let two = rank(2, 3, port, 500, 400);
    let zero = zero.join().unwrap();
    assert!(
        matches!(&zero, Err(BootstrapError::Id { reason }) if reason.starts_with("made ")),
        "rank 0: {zero:?}"
    );
    for (r, outcome) in [(1, one.join().unwrap()), (2, two.join().unwrap())] {
        assert!(outcome.is_err(), "rank {r} went on alone: {outcome:?}");
    }
}

#[test]
fn other_accept_failures_abort_the_rendezvous() {
    let denied = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
    let (zero, port) = serve_through(vec![denied]);
    assert_eq!(
        zero,
        Err(BootstrapError::Io {
            peer: format!("port {port}"),
            during: "accepting a rank",
            reason: "denied".to_owned()
        })
    );
}

#[test]
fn a_duplicate_rank_after_the_world_completed_finds_rank_zero_unreachable() {
    let (port, zero) = rank_zero(2, 5_000);
    let first = rank(1, 2, port, 5_000, 0);
    assert_eq!(zero.join().unwrap(), Ok(b"the-id".to_vec()));
    assert_eq!(first.join().unwrap().map(|w| w.id), Ok(b"the-id".to_vec()));
    let error = rank(1, 2, port, 300, 0).join().unwrap().unwrap_err();
    assert!(
        matches!(
            error,
            BootstrapError::Unreachable {
                timeout_ms: 300,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn an_id_too_long_for_a_frame_fails_every_rank_instead_of_reaching_them_cut() {
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, 5_000, 0);
    let zero = serve(&tcp, listener, 2, options(5_000), || Ok(vec![1; 5_000]));
    let expected = BootstrapError::Id {
        reason: format!("an id of 5000 bytes, over the {MAX_ID_BYTES} a rendezvous frame carries"),
    };
    assert_eq!(zero, Err(expected.clone()));
    assert_eq!(
        one.join().unwrap(),
        Err(BootstrapError::Aborted {
            reason: expected.to_string()
        })
    );
    insta::assert_snapshot!(expected, @"rank 0 could not make the communicator id: an id of 5000 bytes, over the 4081 a rendezvous frame carries");
}

#[test]
fn an_endless_timeout_is_no_overflow() {
    let endless = RendezvousOptions {
        timeout: Duration::MAX,
        verdict_margin: Duration::MAX,
        ..options(0)
    };
    let world = bootstrap(&Tcp::default(), &env(0, 1, 0), endless, || Ok(vec![3]));
    assert_eq!(world.map(|w| w.id), Ok(vec![3]));
    let (port, zero) = rank_zero(2, 5_000);
    let one = thread::spawn(move || join(&Tcp::default(), &env(1, 2, port), endless));
    assert_eq!(zero.join().unwrap(), Ok(b"the-id".to_vec()));
    assert_eq!(one.join().unwrap(), Ok(b"the-id".to_vec()));
}
