//! Refusals that must change nothing, and graph captures that other streams work beside: the
//! programs of issue 12, each with what a user expects of it.

use lockstep::{
    Bytes, CaptureError, ComputeClient, CubeCount, DeviceError, Handle, KernelArguments,
    MemoryLayoutDescriptor, MemoryLayoutStrategy, PoolKind, ServerError, StreamId,
};
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault, SimConfig, SimDevice, SimProbe};

mod common;
use common::{add_one, pinned};

fn client(config: SimConfig) -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(config);
    let probe = device.probe();
    (ComputeClient::new(device), probe)
}

/// Adds one to each of the four `u32`s of `handle`.
fn launch_add_one(client: &ComputeClient<SimDevice>, handle: &Handle) {
    client
        .launch(
            &add_one(),
            CubeCount::Static(1, 1, 1),
            KernelArguments::new().binding(handle),
        )
        .unwrap();
}

fn read_u32s(client: &ComputeClient<SimDevice>, handle: &Handle) -> Vec<u32> {
    client.read_one(handle.clone()).unwrap().to_elems::<u32>()
}

fn assert_out_of_memory(result: Result<impl std::fmt::Debug, ServerError>, requested: u64) {
    match result {
        Err(ServerError::OutOfMemory(oom)) => assert_eq!(oom.requested_bytes, requested),
        other => panic!("a request of {requested} bytes: expected out of memory, got {other:?}"),
    }
}

fn assert_sanitizer_quiet(probe: &SimProbe) {
    let reports = probe.observations().reports.clone();
    assert!(reports.is_empty(), "sanitizer reports: {reports:?}");
}

#[test]
fn sizes_whose_rounding_overflows_are_refused_as_out_of_memory_and_disturb_nothing() {
    // The first transfer (the create's write) fails: an older failure queued on the stream.
    let (c, _) = client(
        SimConfig::new(5).with_faults(FaultPlan::scripted([ScriptedFault::at(
            FaultKind::TransferFailure,
            1,
        )])),
    );
    let h = c.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    let usage = c.memory_usage().unwrap();
    let alignment = c.properties().alignment_bytes;
    for size in (u64::MAX - alignment + 1)..=u64::MAX {
        assert_out_of_memory(c.empty(size as usize), size);
    }
    let packed_past_the_end = vec![
        MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![usize::MAX / 2], 1),
        MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![usize::MAX / 2], 1),
    ];
    assert_out_of_memory(c.empty_tensors(packed_past_the_end), u64::MAX);
    let pitched_past_the_end = vec![MemoryLayoutDescriptor::new(
        MemoryLayoutStrategy::Optimized,
        vec![1, usize::MAX],
        1,
    )];
    assert_out_of_memory(c.empty_tensors(pitched_past_the_end), u64::MAX);
    assert_eq!(c.memory_usage().unwrap(), usage, "nothing was allocated");
    // The older failure surfaces first, once; then the stream and the handle work as before.
    match c.read_one(h.clone()) {
        Err(ServerError::Device {
            error: DeviceError::TransferFailed { .. },
            ..
        }) => {}
        other => panic!("expected the queued transfer failure, got {other:?}"),
    }
    c.write(&h, Bytes::from_elems(&[5u32, 6, 7, 8])).unwrap();
    launch_add_one(&c, &h);
    assert_eq!(read_u32s(&c, &h), vec![6, 7, 8, 9]);
    let g = c.create(Bytes::from_elems(&[9u32])).unwrap();
    assert_eq!(read_u32s(&c, &g), vec![9]);
}

#[test]
fn a_refused_stop_capture_leaves_a_prepared_stream_prepared() {
    let (c, _) = client(SimConfig::new(6));
    let s = pinned(&c, 7);
    s.graph_prepare().unwrap();
    match s.stop_capture() {
        Err(ServerError::Capture(CaptureError::NotCapturing { stream })) => {
            assert_eq!(stream, StreamId(7));
        }
        other => panic!("expected NotCapturing, got {:?}", other.map(|g| g.stream())),
    }
    // Still prepared: allocations stay persistent, and the capture can start.
    let h = s.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    let persistent = s
        .memory_report()
        .unwrap()
        .pools
        .into_iter()
        .find(|p| p.kind == PoolKind::Persistent)
        .unwrap();
    assert_eq!(
        persistent.slices, 1,
        "the prepared stream allocates persistently"
    );
    launch_add_one(&s, &h);
    s.start_capture().unwrap();
    launch_add_one(&s, &h);
    let graph = s.stop_capture().unwrap();
    graph.replay();
    assert_eq!(read_u32s(&s, &h), vec![3, 4, 5, 6]);
}

