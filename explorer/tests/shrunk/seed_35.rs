/// `lockstep replay --seed 35 --shrink`: 138 operations shrunk to 4 in 93 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true, record: Env }`,
/// it failed in operation `AllReduce`: all_reduce (Min) on a peer differs from the reference
pub fn seed_35(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, KernelArguments, MemoryPoolsConfig, PoolPreset, ReduceOperation, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar, Value};
    use lockstep_sim::{SimCluster, SimConfig, SimDevice, SimProbe};

    let devices = SimCluster::from_configs(vec![
        SimConfig {
            memory_bytes: 1073741824,
            max_allocation_bytes: 8388608,
            max_background_steps: 2,
            watchdog_ns: 1000000000,
            ..SimConfig::new(35)
        },
        SimConfig {
            memory_bytes: 1073741824,
            max_allocation_bytes: 8388608,
            max_background_steps: 2,
            watchdog_ns: 1000000000,
            ..SimConfig::new(11400714819323198520)
        },
    ])
    .into_devices();
    let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();
    let mut clients = devices
        .into_iter()
        .map(|device| ComputeClient::with_options(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    let mut peer0 = clients.next().unwrap();
    peer0.set_stream(StreamId(0));
    client.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::ExclusivePages)).unwrap();
    let baseline = client.memory_usage().unwrap();
    let peer0_baseline = peer0.memory_usage().unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let h1 = s1.create(Bytes::from_elems::<u32>(&[3217887290, 1485576690])).unwrap();
    let mut s6 = client.clone();
    s6.set_stream(StreamId(6));
    let part2 = peer0.create(Bytes::from_elems::<u32>(&[3623835106, 667421791])).unwrap();
    let h3 = peer0.to_client(part2, &s6, ElemType::U32).unwrap();
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    let explore_1 = {
        let mut b = KernelBuilder::new("explore_1", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.lt(dst.len()), |b| {
            let d = dst.load(i);
            let s = src.load((i * 1u32 + 0u32) % src.len());
            b.store(dst, i, s.lt(Value::from(63u32).lt(k).select(18u32, d & s)).select(d, k.lt(s).select(k - d, k - k)));
        });
        b.build().unwrap()
    };
    s0.launch(&explore_1, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h1).binding(&h3).param(Scalar::U32(1254735094))).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let devices4 = vec![t0.peer_id(), peer0.peer_id()];
    t0.all_reduce(h1.clone(), h1.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Min).unwrap();
    let part5 = peer0.create(Bytes::from_elems::<u32>(&[3262549261, 616834632])).unwrap();
    peer0.all_reduce(part5.clone(), part5.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Min).unwrap();
    assert_eq!(peer0.read_one(part5).unwrap().to_elems::<u32>(), vec![2331815100, 0]);

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    let read6 = block_on(client.read_async(vec![h3.clone(), h1.clone()])).unwrap();
    assert_eq!(read6[0].to_elems::<u32>(), vec![3623835106, 667421791]);
    assert_eq!(read6[1].to_elems::<u32>(), vec![2331815100, 0]);
    drop(h3);
    drop(h1);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);
    assert_eq!(peer0.sync(), Ok(()));
    peer0.memory_cleanup();
    assert_eq!(peer0.sync(), Ok(()));
    assert_eq!(peer0.memory_usage().unwrap(), peer0_baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, s1, s6, client, t0, peer0));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_35_shrunk() {
    seed_35(lockstep::ServerOptions::default());
}
