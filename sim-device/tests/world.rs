//! Worlds of simulated processes: the real rendezvous over the in-memory network, each fault's
//! exact outcome on every rank, and the world's devices (named by rank, one hub) afterwards.

use std::time::Duration;

use lockstep::distributed::{BootstrapError, RendezvousOptions, World};
use lockstep::kernel::ElemType;
use lockstep::{
    Bytes, CollectiveError, ComputeClient, DeviceId, ReduceOperation, ServerError, ServerOptions,
    StreamId,
};
use lockstep_sim::{
    COLLECTIVE_TIMEOUT_NS, CONNECT_NS, Death, FaultKind, FaultPlan, Rendezvous, SIM_HOST,
    ScriptedFault, SimConfig, SimDevice, SimRank, SimWorld,
};

const PORT: u16 = 29500;
const TIMEOUT_MS: u64 = 2_000;
const RETRY_MS: u64 = 10;
const MS: u64 = 1_000_000;

fn options() -> RendezvousOptions {
    RendezvousOptions {
        timeout: Duration::from_millis(TIMEOUT_MS),
        retry_interval: Duration::from_millis(RETRY_MS),
        join_frame_timeout: Duration::from_millis(500),
        verdict_margin: Duration::from_millis(200),
    }
}

fn rank(rank: u32, world_size: u32, start_ns: u64) -> SimRank {
    SimRank::healthy(rank, world_size, PORT, start_ns)
}

/// Ranks `0..world_size`, rank `r` starting at `r` ms (rank 0 last would work too: the others
/// retry).
fn ranks(world_size: u32) -> Vec<SimRank> {
    (0..world_size)
        .map(|r| rank(r, world_size, u64::from(r) * MS))
        .collect()
}

fn failed(error: &BootstrapError, count: usize) -> Vec<Rendezvous> {
    vec![Rendezvous::Failed(error.clone()); count]
}

fn joined(world_size: u32) -> Vec<Rendezvous> {
    (0..world_size)
        .map(|rank| {
            Rendezvous::Joined(World {
                rank,
                world_size,
                local_rank: rank,
                id: format!("sim-world of {world_size} ranks").into_bytes(),
            })
        })
        .collect()
}

fn sim(index: u32) -> DeviceId {
    DeviceId { type_id: 0, index }
}

/// Each joined process's client on its world device (`None` for the others, which leave).
fn open(
    world: &SimWorld,
    configs: impl Fn(u32) -> SimConfig,
) -> Vec<Option<ComputeClient<SimDevice>>> {
    world
        .rendezvous
        .iter()
        .map(|outcome| {
            let Rendezvous::Joined(place) = outcome else {
                return None;
            };
            let devices = world.devices_for(place).expect("rank 0 made this world");
            let device = devices.device(place.rank, configs(place.rank))?;
            let mut client = ComputeClient::inline(device, ServerOptions::default());
            client.set_stream(StreamId(0));
            Some(client)
        })
        .collect()
}

#[test]
fn every_rank_joins_and_the_world_computes_across_processes() {
    let world = SimWorld::rendezvous(&ranks(4), options());
    assert_eq!(world.rendezvous, joined(4));
    let clients: Vec<_> = open(&world, |r| SimConfig::new(u64::from(r)))
        .into_iter()
        .flatten()
        .collect();
    let ids: Vec<DeviceId> = (0..4).map(sim).collect();
    for (r, c) in (0..).zip(&clients) {
        assert_eq!(c.peer_id(), sim(r));
        assert_eq!(c.enumerate_all_devices(), ids);
    }
    // Every rank enqueues its part, then each waits (one thread drives every process: a wait
    // before a peer's part is enqueued would block).
    let outputs: Vec<_> = (0..4u32)
        .zip(&clients)
        .map(|(r, c)| {
            let src = c.create(Bytes::from_elems(&[r as f32 + 0.5, 1e8])).unwrap();
            let dst = c.empty(8).unwrap();
            c.all_reduce(
                src,
                dst.clone(),
                ElemType::F32,
                ids.clone(),
                ReduceOperation::Sum,
            )
            .unwrap();
            dst
        })
        .collect();
    for (c, dst) in clients.iter().zip(outputs) {
        assert_eq!(c.read_one(dst).unwrap().to_elems::<f32>(), vec![8.0, 4e8]);
    }
    // A ring: each rank sends to the next and receives from the previous.
    let received: Vec<_> = (0..4u32)
        .zip(&clients)
        .map(|(r, c)| {
            let src = c.create(Bytes::from_elems(&[r + 10])).unwrap();
            c.send_to(src, sim((r + 1) % 4)).unwrap();
            c.receive_from(sim((r + 3) % 4), 4).unwrap()
        })
        .collect();
    for (r, (c, received)) in (0..4u32).zip(clients.iter().zip(received)) {
        let from = (r + 3) % 4 + 10;
        assert_eq!(c.read_one(received).unwrap().to_elems::<u32>(), vec![from]);
    }
    // The one communicator is the world's.
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1u32])).unwrap();
    c.all_reduce(
        h.clone(),
        h,
        ElemType::U32,
        vec![sim(0), sim(1)],
        ReduceOperation::Sum,
    )
    .unwrap();
    insta::assert_snapshot!(c.sync().unwrap_err(), @"invalid device list [0:0, 0:1]: across processes the one communicator is the world's, ranks 0 to 3 in order (on stream-0)");
}

