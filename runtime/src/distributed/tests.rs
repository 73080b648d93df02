//! The rendezvous's drivers, decided by logic: every process on the fake network (`fake.rs`),
//! whose clock moves only when a driver waits or a test says so, so each deadline, timeout and
//! late arrival is exact and no outcome depends on how busy the machine is. Whole worlds run
//! one process at a time (`world.rs`). `loopback.rs` adds a few smoke tests over real TCP,
//! whose verdicts do not depend on timing.

mod fake;
mod loopback;
mod world;

use std::io;
use std::time::Duration;

use self::fake::{Accept, Arrival, Clock, FakeLink, FakeNet, PORT, Sent, ms};
use self::world::{Ended, Process, Stranger, WorldRun, run_world};
use super::*;

/// Short timeouts: the fake clock makes them exact, not fast.
fn options(timeout_ms: u64) -> RendezvousOptions {
    RendezvousOptions {
        timeout: ms(timeout_ms),
        retry_interval: ms(10),
        join_frame_timeout: ms(200),
        verdict_margin: ms(200),
    }
}

/// A process of a world of `world_size` starting at `starts_ms`, timing out after
/// `timeout_ms`.
fn process(rank: u32, world_size: u32, starts_ms: u64, timeout_ms: u64) -> Process {
    Process {
        rank,
        world_size,
        starts_at: ms(starts_ms),
        options: options(timeout_ms),
    }
}

/// Rank 0's id in the world tests.
fn the_id(_: &Clock) -> Result<Vec<u8>, String> {
    Ok(b"the-id".to_vec())
}

/// The outcome of rank 0 and of every other rank, in order.
fn outcomes(run: &WorldRun) -> Vec<Result<Vec<u8>, BootstrapError>> {
    std::iter::once(&run.zero)
        .chain(&run.others)
        .map(|ended| ended.outcome.clone())
        .collect()
}

/// `count` processes that all failed with `error`.
fn all_failed(error: &BootstrapError, count: usize) -> Vec<Result<Vec<u8>, BootstrapError>> {
    vec![Err(error.clone()); count]
}

/// The join of `rank` of a world of `world_size`.
fn join_frame(rank: u32, world_size: u32) -> Vec<u8> {
    Message::Join { rank, world_size }.encode()
}

/// Rank 0 of a world of two on `clock` (which the links of `script` share) serving over
/// `script`, its id `[7]`: its outcome, and when it returned.
fn serve_script(
    clock: &Clock,
    script: Vec<Accept>,
    options: RendezvousOptions,
) -> (Result<Vec<u8>, BootstrapError>, Duration) {
    let net = FakeNet::serving(clock, script);
    let listener = net.listen(PORT).expect("scripted");
    let outcome = serve(&net, listener, 2, options, || Ok(vec![7]));
    (outcome, clock.now())
}

/// Rank 1 of a world of two joining from time 0, rank 0 listening during `listening`, the
/// connection receiving `arrivals`: its outcome, when it returned, and its attempts.
fn join_rank_zero(
    listening: Option<(Duration, Duration)>,
    arrivals: Vec<Arrival>,
    options: RendezvousOptions,
) -> (Result<Vec<u8>, BootstrapError>, Duration, FakeNet) {
    let clock = Clock::default();
    let (link, _) = FakeLink::new(&clock, "rank 0", arrivals);
    let net = FakeNet::joining(&clock, listening, link);
    let env = WorldEnv {
        rank: 1,
        world_size: 2,
        local_rank: 1,
        master_addr: "rank-zero".to_owned(),
        master_port: PORT,
    };
    let outcome = join(&net, &env, options);
    (outcome, clock.now(), net)
}

#[test]
fn every_rank_gets_the_same_id() {
    let others: Vec<_> = (1..4).map(|r| process(r, 4, 0, 5_000)).collect();
    let run = run_world(process(0, 4, 0, 5_000), &others, vec![], the_id);
    assert_eq!(outcomes(&run), vec![Ok(b"the-id".to_vec()); 4]);
    assert_eq!(run.zero.at, Duration::ZERO, "nothing waited");
}

