/// `lockstep replay --seed 6 --shrink`: 141 operations shrunk to 6 in 114 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: false, launch_view_offsets: true, peer_copy_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true, record: Env }`,
/// it failed in operation `Read`: read_one returned an unexpected Device(Capture) error
pub fn seed_6(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments, ServerError, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 268435456,
        max_allocation_bytes: 8388608,
        max_background_steps: 6,
        watchdog_ns: 1000000000,
        ..SimConfig::new(6)
    })];
    let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();
    let mut clients = devices
        .into_iter()
        .map(|device| ComputeClient::inline(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    client.set_memory_budget(Some(50331648)).unwrap();
    let baseline = client.memory_usage().unwrap();
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    let h1 = s0.create(Bytes::from_elems::<u32>(&[861471071])).unwrap();
    let mut s2 = client.clone();
    s2.set_stream(StreamId(2));
    let h2 = s2.create(Bytes::from_elems::<u32>(&[1155634570])).unwrap();
    let mut t1 = client.clone();
    t1.set_stream(StreamId(65537));
    t1.graph_prepare().unwrap();
    let explore_0 = {
        let mut b = KernelBuilder::new("explore_0", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.lt(dst.len()), |b| {
            let d = dst.load(i);
            let s = src.load((i * 1u32 + 4u32) % src.len());
            b.store(dst, i, k.lt(k).select(k, 15u32).lt(d.lt(d).select(s, k)).select(d, s) | s);
        });
        b.build().unwrap()
    };
    t1.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h2).binding(&h1).param(Scalar::U32(1959289850))).unwrap();
    t1.start_capture().unwrap();
    t1.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h2).binding(&h1).param(Scalar::U32(1959289850))).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let h3 = t0.create(Bytes::from_elems::<u32>(&[3845573192])).unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let overrun = {
        let mut b = KernelBuilder::new("overrun", [1, 1, 1]);
        let data = b.binding(ElemType::U32, Access::ReadWrite);
        let past_end = b.param(ElemType::U32);
        b.store(data, data.len() + past_end, 1u32);
        b.build().unwrap()
    };
    s1.launch(&overrun, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h2).param(Scalar::U32(3))).unwrap();
    assert_eq!(s1.read_one(h3.clone()).err(), Some(ServerError::KernelFault { kernel: "overrun".to_owned(), binding: 0, index: 4, stream: StreamId(1) }));

    // No capture outlives the workload.
    let graph4 = t1.stop_capture().unwrap();

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    let read5 = block_on(client.read_async(vec![h3.clone(), h1.clone(), h2.clone()])).unwrap();
    assert_eq!(read5[0].to_elems::<u32>(), vec![3845573192]);
    assert_eq!(read5[1].to_elems::<u32>(), vec![861471071]);
    assert_eq!(read5[2].to_elems::<u32>(), vec![2012845535]);
    drop(graph4);
    drop(h3);
    drop(h1);
    drop(h2);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, s1, s2, client, t0, t1));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_6_shrunk() {
    seed_6(lockstep::ServerOptions::default());
}