#[test]
fn another_stream_reads_a_buffer_of_a_capturing_stream() {
    let (c, probe) = client(SimConfig::new(7));
    let (a, b) = (pinned(&c, 0), pinned(&c, 1));
    a.graph_prepare().unwrap();
    let h = a.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    launch_add_one(&a, &h);
    a.sync().unwrap();
    a.start_capture().unwrap();
    launch_add_one(&a, &h);
    // The captured launch runs only at replay: B sees the bytes as they are now.
    assert_eq!(read_u32s(&b, &h), vec![2, 3, 4, 5]);
    let graph = a.stop_capture().unwrap();
    graph.replay();
    a.sync().unwrap();
    assert_eq!(read_u32s(&b, &h), vec![3, 4, 5, 6]);
    assert_sanitizer_quiet(&probe);
}

#[test]
fn another_stream_is_ordered_after_work_queued_before_a_capture_started() {
    let (c, probe) = client(SimConfig::new(8));
    let (a, b) = (pinned(&c, 0), pinned(&c, 1));
    a.graph_prepare().unwrap();
    let h = a.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    // No sync: B's read must wait for this launch, queued before the capture began.
    launch_add_one(&a, &h);
    a.start_capture().unwrap();
    launch_add_one(&a, &h);
    assert_eq!(read_u32s(&b, &h), vec![2, 3, 4, 5]);
    drop(a.stop_capture().unwrap());
    a.sync().unwrap();
    assert_sanitizer_quiet(&probe);
}

#[test]
fn dropping_a_buffer_two_streams_used_while_one_captures_fails_nothing() {
    let (c, probe) = client(SimConfig::new(9));
    let (a, b) = (pinned(&c, 0), pinned(&c, 1));
    a.graph_prepare().unwrap();
    let captured = a.create(Bytes::from_elems(&[0u32; 4])).unwrap();
    let shared = a.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    launch_add_one(&a, &shared);
    assert_eq!(read_u32s(&b, &shared), vec![2, 3, 4, 5]);
    let in_use = c.memory_usage().unwrap();
    a.start_capture().unwrap();
    launch_add_one(&a, &captured);
    drop(shared);
    let graph = a.stop_capture().unwrap();
    a.sync().expect("nothing failed on A");
    b.sync().expect("nothing failed on B");
    let usage = c.memory_usage().unwrap();
    assert_eq!(
        usage.allocations,
        in_use.allocations - 1,
        "the dropped buffer returned once both streams' work on it completed"
    );
    graph.replay();
    assert_eq!(read_u32s(&a, &captured), vec![1, 1, 1, 1]);
    assert_sanitizer_quiet(&probe);
}

#[test]
fn a_buffer_dropped_while_a_capture_records_it_lives_as_long_as_the_graph() {
    let (c, probe) = client(SimConfig::new(10));
    let a = pinned(&c, 0);
    a.graph_prepare().unwrap();
    let h = a.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap();
    let before = c.memory_usage().unwrap();
    a.start_capture().unwrap();
    launch_add_one(&a, &h);
    drop(h);
    let graph = a
        .stop_capture()
        .expect("the captured buffer is still alive");
    graph.replay();
    graph.replay();
    a.sync().unwrap();
    assert_eq!(
        c.memory_usage().unwrap(),
        before,
        "the graph keeps its buffer"
    );
    drop(graph);
    a.sync().unwrap();
    assert_eq!(
        c.memory_usage().unwrap().allocations,
        before.allocations - 1,
        "the buffer goes with the graph"
    );
    assert_sanitizer_quiet(&probe);
}