#[test]
fn a_late_rank_and_a_late_rank_zero_still_meet() {
    // Rank 1 starts 100 ms before rank 0 listens and retries; rank 2 comes 300 ms after.
    let others = [process(1, 3, 0, 5_000), process(2, 3, 400, 5_000)];
    let run = run_world(process(0, 3, 100, 5_000), &others, vec![], the_id);
    assert_eq!(outcomes(&run), vec![Ok(b"the-id".to_vec()); 3]);
    let connected: Vec<_> = run.others.iter().map(|e| e.connected_at).collect();
    assert_eq!(connected, [Some(ms(100)), Some(ms(400))]);
    assert_eq!(
        run.zero.at,
        ms(400),
        "rank 0 sends the id once the last rank joined"
    );
}

#[test]
fn a_rank_that_never_comes_times_out_everywhere() {
    let run = run_world(
        process(0, 4, 0, 400),
        &[process(1, 4, 0, 5_000)],
        vec![],
        the_id,
    );
    let expected = BootstrapError::RankTimeout {
        world_size: 4,
        missing: vec![2, 3],
        timeout_ms: 400,
    };
    assert_eq!(outcomes(&run), all_failed(&expected, 2));
    assert_eq!((run.zero.at, run.others[0].at), (ms(400), ms(400)));
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
    // Rank 2 joins first, so it is among the ranks rank 0 tells.
    let others = [process(2, 3, 0, 5_000), process(1, 2, 500, 5_000)];
    let run = run_world(process(0, 3, 0, 5_000), &others, vec![], the_id);
    let expected = BootstrapError::WorldSizeMismatch {
        rank: 1,
        expected: 3,
        actual: 2,
    };
    assert_eq!(outcomes(&run), all_failed(&expected, 3));
    insta::assert_snapshot!(expected, @"world size mismatch: rank 1 has WORLD_SIZE=2, rank 0 has WORLD_SIZE=3");
}

#[test]
fn a_rank_that_joins_twice_aborts_every_joined_rank() {
    let others = [process(1, 3, 0, 5_000), process(1, 3, 200, 5_000)];
    let run = run_world(process(0, 3, 0, 5_000), &others, vec![], the_id);
    let expected = BootstrapError::DuplicateRank { rank: 1 };
    assert_eq!(outcomes(&run), all_failed(&expected, 3));
    insta::assert_snapshot!(expected, @"rank 1 joined twice: two processes have RANK=1");
}

#[test]
fn a_dead_rank_zero_is_unreachable_after_retrying_until_the_timeout() {
    let (outcome, at, net) = join_rank_zero(None, vec![], options(300));
    // An attempt every 10 ms; the last at 290 ms, since another would start at the timeout.
    let expected_attempts: Vec<_> = (0..30).map(|i| ms(10 * i)).collect();
    assert_eq!(net.attempts(), expected_attempts);
    assert_eq!(at, ms(290));
    let error = outcome.unwrap_err();
    insta::assert_snapshot!(error, @"rank 0 at rank-zero:29500 is unreachable: 30 connection attempts in 300 ms failed, the last with: connection refused");
}

#[test]
fn a_rank_zero_that_closes_after_accepting_is_reported() {
    let listening = Some((Duration::ZERO, Duration::MAX));
    let closes = vec![Arrival::Close { at: ms(50) }];
    let (outcome, at, _) = join_rank_zero(listening, closes, options(5_000));
    let error = outcome.unwrap_err();
    assert_eq!(
        error,
        BootstrapError::RankZeroClosed {
            addr: format!("rank-zero:{PORT}"),
            rank: 1
        }
    );
    assert_eq!(at, ms(50));
    insta::assert_snapshot!(error, @"rank 0 at rank-zero:29500 closed the connection before rank 1 had the communicator id");
}

#[test]
fn a_silent_rank_zero_times_out_after_the_timeout_and_the_margin() {
    let listening = Some((Duration::ZERO, Duration::MAX));
    let (outcome, at, _) = join_rank_zero(listening, vec![], options(300));
    assert_eq!(at, ms(500));
    insta::assert_snapshot!(outcome.unwrap_err(), @"rank 0 at rank-zero:29500 sent no reply within 500 ms of rank 1 joining");
}

