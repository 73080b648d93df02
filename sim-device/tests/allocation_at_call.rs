//! Allocations served at the call (the runtime's `server/books.rs`): a request the stream's
//! pools can serve from a page they hold is taken by the calling thread, and the actor is told
//! later; one that needs a page, or the device's answer, goes to the actor. Which path serves a
//! call, and which slice it gets, depends on the program only: a threaded client and an inline
//! one, and two runs of one program, allocate alike.

use lockstep::{
    AllocationPaths, Bytes, ComputeClient, CubeCount, KernelArguments, MemoryAllocationMode,
    ServerError, ServerOptions,
};
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault, SimConfig, SimDevice, SimProbe};

mod common;
use common::{add_one, pinned};

fn paths(at_call: u64, by_actor: u64) -> AllocationPaths {
    AllocationPaths { at_call, by_actor }
}

#[test]
fn a_stream_s_first_allocation_is_the_actor_s_and_later_ones_are_served_at_the_call() {
    let c = pinned(&ComputeClient::new(SimDevice::new(SimConfig::new(1))), 0);
    let a = c.empty(1024).unwrap();
    assert_eq!(c.allocation_paths(), paths(0, 1));
    // The page the first allocation added has room for more.
    let b = c.create(Bytes::from_elems(&[7u32; 4])).unwrap();
    assert_eq!(c.allocation_paths(), paths(1, 1));
    // A released slice is taken again at the call once the actor has run the release.
    drop(a);
    let again = c.empty(1 << 20).unwrap();
    drop(again);
    let reused = c.empty(1 << 20).unwrap();
    assert_eq!(c.allocation_paths(), paths(2, 2));
    // Every allocation served at the call was registered in stream order: reads see the data.
    assert_eq!(c.read_one(b).unwrap().to_elems::<u32>(), vec![7; 4]);
    drop(reused);
    let usage = c.memory_usage().unwrap();
    assert_eq!(
        usage.allocations, 0,
        "every release was returned: {usage:?}"
    );
}

#[test]
fn another_stream_s_first_allocation_goes_to_the_actor() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    let (s0, s1) = (pinned(&c, 0), pinned(&c, 1));
    let _a = s0.empty(64).unwrap();
    let _b = s0.empty(64).unwrap();
    let _c = s1.empty(64).unwrap();
    assert_eq!(c.allocation_paths(), paths(1, 2));
}

/// The program of the determinism tests: allocations on two streams, drops with and without
/// blocking calls between, a launch, a read, and the persistent mode; the paths and the
/// simulator's trace hash it ends with.
fn program(client: ComputeClient<SimDevice>, probe: &SimProbe) -> (AllocationPaths, u64) {
    let (s0, s1) = (pinned(&client, 0), pinned(&client, 1));
    let mut kept = Vec::new();
    for round in 0..6u32 {
        let a = s0.create(Bytes::from_elems(&[round; 16])).unwrap();
        let b = s1.empty(4096 << (round % 3)).unwrap();
        s1.write(&b, Bytes::from_elems(&[round; 4])).unwrap();
        s0.launch(
            &add_one(),
            CubeCount::Static(4, 1, 1),
            KernelArguments::new().binding(&a),
        )
        .unwrap();
        if round % 2 == 0 {
            assert_eq!(
                s0.read_one(a.clone()).unwrap().to_elems::<u32>(),
                vec![round + 1; 16]
            );
        }
        kept.push(b.clone());
        drop((a, b));
        if round == 3 {
            s0.allocation_mode(MemoryAllocationMode::Persistent);
            kept.push(s0.empty(256).unwrap());
            s0.allocation_mode(MemoryAllocationMode::Auto);
        }
        kept.truncate(2);
    }
    drop(kept);
    s0.sync().unwrap();
    s1.sync().unwrap();
    (client.allocation_paths(), probe.observations().trace_hash)
}

#[test]
fn threaded_and_inline_clients_allocate_alike_run_after_run() {
    let threaded = || {
        let device = SimDevice::new(SimConfig::new(9));
        let probe = device.probe();
        program(ComputeClient::new(device), &probe)
    };
    let inline = {
        let device = SimDevice::new(SimConfig::new(9));
        let probe = device.probe();
        program(
            ComputeClient::inline(device, ServerOptions::default()),
            &probe,
        )
    };
    let first = threaded();
    assert!(first.0.at_call > 0 && first.0.by_actor > 0, "{:?}", first.0);
    for _ in 0..20 {
        assert_eq!(threaded(), first);
    }
    assert_eq!(inline, first);
}

#[test]
fn an_injected_allocation_failure_is_out_of_memory_at_the_call_and_the_call_path_goes_on() {
    // The second device allocation fails, and so does its retry after the cleanup: the page a
    // new size class needs.
    let faults = FaultPlan::scripted([ScriptedFault::window(FaultKind::AllocationFailure, 2, 2)]);
    let c = pinned(
        &ComputeClient::new(SimDevice::new(SimConfig::new(1).with_faults(faults))),
        0,
    );
    let small = c.empty(64).unwrap();
    match c.empty(1 << 20) {
        Err(ServerError::OutOfMemory(oom)) => assert_eq!(oom.requested_bytes, 1 << 20),
        other => panic!("expected out of memory, got {:?}", other.map(drop)),
    }
    // The page the first allocation added still serves at the call.
    let next = c.empty(64).unwrap();
    assert_eq!(c.allocation_paths(), paths(1, 2));
    drop((small, next));
    assert_eq!(c.memory_usage().unwrap().allocations, 0);
}

#[test]
fn once_a_call_returned_device_lost_allocations_fail_at_the_call() {
    // The first operation the device executes (the create's write) loses it.
    let faults = FaultPlan::scripted([ScriptedFault::at(FaultKind::DeviceLoss, 1)]);
    let c = pinned(
        &ComputeClient::new(SimDevice::new(SimConfig::new(1).with_faults(faults))),
        0,
    );
    let _h = c.create(Bytes::from_elems(&[1u32; 4])).unwrap();
    assert!(matches!(c.sync(), Err(ServerError::DeviceLost { .. })));
    for _ in 0..3 {
        let again = c.empty(64).map(drop);
        assert!(
            matches!(again, Err(ServerError::DeviceLost { .. })),
            "{again:?}"
        );
    }
}

/// An `empty` handle served at the call reaches the actor at its first use, from whichever
/// stream uses it first; one dropped unused never does, and its memory is back at the next
/// blocking call.
#[test]
fn an_empty_handle_is_registered_at_its_first_use_and_an_unused_one_returns_at_once() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(3)));
    let (s0, s1) = (pinned(&c, 0), pinned(&c, 1));
    let _first = s0.empty(64).unwrap();
    let unused = s0.empty(256).unwrap();
    let used = s0.empty(16).unwrap();
    assert_eq!(c.allocation_paths(), paths(2, 1));
    drop(unused);
    assert_eq!(
        s0.memory_usage().unwrap().allocations,
        2,
        "the unused slice is back"
    );
    // Another stream's write is the first use: the registration is queued before it, and the
    // stream that allocated orders after it like after any other stream's write.
    s1.write(&used, Bytes::from_elems(&[4u32; 4])).unwrap();
    assert_eq!(s0.read_one(used).unwrap().to_elems::<u32>(), vec![4; 4]);
    assert_eq!(s0.memory_usage().unwrap().allocations, 1);
}
