/// `lockstep replay --seed 35 --shrink`: 138 operations shrunk to 2 in 62 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true }`,
/// it failed in operation `AllReduce`: all_reduce (Min) on a peer differs from the reference
pub fn seed_35(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, MemoryPoolsConfig, PoolPreset, ReduceOperation, StreamId, block_on};
    use lockstep::kernel::ElemType;
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
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    let part1 = peer0.create(Bytes::from_elems::<u32>(&[503153678])).unwrap();
    let h2 = peer0.to_client(part1, &s0, ElemType::U32).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let devices3 = vec![t0.peer_id(), peer0.peer_id()];
    t0.all_reduce(h2.clone(), h2.clone(), ElemType::U32, devices3.clone(), ReduceOperation::Min).unwrap();
    let part4 = peer0.create(Bytes::from_elems::<u32>(&[537173846])).unwrap();
    peer0.all_reduce(part4.clone(), part4.clone(), ElemType::U32, devices3.clone(), ReduceOperation::Min).unwrap();
    assert_eq!(peer0.read_one(part4).unwrap().to_elems::<u32>(), vec![503153678]);

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    let read5 = block_on(client.read_async(vec![h2.clone()])).unwrap();
    assert_eq!(read5[0].to_elems::<u32>(), vec![503153678]);
    drop(h2);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);
    assert_eq!(peer0.sync(), Ok(()));
    peer0.memory_cleanup();
    assert_eq!(peer0.sync(), Ok(()));
    assert_eq!(peer0.memory_usage().unwrap(), peer0_baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, client, t0, peer0));
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