#[test]
fn strangers_are_ignored_and_other_versions_refused() {
    let clock = Clock::default();
    let (stranger, stranger_end) = FakeLink::new(
        &clock,
        "stranger",
        vec![Arrival::frame(ms(1), b"GET / HTTP/1.1")],
    );
    let (newer, newer_end) = FakeLink::new(
        &clock,
        "newer",
        vec![Arrival::frame(ms(3), b"LKRV\0\x03\x01")],
    );
    let script = vec![
        Accept::Connection {
            at: ms(1),
            link: stranger,
        },
        Accept::Connection {
            at: ms(2),
            link: newer,
        },
    ];
    let (outcome, at) = serve_script(&clock, script, options(5_000));
    let error = outcome.unwrap_err();
    assert_eq!(at, ms(3), "decided at the newer peer's frame");
    insta::assert_snapshot!(error, @"rendezvous protocol version mismatch: this process speaks version 2, newer speaks 3");
    let told: Vec<_> = newer_end
        .sent
        .borrow()
        .iter()
        .map(|sent| (sent.at, Message::decode(&sent.frame)))
        .collect();
    let refusal = Message::Refused(BootstrapError::Aborted {
        reason: error.to_string(),
    });
    assert_eq!(told, [(ms(3), Ok(refusal))], "the newer peer hears why");
    assert_eq!(
        *stranger_end.sent.borrow(),
        [],
        "a stranger is told nothing"
    );
    assert_eq!(
        stranger_end.closed_at.get(),
        Some(ms(1)),
        "and dropped at once"
    );
}

#[test]
fn a_failed_id_reaches_every_rank() {
    let run = run_world(
        process(0, 2, 0, 5_000),
        &[process(1, 2, 0, 5_000)],
        vec![],
        |_| Err("no NCCL".to_owned()),
    );
    let expected = BootstrapError::Id {
        reason: "no NCCL".to_owned(),
    };
    let aborted = BootstrapError::Aborted {
        reason: expected.to_string(),
    };
    assert_eq!(outcomes(&run), vec![Err(expected), Err(aborted.clone())]);
    insta::assert_snapshot!(aborted, @"rank 0 aborted the rendezvous: rank 0 could not make the communicator id: no NCCL");
}

#[test]
fn a_rank_that_started_long_before_rank_zero_still_hears_its_verdict() {
    // Rank 1 at 0 ms, rank 0 at 500 ms (deadline 1500 ms), rank 2 at 1300 ms: rank 2 joins in
    // time, so every rank has the id. Rank 1 waits for the reply from its connection (500 ms)
    // on, to 1700 ms, not from its start, which would have ended at 1200 ms, before rank 2.
    let others = [process(1, 3, 0, 1_000), process(2, 3, 1_300, 1_000)];
    let run = run_world(process(0, 3, 500, 1_000), &others, vec![], the_id);
    assert_eq!(outcomes(&run), vec![Ok(b"the-id".to_vec()); 3]);
    assert_eq!(run.others[0].connected_at, Some(ms(500)));
    assert_eq!(run.others[0].at, ms(1_300));
}

#[test]
fn a_rank_that_started_before_rank_zero_hears_which_rank_is_missing() {
    // Rank 0 starts 500 ms after rank 1 and times out at 1500 ms, past rank 1's start plus the
    // timeout and margin (1200 ms): rank 1 still hears the verdict, not a silence.
    let run = run_world(
        process(0, 3, 500, 1_000),
        &[process(1, 3, 0, 1_000)],
        vec![],
        the_id,
    );
    let expected = BootstrapError::RankTimeout {
        world_size: 3,
        missing: vec![2],
        timeout_ms: 1_000,
    };
    assert_eq!(outcomes(&run), all_failed(&expected, 2));
    assert_eq!(run.others[0].at, ms(1_500), "rank 1 heard rank 0's verdict");
}

#[test]
fn a_timeout_with_a_thousand_missing_ranks_reaches_the_joined_rank_cut_and_counted() {
    // 1098 missing ranks would take 4392 bytes to list, over a frame's 4096.
    let run = run_world(
        process(0, 1100, 0, 400),
        &[process(1, 1100, 0, 5_000)],
        vec![],
        the_id,
    );
    let expected = BootstrapError::ManyRanksTimeout {
        world_size: 1100,
        first_missing: (2..66).collect(),
        missing_count: 1098,
        timeout_ms: 400,
    };
    assert_eq!(outcomes(&run), all_failed(&expected, 2));
    insta::assert_snapshot!(expected, @"rendezvous timed out after 400 ms: 1098 ranks of a world of 1100 never joined, the first 64 listed: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65]");
}

