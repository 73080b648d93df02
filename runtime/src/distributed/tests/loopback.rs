//! Smoke tests over real loopback TCP: what only sockets can show (the OS's errors, a close
//! seen as such, the clamp of an endless timeout). Every verdict holds however slow the machine
//! is: timeouts here only bound a hang, and no test arranges an order by sleeping.

use std::thread;
use std::time::Duration;

use super::super::*;

/// Timeouts that only bound a hang: every test here ends well before them.
fn patient() -> RendezvousOptions {
    RendezvousOptions {
        timeout: Duration::from_secs(60),
        retry_interval: Duration::from_millis(10),
        join_frame_timeout: Duration::from_secs(60),
        verdict_margin: Duration::from_secs(1),
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

/// A rank other than 0 joining in a thread of its own.
fn rank(
    rank: u32,
    world_size: u32,
    port: u16,
    options: RendezvousOptions,
) -> thread::JoinHandle<Result<World, BootstrapError>> {
    thread::spawn(move || {
        bootstrap(
            &Tcp::default(),
            &env(rank, world_size, port),
            options,
            || unreachable!("only rank 0 makes the id"),
        )
    })
}

/// The message with the test's port replaced, for snapshots.
fn message(error: &BootstrapError, port: u16) -> String {
    error.to_string().replace(&port.to_string(), "PORT")
}

#[test]
fn every_rank_gets_the_same_id_over_loopback() {
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let zero =
        thread::spawn(move || serve(&tcp, listener, 4, patient(), || Ok(b"the-id".to_vec())));
    let others: Vec<_> = (1..4).map(|r| rank(r, 4, port, patient())).collect();
    assert_eq!(zero.join().unwrap(), Ok(b"the-id".to_vec()));
    for (r, other) in (1..).zip(others) {
        let world = World {
            rank: r,
            world_size: 4,
            local_rank: r,
            id: b"the-id".to_vec(),
        };
        assert_eq!(other.join().unwrap(), Ok(world));
    }
}

#[test]
fn a_world_of_one_needs_no_peer() {
    let world = bootstrap(&Tcp::default(), &env(0, 1, 0), patient(), || Ok(vec![9]));
    let alone = World {
        rank: 0,
        world_size: 1,
        local_rank: 0,
        id: vec![9],
    };
    assert_eq!(world, Ok(alone));
}

#[test]
fn a_dead_rank_zero_is_unreachable_with_the_systems_reason() {
    // A port nothing listens on (bound, then released).
    let port = Tcp::default().listen(0).expect("loopback listens").port();
    let short = RendezvousOptions {
        timeout: Duration::from_millis(100),
        ..patient()
    };
    let error = rank(1, 2, port, short).join().unwrap().unwrap_err();
    let BootstrapError::Unreachable { attempts, .. } = &error else {
        panic!("expected Unreachable, got {error:?}");
    };
    let text = message(&error, port).replace(&format!("{attempts} connection"), "N connection");
    insta::assert_snapshot!(text, @"rank 0 at 127.0.0.1:PORT is unreachable: N connection attempts in 100 ms failed, the last with: Connection refused (os error 111)");
}

#[test]
fn a_rank_zero_that_closes_after_accepting_is_reported() {
    let mut listener = Tcp::default().listen(0).expect("loopback listens");
    let port = listener.port();
    let one = rank(1, 2, port, patient());
    let link = listener.accept(Duration::from_secs(60)).unwrap();
    assert!(link.is_some(), "rank 1 connected");
    drop((link, listener));
    let error = one.join().unwrap().unwrap_err();
    let closed = BootstrapError::RankZeroClosed {
        addr: format!("127.0.0.1:{port}"),
        rank: 1,
    };
    assert_eq!(error, closed);
}

#[test]
fn rank_zero_reports_a_port_in_use() {
    let tcp = Tcp::default();
    let held = tcp.listen(0).expect("loopback listens");
    let port = held.port();
    let error = bootstrap(&tcp, &env(0, 2, port), patient(), || Ok(vec![])).unwrap_err();
    insta::assert_snapshot!(message(&error, port), @"rank 0 cannot listen on port PORT for the rendezvous: Address already in use (os error 98)");
}

#[test]
fn an_endless_timeout_is_no_overflow_on_the_hosts_clock() {
    let endless = RendezvousOptions {
        timeout: Duration::MAX,
        verdict_margin: Duration::MAX,
        ..patient()
    };
    let world = bootstrap(&Tcp::default(), &env(0, 1, 0), endless, || Ok(vec![3]));
    assert_eq!(world.map(|w| w.id), Ok(vec![3]));
    let tcp = Tcp::default();
    let listener = tcp.listen(0).expect("loopback listens");
    let port = listener.port();
    let zero = thread::spawn(move || serve(&tcp, listener, 2, patient(), || Ok(vec![3])));
    let one = thread::spawn(move || join(&Tcp::default(), &env(1, 2, port), endless));
    assert_eq!(zero.join().unwrap(), Ok(vec![3]));
    assert_eq!(one.join().unwrap(), Ok(vec![3]));
}
