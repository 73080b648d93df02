//! Whole worlds over the fake network (`fake.rs`), one process at a time.
//!
//! A process's run depends only on what reaches it, and what reaches it at a moment depends
//! only on what the others did before that moment; so the world runs in three passes that
//! tell one history. First every rank but 0 meets a rank 0 that listens from its start and
//! never answers: that fixes when the rank connects and the join it sends. Then rank 0 runs
//! with those connections (and any strangers') arriving when they were made. Last every rank
//! but 0 runs again against the rank 0 that was: listening only until it finished, sending
//! what it sent, when it sent it, and closing when it closed. The last pass checks that each
//! rank connected when it first did, or never if rank 0 was gone by then.

use std::rc::Rc;
use std::time::Duration;

use super::super::{BootstrapError, RendezvousOptions, WorldEnv, bootstrap};
use super::fake::{Accept, Arrival, Clock, EndLog, FakeLink, FakeNet, PORT, Sent};

/// One process of a world.
#[derive(Clone, Copy, Debug)]
pub struct Process {
    pub rank: u32,
    pub world_size: u32,
    /// When it starts, from the world's origin.
    pub starts_at: Duration,
    pub options: RendezvousOptions,
}

/// How a process's rendezvous ended.
#[derive(Debug)]
pub struct Ended {
    /// The id it has, or its failure.
    pub outcome: Result<Vec<u8>, BootstrapError>,
    /// When it returned.
    pub at: Duration,
    /// When it connected to rank 0 (`None` for rank 0, and for a rank that never did).
    pub connected_at: Option<Duration>,
}

/// A connection to rank 0 that is no rank: when it comes and what it sends.
pub struct Stranger {
    pub at: Duration,
    pub arrivals: Vec<Arrival>,
}

/// What a world did.
#[derive(Debug)]
pub struct WorldRun {
    pub zero: Ended,
    /// The other ranks, in the order given.
    pub others: Vec<Ended>,
    /// What rank 0 did on each stranger's connection, in the order given.
    pub strangers: Vec<Rc<EndLog>>,
}

fn env(process: &Process) -> WorldEnv {
    WorldEnv {
        rank: process.rank,
        world_size: process.world_size,
        local_rank: process.rank,
        master_addr: "rank-zero".to_owned(),
        master_port: PORT,
    }
}

fn no_id() -> Result<Vec<u8>, String> {
    unreachable!("only rank 0 makes the id")
}

/// Runs rank 0 (`zero`, whose id `make_id` makes, moving rank 0's clock as long as it takes),
/// the `others` and the `strangers`.
pub fn run_world(
    zero: Process,
    others: &[Process],
    strangers: Vec<Stranger>,
    make_id: impl FnOnce(&Clock) -> Result<Vec<u8>, String>,
) -> WorldRun {
    let contacts: Vec<_> = others
        .iter()
        .map(|p| first_contact(p, zero.starts_at))
        .collect();
    let zero_run = run_rank_zero(&zero, others, &contacts, strangers, make_id);
    let zero_ended = zero_run.ended;
    let others = others
        .iter()
        .zip(&contacts)
        .zip(zero_run.wires)
        .map(|((process, contact), wire)| {
            let ended = run_again(process, (zero.starts_at, zero_ended.at), wire);
            let first = contact.as_ref().map(|(at, _)| *at);
            assert_eq!(
                ended.connected_at,
                first.filter(|&at| at <= zero_ended.at),
                "rank {}: the passes tell one history",
                process.rank
            );
            ended
        })
        .collect();
    WorldRun {
        zero: zero_ended,
        others,
        strangers: zero_run.strangers,
    }
}

/// When `process` connects to a rank 0 that listens from `listens_from` on, and what it sends.
fn first_contact(process: &Process, listens_from: Duration) -> Option<(Duration, Vec<Sent>)> {
    let clock = Clock::at(process.starts_at);
    let (link, log) = FakeLink::new(&clock, "rank 0", vec![]);
    let net = FakeNet::joining(&clock, Some((listens_from, Duration::MAX)), link);
    let _ = bootstrap(&net, &env(process), process.options, no_id);
    let connected_at = net.connected_at()?;
    let sent = log.sent.borrow().clone();
    Some((connected_at, sent))
}

/// How rank 0 ended, and its end of each connection.
struct RankZeroRun {
    ended: Ended,
    /// Per other rank, in order (`None` for a rank that never connected).
    wires: Vec<Option<Rc<EndLog>>>,
    /// Per stranger, in order.
    strangers: Vec<Rc<EndLog>>,
}

/// Rank 0 over the connections of `contacts` and `strangers`.
fn run_rank_zero(
    zero: &Process,
    others: &[Process],
    contacts: &[Option<(Duration, Vec<Sent>)>],
    strangers: Vec<Stranger>,
    make_id: impl FnOnce(&Clock) -> Result<Vec<u8>, String>,
) -> RankZeroRun {
    let clock = Clock::at(zero.starts_at);
    let mut arriving = Vec::new();
    let mut wires = Vec::new();
    for (process, contact) in others.iter().zip(contacts) {
        wires.push(contact.as_ref().map(|(at, sent)| {
            let arrivals = sent
                .iter()
                .map(|s| Arrival::frame(s.at, &s.frame))
                .collect();
            let peer = format!("rank {}", process.rank);
            let (link, log) = FakeLink::new(&clock, &peer, arrivals);
            arriving.push((*at, link));
            log
        }));
    }
    let mut stranger_logs = Vec::new();
    for (index, stranger) in strangers.into_iter().enumerate() {
        let peer = format!("stranger {index}");
        let (link, log) = FakeLink::new(&clock, &peer, stranger.arrivals);
        arriving.push((stranger.at, link));
        stranger_logs.push(log);
    }
    // By time; among equals, in the order given (a stable sort).
    arriving.sort_by_key(|(at, _)| *at);
    let script = arriving
        .into_iter()
        .map(|(at, link)| Accept::Connection { at, link })
        .collect();
    let net = FakeNet::serving(&clock, script);
    let outcome = bootstrap(&net, &env(zero), zero.options, || make_id(&clock)).map(|w| w.id);
    let ended = Ended {
        outcome,
        at: clock.now(),
        connected_at: None,
    };
    RankZeroRun {
        ended,
        wires,
        strangers: stranger_logs,
    }
}

/// `process` against the rank 0 that was: listening during `listening`, and on `wire` (its
/// end of this rank's connection) sending what it sent and closing when it closed.
fn run_again(
    process: &Process,
    listening: (Duration, Duration),
    wire: Option<Rc<EndLog>>,
) -> Ended {
    let clock = Clock::at(process.starts_at);
    let arrivals = wire.map_or_else(Vec::new, |log| {
        let sent = log.sent.borrow();
        let frames = sent.iter().map(|s| Arrival::frame(s.at, &s.frame));
        let closed_at = log.closed_at.get().expect("rank 0 closed every connection");
        frames.chain([Arrival::Close { at: closed_at }]).collect()
    });
    let (link, _) = FakeLink::new(&clock, "rank 0", arrivals);
    let net = FakeNet::joining(&clock, Some(listening), link);
    let outcome = bootstrap(&net, &env(process), process.options, no_id).map(|w| w.id);
    Ended {
        outcome,
        at: clock.now(),
        connected_at: net.connected_at(),
    }
}
