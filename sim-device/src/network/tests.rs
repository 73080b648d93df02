//! The network's turns and virtual time, with plain programs (the rendezvous's own tests are in
//! `tests/world.rs`).

use std::time::Duration;

use lockstep::distributed::{Link, Listener, Received, Transport};

use super::*;

fn process<'a, T>(
    name: &str,
    start_ns: u64,
    program: impl FnOnce(&SimTransport) -> T + Send + 'a,
) -> SimProcess<'a, T> {
    SimProcess {
        name: name.to_owned(),
        start_ns,
        death: None,
        program: Box::new(program),
    }
}

const MS: Duration = Duration::from_millis(1);

/// A server that answers each of `clients` frames with the frame reversed, and clients that
/// start at `starts_ns` (retrying until the server listens) and return the answer and the
/// virtual time they got it.
fn echo(server_start_ns: u64, starts_ns: &[u64]) -> NetworkRun<String> {
    let clients = starts_ns.len();
    let mut processes = vec![process(
        "server",
        server_start_ns,
        move |net: &SimTransport| {
            let mut listener = net.listen(7).unwrap();
            let mut links = Vec::new();
            for _ in 0..clients {
                let mut link = listener.accept(100 * MS).unwrap().expect("a client comes");
                let Ok(Received::Frame(mut frame)) = link.recv(100 * MS) else {
                    panic!("a client sends");
                };
                frame.reverse();
                link.send(&frame).unwrap();
                links.push(link);
            }
            format!("served {clients} at {:?}", net.now())
        },
    )];
    for (i, &start_ns) in starts_ns.iter().enumerate() {
        processes.push(process(&format!("client {i}"), start_ns, move |net| {
            let mut link = loop {
                match net.connect(SIM_HOST, 7, MS) {
                    Ok(link) => break link,
                    Err(_) => net.pause(MS),
                }
            };
            link.send(format!("hello {i}").as_bytes()).unwrap();
            let reply = link.recv(100 * MS).unwrap();
            format!("{reply:?} at {:?}", net.now())
        }));
    }
    SimNetwork::run(processes)
}

#[test]
fn the_same_processes_give_the_same_events() {
    let first = echo(3_000_000, &[0, 1_000_000, 1_000_000]);
    // The threads' OS scheduling differs from run to run; the events do not.
    for _ in 0..20 {
        assert_eq!(echo(3_000_000, &[0, 1_000_000, 1_000_000]), first);
    }
    let other = echo(3_000_000, &[1_000_000, 0, 1_000_000]);
    assert_ne!(first.trace_hash, other.trace_hash);
    // Client 0 tries at 0, 1.1 and 2.2 ms (a refusal's round trip, then a pause of 1 ms) and
    // connects at 3.4 ms; clients 1 and 2 try at 1 and 2.1 ms and connect at 3.3 ms, client 1
    // first (the lower index). A frame takes 0.05 ms each way.
    let mut expected = vec![ProcessEnd::Returned("served 3 at 3.45ms".to_owned())];
    for (i, at) in [(0, "3.5ms"), (1, "3.4ms"), (2, "3.4ms")] {
        let reply = format!("hello {i}").chars().rev().collect::<String>();
        let bytes = format!("{:?}", Received::Frame(reply.into_bytes()));
        expected.push(ProcessEnd::Returned(format!("{bytes} at {at}")));
    }
    assert_eq!(first.ends, expected);
}

#[test]
fn time_advances_only_when_no_process_can_run() {
    let run = SimNetwork::run(vec![
        process("a", 5, |net: &SimTransport| {
            net.pause(10 * MS);
            net.now()
        }),
        process("b", 0, |net: &SimTransport| {
            let first = net.now();
            net.pause(2 * MS);
            (first, net.now()).1
        }),
    ]);
    assert_eq!(
        run.ends,
        vec![
            ProcessEnd::Returned(Duration::from_nanos(10_000_005)),
            ProcessEnd::Returned(2 * MS)
        ]
    );
    let order: Vec<(u64, usize, &str)> = run
        .events
        .iter()
        .map(|e| (e.at_ns, e.process, e.what.as_str()))
        .collect();
    assert_eq!(
        order,
        vec![
            (0, 1, "starts"),
            (5, 0, "starts"),
            (2_000_000, 1, "paused 2000000 ns"),
            (2_000_000, 1, "returns"),
            (10_000_005, 0, "paused 10000000 ns"),
            (10_000_005, 0, "returns"),
        ]
    );
}

#[test]
fn a_refused_connection_takes_a_round_trip_and_waits_time_out() {
    let run = SimNetwork::run(vec![process("alone", 0, |net: &SimTransport| {
        let refused = net.connect(SIM_HOST, 9, MS).unwrap_err();
        let at = net.now();
        let mut listener = net.listen(9).unwrap();
        let none = listener.accept(3 * MS).unwrap();
        (refused.to_string(), at, none.is_none(), net.now())
    })]);
    assert_eq!(
        run.ends,
        vec![ProcessEnd::Returned((
            "connection refused".to_owned(),
            Duration::from_nanos(CONNECT_NS),
            true,
            Duration::from_nanos(CONNECT_NS) + 3 * MS
        ))]
    );
}

#[test]
fn a_dead_process_closes_its_connections() {
    let mut dying = process("dying", 0, |net: &SimTransport| {
        let mut link = net.connect(SIM_HOST, 1, MS).unwrap();
        link.send(b"last words").unwrap();
        unreachable!("dies after its first send");
    });
    dying.death = Some(Death::AfterSend(1));
    let server = process("server", 0, |net: &SimTransport| {
        let mut listener = net.listen(1).unwrap();
        let mut link = listener.accept(MS).unwrap().unwrap();
        let first = link.recv(MS).unwrap();
        let second = link.recv(MS).unwrap();
        link.send(b"too late").unwrap();
        (first, second)
    });
    let run = SimNetwork::run(vec![server, dying]);
    assert_eq!(
        run.ends,
        vec![
            ProcessEnd::Returned((Received::Frame(b"last words".to_vec()), Received::Closed)),
            ProcessEnd::Died
        ]
    );
    let lost = run.events.iter().find(|e| e.what.ends_with(": lost"));
    assert_eq!(
        lost.map(|e| e.what.as_str()),
        Some("send 8 bytes to dying: lost")
    );
}

#[test]
fn a_process_that_dies_at_a_send_loses_it() {
    let mut dying = process("dying", 0, |net: &SimTransport| {
        let mut link = net.connect(SIM_HOST, 1, MS).unwrap();
        link.send(b"never sent").unwrap();
        unreachable!("dies at its first send");
    });
    dying.death = Some(Death::AtSend(1));
    let server = process("server", 0, |net: &SimTransport| {
        let mut listener = net.listen(1).unwrap();
        let mut link = listener.accept(MS).unwrap().unwrap();
        link.recv(MS).unwrap()
    });
    let run = SimNetwork::run(vec![server, dying]);
    assert_eq!(
        run.ends,
        vec![ProcessEnd::Returned(Received::Closed), ProcessEnd::Died]
    );
}
