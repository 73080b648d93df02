/// `lockstep replay --seed 11 --shrink`: 84 operations shrunk to 3 in 79 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true, peer_copy_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true, record: Env }`,
/// it failed in the audit of the simulators' observations: sanitizer: Race
pub fn seed_11(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, MemoryPoolsConfig, PoolPreset, StreamId, block_on};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 1073741824,
        max_allocation_bytes: 8388608,
        max_background_steps: 1,
        watchdog_ns: 1000000000,
        ..SimConfig::new(11)
    })];
    let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();
    let mut clients = devices
        .into_iter()
        .map(|device| ComputeClient::inline(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    client.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::Default)).unwrap();
    let baseline = client.memory_usage().unwrap();
    let mut s3 = client.clone();
    s3.set_stream(StreamId(3));
    let h1 = s3.empty(4).unwrap();
    s3.write(&h1, Bytes::from_elems::<u32>(&[1368451832])).unwrap();
    let mut s2 = client.clone();
    s2.set_stream(StreamId(2));
    s2.write_at(&h1, 0, Bytes::from_elems::<u32>(&[2496058602])).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let h2 = t0.empty(4).unwrap();
    t0.write(&h2, Bytes::from_elems::<u32>(&[2624269536])).unwrap();

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    let read3 = block_on(client.read_async(vec![h2.clone(), h1.clone()])).unwrap();
    assert_eq!(read3[0].to_elems::<u32>(), vec![2624269536]);
    assert_eq!(read3[1].to_elems::<u32>(), vec![2496058602]);
    drop(h2);
    drop(h1);
    client.memory_cleanup();
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s2, s3, client, t0));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_11_shrunk() {
    seed_11(lockstep::ServerOptions::default());
}
