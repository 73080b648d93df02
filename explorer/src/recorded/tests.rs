//! The happens-before a recording implies, the orders seeds draw within it, and what a seed's
//! checks make of a read, a fault and a difference: on recordings written here.

use std::collections::BTreeSet;

use lockstep::record::{Data, DeviceRecord, Event, Op, Outcome, Range, ReadData, chunk_hashes};
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault};

use super::faults::Fault;
use super::order::Plan;
use super::recording::{RecordedCall, Recording};
use super::run::run_in_order;
use crate::failure::Check;

/// A recording of one device and `calls`: (thread, op, outcome), each outcome right after its
/// call.
fn recording(calls: Vec<(u32, Op, Option<Outcome>)>) -> Recording {
    let device = DeviceRecord {
        device: 0,
        name: "sim".to_owned(),
        backend: 0,
        index: None,
    };
    let calls = (calls.into_iter().enumerate())
        .map(|(i, (thread, op, outcome))| RecordedCall {
            call: i as u64,
            device: 0,
            thread,
            stream: 100 + u64::from(thread),
            outcome_position: outcome.as_ref().map(|_| 2 * i + 1),
            at_ns: (
                1000 * i as u64,
                outcome.as_ref().map(|_| 1000 * i as u64 + 500),
            ),
            op,
            outcome,
            position: 2 * i,
        })
        .collect();
    Recording {
        declarations: vec![Event::Device(device)],
        calls,
        unread: None,
    }
}

fn create(buffer: u64, words: &[u32]) -> Op {
    Op::Create {
        buffer,
        bytes: 4 * words.len() as u64,
        data: Some(Data::Bytes(bytemuck::cast_slice(words).to_vec())),
    }
}

fn read(buffer: u64, words: &[u32]) -> (Op, Option<Outcome>) {
    let range = Range {
        buffer,
        offset: 0,
        len: 4 * words.len() as u64,
    };
    let bytes: &[u8] = bytemuck::cast_slice(words);
    let read = ReadData {
        hashes: chunk_hashes(bytes),
        bytes: Some(bytes.to_vec()),
    };
    (
        Op::Read {
            ranges: vec![range],
        },
        Some(Outcome::Read(vec![read])),
    )
}

/// The distinct orders seeds 0..64 draw.
fn orders(recording: &Recording) -> BTreeSet<Vec<usize>> {
    let plan = Plan::of(recording);
    (0..64).map(|seed| plan.order(seed)).collect()
}

#[test]
fn threads_with_nothing_between_them_are_drawn_in_every_interleaving() {
    let recording = recording(vec![
        (0, create(0, &[1]), None),
        (1, create(1, &[2]), None),
        (0, Op::Release { buffer: 0 }, None),
        (1, Op::Release { buffer: 1 }, None),
    ]);
    let orders = orders(&recording);
    // Two calls of each thread, each thread's in its order: four choose two.
    assert_eq!(orders.len(), 6);
    assert!(orders.iter().all(|o| {
        let at = |i| o.iter().position(|&c| c == i);
        at(0) < at(2) && at(1) < at(3)
    }));
}

#[test]
fn a_buffer_is_used_after_its_create_and_released_after_its_uses() {
    let (op, outcome) = read(0, &[1]);
    let recording = recording(vec![
        (0, create(0, &[1]), None),
        (1, op, outcome),
        (0, Op::Release { buffer: 0 }, None),
    ]);
    assert_eq!(orders(&recording), BTreeSet::from([vec![0, 1, 2]]));
}

#[test]
fn a_waiting_call_that_returned_orders_the_later_calls_of_other_threads() {
    let calls = |sync_outcome| {
        recording(vec![
            (0, create(0, &[1]), None),
            (0, create(1, &[2]), None),
            (0, Op::Sync, sync_outcome),
            (1, create(2, &[3]), None),
        ])
    };
    assert_eq!(orders(&calls(Some(Outcome::Ok))).len(), 1);
    // A sync that never returned publishes nothing: thread 1 may go before any of it.
    assert_eq!(orders(&calls(None)).len(), 4);
}

#[test]
fn a_read_is_compared_with_the_recorded_run_and_a_difference_named() {
    let (op, outcome) = read(0, &[7, 8]);
    let same = recording(vec![
        (0, create(0, &[7, 8]), None),
        (0, op.clone(), outcome),
    ]);
    let run = run_in_order(&same, &[0, 1], 3, None).expect("runs");
    assert_eq!(
        (run.calls_run, run.results_compared, run.failure),
        (2, 1, None)
    );
    let (_, other) = read(0, &[7, 9]);
    let differs = recording(vec![(0, create(0, &[7, 8]), None), (0, op, other)]);
    let run = run_in_order(&differs, &[0, 1], 3, None).expect("runs");
    let failure = run.failure.expect("the read differs");
    assert_eq!(failure.class.check, Check::DiffersFromRecording);
    assert_eq!(failure.class.kind.as_deref(), Some("read"));
    assert_eq!(failure.call.map(|at| at.call), Some(1));
}

#[test]
fn an_injected_fault_comes_back_as_an_error_and_later_reads_are_not_compared() {
    let (op, outcome) = read(0, &[7, 8]);
    let recording = recording(vec![(0, create(0, &[7, 8]), None), (0, op, outcome)]);
    // The create's transfer fails: the read returns the fault, which is no difference.
    let fault = Fault {
        device: 0,
        plan: FaultPlan::scripted([ScriptedFault::at(FaultKind::TransferFailure, 1)]),
    };
    let run = run_in_order(&recording, &[0, 1], 3, Some(&fault)).expect("runs");
    assert_eq!(run.faults_injected, 1);
    assert_eq!((run.results_compared, run.failure), (0, None));
}

#[test]
fn a_recording_cut_short_keeps_the_calls_before_the_cut() {
    let (op, outcome) = read(0, &[7, 8]);
    let whole = recording(vec![(0, create(0, &[7, 8]), None), (0, op, outcome)]);
    let mut bytes = Vec::new();
    whole.write_to(&mut bytes).expect("writes to memory");
    let mut again = Vec::new();
    (Recording::read(&bytes[..]).write_to(&mut again)).expect("writes to memory");
    assert_eq!(again, bytes);
    // Two bytes short: the read's outcome is cut, and with it only the outcome.
    let cut = Recording::read(&bytes[..bytes.len() - 2]);
    assert_eq!(cut.calls.len(), 2);
    assert_eq!(cut.calls[1].outcome, None);
    assert!(cut.unread.expect("cut short").contains("truncated"));
}

#[test]
fn a_fault_returned_by_a_read_the_replay_cannot_compare_still_surfaced() {
    let (op, outcome) = read(0, &[7, 8]);
    let range = Range {
        buffer: 0,
        offset: 0,
        len: 8,
    };
    let empty = Op::Create {
        buffer: 0,
        bytes: 8,
        data: None,
    };
    // A collective (recorded by name only) wrote the buffer: the read is not compared.
    let by_name = Op::Other {
        name: "all_reduce".to_owned(),
        writes: vec![range],
    };
    let recording = recording(vec![(0, empty, None), (0, by_name, None), (0, op, outcome)]);
    let fault = Fault {
        device: 0,
        plan: FaultPlan::scripted([ScriptedFault::at(FaultKind::TransferFailure, 1)]),
    };
    let run = run_in_order(&recording, &[0, 1, 2], 3, Some(&fault)).expect("runs");
    assert_eq!((run.faults_injected, run.failure), (1, None));
}
