/// `lockstep replay --seed 11 --shrink`: 84 operations shrunk to 12 in 489 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true }`,
/// it failed in the final read of everything live: a read on the explored device differs from the model in values
pub fn seed_11(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, KernelArguments, MemoryLayoutDescriptor, MemoryLayoutStrategy, MemoryPoolsConfig, PoolPreset, ServerError, StreamId, block_on};
    use lockstep::kernel::{Access, ElemType, KernelBuilder, Scalar};
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
        .map(|device| ComputeClient::with_options(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    client.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::Default)).unwrap();
    let baseline = client.memory_usage().unwrap();
    let mut s3 = client.clone();
    s3.set_stream(StreamId(3));
    let h1 = s3.empty(4).unwrap();
    s3.write(&h1, Bytes::from_elems::<u32>(&[3108856068])).unwrap();
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    let h2 = s0.empty(4).unwrap();
    s0.write(&h2, Bytes::from_elems::<u32>(&[497328122])).unwrap();
    let none3 = s0.create(Bytes::default()).unwrap();
    assert_eq!(none3.size(), 0);
    s0.write_at(&none3, 0, Bytes::default()).unwrap();
    assert!(s0.read_one(none3).unwrap().is_empty());
    let mut s4 = client.clone();
    s4.set_stream(StreamId(4));
    let h4 = s4.empty(4).unwrap();
    s4.write(&h4, Bytes::from_elems::<u32>(&[345320859])).unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let overrun = {
        let mut b = KernelBuilder::new("overrun", [1, 1, 1]);
        let data = b.binding(ElemType::U32, Access::ReadWrite);
        let past_end = b.param(ElemType::U32);
        b.store(data, data.len() + past_end, 1u32);
        b.build().unwrap()
    };
    s1.launch(&overrun, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h4).param(Scalar::U32(2))).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let tensors5 = t0.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[2078035632])),
    ]).unwrap();
    let tensors6 = s1.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[1519815087])),
    ]).unwrap();
    drop(tensors5);
    let tensors7 = s1.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[2437516526])),
    ]).unwrap();
    let read8 = block_on(s0.read_tensor_async(vec![CopyDescriptor::new(tensors6[0].memory.clone(), vec![1], tensors6[0].strides.clone(), 4)])).unwrap();
    assert_eq!(read8[0].to_elems::<u32>(), vec![1519815087]);
    let mut s2 = client.clone();
    s2.set_stream(StreamId(2));
    let tensors9 = s2.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[56337947])),
    ]).unwrap();
    drop(tensors7);
    t0.write_at(&h1, 0, Bytes::from_elems::<u32>(&[2789218129])).unwrap();
    s0.write_at(&h1, 0, Bytes::from_elems::<u32>(&[1350243869])).unwrap();

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Err(ServerError::KernelFault { kernel: "overrun".to_owned(), binding: 0, index: 3, stream: StreamId(1) }));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s4.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    let read10 = block_on(client.read_async(vec![h4.clone(), h2.clone(), h1.clone()])).unwrap();
    assert_eq!(read10[0].to_elems::<u32>(), vec![345320859]);
    assert_eq!(read10[1].to_elems::<u32>(), vec![497328122]);
    assert_eq!(read10[2].to_elems::<u32>(), vec![1350243869]);
    let read11 = block_on(client.read_tensor_async(vec![CopyDescriptor::new(tensors6[0].memory.clone(), vec![1], tensors6[0].strides.clone(), 4), CopyDescriptor::new(tensors9[0].memory.clone(), vec![1], tensors9[0].strides.clone(), 4)])).unwrap();
    assert_eq!(read11[0].to_elems::<u32>(), vec![1519815087]);
    assert_eq!(read11[1].to_elems::<u32>(), vec![56337947]);
    drop(h4);
    drop(h2);
    drop(h1);
    drop(tensors6);
    drop(tensors9);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s2.sync(), Ok(()));
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s4.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, s1, s2, s3, s4, client, t0));
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