#[test]
fn a_peer_trickling_its_join_does_not_hold_rank_zero_past_its_timeout() {
    // A join whose bytes trickle in from 0 to 2850 ms: each could come within the 200 ms a
    // first frame may take, but the frame as a whole does not, so rank 0 drops it at 200 ms
    // and decides at its 500 ms deadline.
    let clock = Clock::default();
    let trickle = Arrival::Frame {
        begins: Duration::ZERO,
        ends: ms(2_850),
        frame: join_frame(1, 2),
    };
    let (trickler, trickler_end) = FakeLink::new(&clock, "trickler", vec![trickle]);
    let script = vec![Accept::Connection {
        at: Duration::ZERO,
        link: trickler,
    }];
    let (outcome, at) = serve_script(&clock, script, options(500));
    assert_eq!(
        outcome,
        Err(BootstrapError::RankTimeout {
            world_size: 2,
            missing: vec![1],
            timeout_ms: 500
        })
    );
    assert_eq!(at, ms(500));
    assert_eq!(trickler_end.closed_at.get(), Some(ms(200)));
}

#[test]
fn accept_failures_of_the_moment_do_not_end_the_rendezvous() {
    let clock = Clock::default();
    let (one, one_end) = FakeLink::new(
        &clock,
        "rank 1",
        vec![Arrival::frame(Duration::ZERO, &join_frame(1, 2))],
    );
    let script = vec![
        Accept::Fails(io::Error::from(io::ErrorKind::ConnectionAborted)),
        Accept::Fails(io::Error::from(io::ErrorKind::ConnectionReset)),
        Accept::Fails(io::Error::from(io::ErrorKind::Interrupted)),
        Accept::Fails(io::Error::from_raw_os_error(24)), // EMFILE
        Accept::Fails(io::Error::from_raw_os_error(23)), // ENFILE
        Accept::Fails(io::Error::from(io::ErrorKind::OutOfMemory)),
        Accept::Connection {
            at: Duration::ZERO,
            link: one,
        },
    ];
    let (outcome, _) = serve_script(&clock, script, options(5_000));
    assert_eq!(outcome, Ok(vec![7]));
    // Each failure paused 10 ms before the next accept; then rank 1 joined at once.
    let welcome = Message::Welcome {
        world_size: 2,
        id: vec![7],
    };
    let sent = one_end.sent.borrow().clone();
    assert_eq!(
        sent,
        [Sent {
            at: ms(60),
            frame: welcome.encode()
        }]
    );
}

#[test]
fn an_accept_that_keeps_failing_for_the_moment_ends_at_the_deadline() {
    // Descriptors that never come back: every accept fails with EMFILE.
    let (outcome, at) = serve_script(
        &Clock::default(),
        vec![Accept::FailsForever(24)],
        options(300),
    );
    assert_eq!(
        outcome,
        Err(BootstrapError::RankTimeout {
            world_size: 2,
            missing: vec![1],
            timeout_ms: 300
        })
    );
    assert_eq!(at, ms(300));
}

#[test]
fn other_accept_failures_abort_the_rendezvous() {
    let denied = io::Error::new(io::ErrorKind::PermissionDenied, "denied");
    let (outcome, at) = serve_script(
        &Clock::default(),
        vec![Accept::Fails(denied)],
        options(5_000),
    );
    assert_eq!(
        outcome,
        Err(BootstrapError::Io {
            peer: format!("port {PORT}"),
            during: "accepting a rank",
            reason: "denied".to_owned()
        })
    );
    assert_eq!(at, Duration::ZERO);
}