#[test]
fn the_same_world_gives_the_same_events_and_start_times_change_them() {
    let first = SimWorld::rendezvous(&ranks(3), options());
    for _ in 0..10 {
        let again = SimWorld::rendezvous(&ranks(3), options());
        assert_eq!(again.events, first.events);
        assert_eq!(again.trace_hash, first.trace_hash);
    }
    // Rank 0 starts last: the others retry until it listens; everyone still joins.
    let mut late_zero = ranks(3);
    late_zero[0].start_ns = 25 * MS;
    let other = SimWorld::rendezvous(&late_zero, options());
    assert_eq!(other.rendezvous, joined(3));
    assert_ne!(other.trace_hash, first.trace_hash);
    let refused = other
        .events
        .iter()
        .filter(|e| e.what.ends_with("refused"))
        .count();
    // Rank 1 tries at 1, 11.1 and 21.2 ms, rank 2 at 2, 12.1 and 22.2 ms: 6 refusals.
    assert_eq!(refused, 6);
}

#[test]
fn a_rank_that_never_joins_times_out_on_every_rank() {
    let mut processes = ranks(4);
    processes.remove(2);
    let world = SimWorld::rendezvous(&processes, options());
    let expected = BootstrapError::RankTimeout {
        world_size: 4,
        missing: vec![2],
        timeout_ms: TIMEOUT_MS,
    };
    assert_eq!(world.rendezvous, failed(&expected, 3));
    assert!(world.devices().is_none());
}

#[test]
fn without_rank_zero_every_rank_is_unreachable() {
    let world = SimWorld::rendezvous(&ranks(3)[1..], options());
    // Each attempt: a refused round trip, then a pause, until the next would end past the
    // timeout.
    let attempts = (TIMEOUT_MS * MS).div_ceil(CONNECT_NS + RETRY_MS * MS) as u32;
    assert_eq!(attempts, 199);
    let expected = BootstrapError::Unreachable {
        addr: format!("{SIM_HOST}:{PORT}"),
        attempts,
        timeout_ms: TIMEOUT_MS,
        reason: "connection refused".to_owned(),
    };
    assert_eq!(world.rendezvous, failed(&expected, 2));
}

#[test]
fn a_mismatched_world_size_and_a_duplicate_rank_abort_every_rank() {
    // Rank 2 comes last with another WORLD_SIZE.
    let mut processes = ranks(3);
    processes[2] = rank(2, 4, 500 * MS);
    let world = SimWorld::rendezvous(&processes, options());
    let expected = BootstrapError::WorldSizeMismatch {
        rank: 2,
        expected: 3,
        actual: 4,
    };
    assert_eq!(world.rendezvous, failed(&expected, 3));
    // Two processes say RANK=1 (and none RANK=2); the second comes last.
    let mut processes = ranks(3);
    processes[2] = rank(1, 3, 500 * MS);
    let world = SimWorld::rendezvous(&processes, options());
    assert_eq!(
        world.rendezvous,
        failed(&BootstrapError::DuplicateRank { rank: 1 }, 3)
    );
}

#[test]
fn rank_zero_dying_or_failing_to_make_the_id_reaches_every_rank() {
    let mut processes = ranks(3);
    processes[0].death = Some(Death::AtSend(1));
    let world = SimWorld::rendezvous(&processes, options());
    let closed = |rank| {
        Rendezvous::Failed(BootstrapError::RankZeroClosed {
            addr: format!("{SIM_HOST}:{PORT}"),
            rank,
        })
    };
    assert_eq!(
        world.rendezvous,
        vec![Rendezvous::Died, closed(1), closed(2)]
    );

    let mut processes = ranks(3);
    processes[0].id_failure = Some("no ids today".to_owned());
    let world = SimWorld::rendezvous(&processes, options());
    let id = BootstrapError::Id {
        reason: "no ids today".to_owned(),
    };
    let aborted = BootstrapError::Aborted {
        reason: id.to_string(),
    };
    assert_eq!(
        world.rendezvous,
        vec![
            Rendezvous::Failed(id),
            Rendezvous::Failed(aborted.clone()),
            Rendezvous::Failed(aborted)
        ]
    );
}

