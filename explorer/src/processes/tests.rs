//! Worlds of processes: the draw, and every class of outcome checked against the model.

use super::*;
use crate::Simulator;

fn world(world_size: u32, rounds: u32, fault: Option<ProcessFault>) -> ProcessWorld {
    ProcessWorld {
        seed: 5,
        world_size,
        starts_ns: (0..u64::from(world_size)).map(|r| r * 3 * MS).collect(),
        rounds,
        elem: ElemType::F32,
        op: ReduceOperation::Sum,
        elems: 3,
        fault,
    }
}

#[test]
fn a_seed_draws_its_world_of_processes_alone() {
    let drawn: Vec<_> = (0..400)
        .filter_map(|s| ProcessWorld::draw(s, true))
        .collect();
    assert_eq!(drawn.len(), 44);
    assert_eq!(
        ProcessWorld::draw(drawn[0].seed, true),
        Some(drawn[0].clone())
    );
    assert!(drawn.iter().all(|w| (2..=4).contains(&w.world_size)));
    let faulty = drawn.iter().filter(|w| w.fault.is_some()).count();
    assert_eq!(faulty, 30);
    let fault_free = (0..400).filter_map(|s| ProcessWorld::draw(s, false));
    assert!(fault_free.clone().all(|w| w.fault.is_none()));
    // The same seeds draw worlds with or without faults: only the fault differs.
    assert_eq!(fault_free.count(), drawn.len());
}

#[test]
fn every_class_of_outcome_is_drawn_within_a_thousand_seeds() {
    let mut unseen: Vec<&str> = ProcessFault::OUTCOMES.to_vec();
    let mut seeds = 0;
    while !unseen.is_empty() {
        if let Some(world) = ProcessWorld::draw(seeds, true) {
            unseen.retain(|outcome| *outcome != world.outcome());
        }
        seeds += 1;
    }
    // `lockstep explore --faults --coverage` needs about as many seeds to pass.
    assert_eq!(seeds, 512);
}

#[test]
fn every_class_of_outcome_matches_the_model() {
    use ProcessFault::*;
    let faults = [
        None,
        Some(NeverJoins { rank: 2 }),
        Some(NeverJoins { rank: 0 }),
        Some(DiesJoining { rank: 1 }),
        Some(RankZeroDies),
        Some(IdFails),
        Some(WorldSizeMismatch { rank: 2 }),
        Some(DuplicateRank {
            rank: 1,
            missing: 2,
        }),
        Some(Crashes { rank: 0, round: 1 }),
        Some(DeviceLost { rank: 2, round: 0 }),
    ];
    let mut outcomes = Vec::new();
    for fault in faults {
        let world = world(3, 2, fault);
        outcomes.push(world.outcome());
        if let Err(why) = check(&Simulator, &world) {
            panic!("{world}: {why}");
        }
    }
    assert_eq!(outcomes, ProcessFault::OUTCOMES);
}

#[test]
fn a_dead_rank_fails_its_peers_steps_exactly() {
    let world = world(3, 2, Some(ProcessFault::Crashes { rank: 1, round: 1 }));
    let lines = |rank: usize| -> String {
        let seen = &expected(&world)[rank];
        seen.iter().map(|s| format!("{s}\n")).collect()
    };
    insta::assert_snapshot!(lines(1), @r"
    rendezvous: rank 1 of 3
    round 0 all-reduce: exact
    round 0 ring: exact
    round 1: the process ended
    ");
    // Rank 2 receives from rank 1: both its steps of round 1 wait for it.
    insta::assert_snapshot!(lines(2), @r"
    rendezvous: rank 2 of 3
    round 0 all-reduce: exact
    round 0 ring: exact
    round 1 all-reduce: collective #1 on communicator [0:0, 0:1, 0:2] timed out after 1000000000 ns: device 0:1 never arrived (on stream-1)
    round 1 ring: collective #1 on communicator [0:0, 0:1, 0:2] timed out after 1000000000 ns: device 0:1 never arrived (on stream-1)
    ");
}

#[test]
fn a_world_that_strays_from_the_model_names_the_rank_and_the_step() {
    // Rank 1 ends before round 1, but the model is told nothing happened.
    let crashed = world(3, 2, Some(ProcessFault::Crashes { rank: 1, round: 1 }));
    let seen = run(&Simulator, &crashed).seen;
    let why = differs(&crashed, &seen, &expected(&world(3, 2, None)));
    insta::assert_snapshot!(why.unwrap(), @r#"rank 0 saw "round 1 all-reduce: collective #1 on communicator [0:0, 0:1, 0:2] timed out after 1000000000 ns: device 0:1 never arrived (on stream-1)" where the model expects "round 1 all-reduce: exact""#);
}