#[test]
fn a_silent_connection_near_the_deadline_does_not_hold_the_verdict_past_it() {
    // Rank 2 never comes; a connection that says nothing arrives 450 ms into rank 0's 500. A
    // first frame may take 2 s, but rank 0 still decides at 500 ms, while rank 1 (waiting
    // until 800 ms) can hear it.
    let patient = RendezvousOptions {
        join_frame_timeout: ms(2_000),
        verdict_margin: ms(300),
        ..options(500)
    };
    let zero = Process {
        options: patient,
        ..process(0, 3, 0, 500)
    };
    let one = Process {
        options: patient,
        ..process(1, 3, 0, 500)
    };
    let silent = Stranger {
        at: ms(450),
        arrivals: vec![Arrival::Close { at: ms(1_950) }],
    };
    let run = run_world(zero, &[one], vec![silent], the_id);
    let expected = BootstrapError::RankTimeout {
        world_size: 3,
        missing: vec![2],
        timeout_ms: 500,
    };
    assert_eq!(outcomes(&run), all_failed(&expected, 2));
    assert_eq!((run.zero.at, run.others[0].at), (ms(500), ms(500)));
    assert_eq!(run.strangers[0].closed_at.get(), Some(ms(500)));
}

#[test]
fn an_id_made_after_the_joined_ranks_stopped_waiting_fails_every_rank() {
    // Rank 2 joins 400 ms into rank 0's 500; the id then takes 400 ms, to 800 ms, past the
    // 700 ms to which rank 1 (connected at 0) waits: no rank may go on with the id while rank 1
    // gave up. Rank 2, still waiting, hears why.
    let others = [process(1, 3, 0, 500), process(2, 3, 400, 500)];
    let slow = |clock: &Clock| {
        clock.pass(ms(400));
        Ok(vec![1])
    };
    let run = run_world(process(0, 3, 0, 500), &others, vec![], slow);
    let late = BootstrapError::Id {
        reason: "made 100 ms after the joined ranks stopped waiting for it (the timeout and \
                 the verdict margin)"
            .to_owned(),
    };
    let gave_up = BootstrapError::ReplyTimeout {
        addr: format!("rank-zero:{PORT}"),
        rank: 1,
        timeout_ms: 700,
    };
    let told = BootstrapError::Aborted {
        reason: late.to_string(),
    };
    assert_eq!(outcomes(&run), vec![Err(late), Err(gave_up), Err(told)]);
    let ended_at: Vec<_> = std::iter::once(&run.zero)
        .chain(&run.others)
        .map(|e: &Ended| e.at)
        .collect();
    assert_eq!(ended_at, [ms(800), ms(700), ms(800)]);
}

#[test]
fn a_duplicate_rank_after_the_world_completed_finds_rank_zero_unreachable() {
    let others = [process(1, 2, 0, 5_000), process(1, 2, 1_000, 300)];
    let run = run_world(process(0, 2, 0, 5_000), &others, vec![], the_id);
    assert_eq!(run.zero.outcome, Ok(b"the-id".to_vec()));
    assert_eq!(run.others[0].outcome, Ok(b"the-id".to_vec()));
    assert!(
        matches!(
            run.others[1].outcome,
            Err(BootstrapError::Unreachable {
                timeout_ms: 300,
                ..
            })
        ),
        "{:?}",
        run.others[1].outcome
    );
}

#[test]
fn an_id_too_long_for_a_frame_fails_every_rank_instead_of_reaching_them_cut() {
    let run = run_world(
        process(0, 2, 0, 5_000),
        &[process(1, 2, 0, 5_000)],
        vec![],
        |_| Ok(vec![1; 5_000]),
    );
    let expected = BootstrapError::Id {
        reason: format!("an id of 5000 bytes, over the {MAX_ID_BYTES} a rendezvous frame carries"),
    };
    let aborted = BootstrapError::Aborted {
        reason: expected.to_string(),
    };
    assert_eq!(outcomes(&run), vec![Err(expected.clone()), Err(aborted)]);
    insta::assert_snapshot!(expected, @"rank 0 could not make the communicator id: an id of 5000 bytes, over the 4081 a rendezvous frame carries");
}

#[test]
fn an_endless_timeout_is_no_overflow() {
    let endless = RendezvousOptions {
        timeout: Duration::MAX,
        verdict_margin: Duration::MAX,
        ..options(0)
    };
    let zero = Process {
        options: endless,
        ..process(0, 2, 0, 0)
    };
    let one = Process {
        options: endless,
        ..process(1, 2, 100, 0)
    };
    let run = run_world(zero, &[one], vec![], the_id);
    assert_eq!(outcomes(&run), vec![Ok(b"the-id".to_vec()); 2]);
}