/// All-reduces `[rank + 1]` on every live client; returns each one's `sync`.
fn all_reduce_round(
    clients: &[Option<ComputeClient<SimDevice>>],
    world_size: u32,
) -> Vec<Option<Result<u32, ServerError>>> {
    let ids: Vec<DeviceId> = (0..world_size).map(sim).collect();
    let dsts: Vec<_> = (0..)
        .zip(clients)
        .map(|(r, c)| {
            let c = c.as_ref()?;
            let src = c.create(Bytes::from_elems(&[r + 1u32])).ok()?;
            let dst = c.empty(4).ok()?;
            c.all_reduce(
                src,
                dst.clone(),
                ElemType::U32,
                ids.clone(),
                ReduceOperation::Sum,
            )
            .ok()?;
            Some(dst)
        })
        .collect();
    clients
        .iter()
        .zip(dsts)
        .map(|(c, dst)| {
            let c = c.as_ref()?;
            Some(c.sync().and_then(|()| {
                let dst = dst.expect("enqueued");
                Ok(c.read_one(dst)?.to_elems::<u32>()[0])
            }))
        })
        .collect()
}

fn peer_timeout(world_size: u32, sequence: u64, peer: u32) -> ServerError {
    ServerError::Collective {
        stream: StreamId(0),
        error: CollectiveError::PeerTimeout {
            devices: (0..world_size).map(sim).collect(),
            sequence,
            peer: sim(peer),
            timeout_ns: COLLECTIVE_TIMEOUT_NS,
        },
    }
}

#[test]
fn a_rank_that_dies_after_joining_times_out_its_peers_collectives() {
    let mut processes = ranks(3);
    processes[1].death = Some(Death::AfterSend(1));
    let world = SimWorld::rendezvous(&processes, options());
    let mut expected = joined(3);
    expected[1] = Rendezvous::Died;
    assert_eq!(world.rendezvous, expected);
    // The dead process never opens its device: it leaves the world's hub.
    world.devices().expect("rank 0 made the world").leave(1);
    let clients = open(&world, |r| SimConfig::new(u64::from(r)));
    assert!(clients[1].is_none());
    let timed_out = Some(Err(peer_timeout(3, 0, 1)));
    assert_eq!(
        all_reduce_round(&clients, 3),
        vec![timed_out.clone(), None, timed_out]
    );
}

#[test]
fn a_rank_that_dies_or_loses_its_device_later_times_out_its_peers_collectives() {
    let world = SimWorld::rendezvous(&ranks(3), options());
    let mut clients = open(&world, |r| SimConfig::new(u64::from(r)));
    assert_eq!(all_reduce_round(&clients, 3), vec![Some(Ok(6)); 3]);
    // Rank 2's process ends: its device drops and leaves the hub.
    clients[2] = None;
    let timed_out = Some(Err(peer_timeout(3, 1, 2)));
    assert_eq!(
        all_reduce_round(&clients, 3),
        vec![timed_out.clone(), timed_out, None]
    );

    // Rank 1's device is lost at its second round's first operation (its own stream's).
    let world = SimWorld::rendezvous(&ranks(3), options());
    let second_round = StreamId(1);
    let loss = ScriptedFault::at(FaultKind::DeviceLoss, 1)
        .on_stream(second_round)
        .unwrap();
    let configs = |rank| {
        let config = SimConfig::new(u64::from(rank));
        if rank == 1 {
            config.with_faults(FaultPlan::scripted([loss]))
        } else {
            config
        }
    };
    let mut clients = open(&world, configs);
    assert_eq!(all_reduce_round(&clients, 3), vec![Some(Ok(6)); 3]);
    for c in clients.iter_mut().flatten() {
        c.set_stream(second_round);
    }
    let outcomes = all_reduce_round(&clients, 3);
    let timed_out = |peer| {
        Some(Err(ServerError::Collective {
            stream: second_round,
            error: CollectiveError::PeerTimeout {
                devices: (0..3).map(sim).collect(),
                sequence: 1,
                peer: sim(peer),
                timeout_ns: COLLECTIVE_TIMEOUT_NS,
            },
        }))
    };
    assert_eq!(outcomes[0], timed_out(1));
    assert_eq!(outcomes[2], timed_out(1));
    let lost = ServerError::DeviceLost {
        reason: "injected device loss before `write` on stream-1 [injected fault #0] (seed 1)"
            .to_owned(),
    };
    assert_eq!(outcomes[1], Some(Err(lost)));
}
