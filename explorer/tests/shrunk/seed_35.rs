/// `lockstep replay --seed 35 --shrink`: 138 operations shrunk to 6 in 92 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true, peer_copy_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true, record: Env }`,
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
        .map(|device| ComputeClient::inline(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    let mut peer0 = clients.next().unwrap();
    peer0.set_stream(StreamId(0));
    client.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::ExclusivePages)).unwrap();
    let baseline = client.memory_usage().unwrap();
    let peer0_baseline = peer0.memory_usage().unwrap();
    let mut s3 = client.clone();
    s3.set_stream(StreamId(3));
    let h1 = s3.create(Bytes::from_elems::<u32>(&[4145058173])).unwrap();
    let mut s2 = client.clone();
    s2.set_stream(StreamId(2));
    let h2 = s2.create(Bytes::from_elems::<u32>(&[1985980219])).unwrap();
    let h3 = s3.create(Bytes::from_elems::<u32>(&[751934641])).unwrap();
    drop(h2);
    let mut t1 = client.clone();
    t1.set_stream(StreamId(65537));
    let h4 = t1.create(Bytes::from_elems::<u32>(&[723697408, 427338752])).unwrap();
    drop(h1);
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    t0.write_at(&h4, 6, Bytes::from_bytes_vec(vec![19, 67])).unwrap();
    let mut s6 = client.clone();
    s6.set_stream(StreamId(6));
    let devices5 = vec![s6.peer_id(), peer0.peer_id()];
    s6.all_reduce(h4.clone(), h4.clone(), ElemType::U32, devices5.clone(), ReduceOperation::Min).unwrap();
    let part6 = peer0.create(Bytes::from_elems::<u32>(&[2942324200, 1842196324])).unwrap();
    peer0.all_reduce(part6.clone(), part6.clone(), ElemType::U32, devices5.clone(), ReduceOperation::Min).unwrap();
    assert_eq!(peer0.read_one(part6).unwrap().to_elems::<u32>(), vec![723697408, 1125362688]);

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    let read7 = block_on(client.read_async(vec![h3.clone(), h4.clone()])).unwrap();
    assert_eq!(read7[0].to_elems::<u32>(), vec![751934641]);
    assert_eq!(read7[1].to_elems::<u32>(), vec![723697408, 1125362688]);
    drop(h3);
    drop(h4);
    client.memory_cleanup();
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);
    assert_eq!(peer0.sync(), Ok(()));
    peer0.memory_cleanup();
    assert_eq!(peer0.sync(), Ok(()));
    assert_eq!(peer0.memory_usage().unwrap(), peer0_baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s2, s3, s6, client, t0, t1, peer0));
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
