/// `lockstep replay --seed 875 --shrink`: 136 operations shrunk to 5 in 116 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: false, invariant_checks_every_task: true }`,
/// it failed in operation `ReadTensors`: read on stream-#: read # elements, model holds #; first difference at element #
pub fn seed_875(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, KernelArguments, MemoryLayoutDescriptor, MemoryLayoutStrategy, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 268435456,
        max_allocation_bytes: 268435456,
        max_background_steps: 8,
        watchdog_ns: 1000000000,
        ..SimConfig::new(875)
    })];
    let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();
    let mut clients = devices
        .into_iter()
        .map(|device| ComputeClient::with_options(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    let baseline = client.memory_usage().unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let h1 = s1.empty(4).unwrap();
    s1.write(&h1, Bytes::from_elems::<u32>(&[1001125240])).unwrap();
    let tensors2 = s1.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[2489860451])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![1], 4), Bytes::from_elems::<u32>(&[3196024698])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[1234093217])),
    ]).unwrap();
    let explore_1 = {
        let mut b = KernelBuilder::new("explore_1", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let _src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.lt(dst.len()), |b| {
            let d = dst.load(i);
            b.store(dst, i, k - (k.min(d) * 20u32));
        });
        b.build().unwrap()
    };
    s1.launch(&explore_1, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&tensors2[1].memory).binding(&h1).param(Scalar::U32(3974043893))).unwrap();
    assert_eq!(s1.sync(), Ok(()));
    let mut t2 = client.clone();
    t2.set_stream(StreamId(65538));
    let read3 = block_on(t2.read_tensor_async(vec![CopyDescriptor::new(tensors2[0].memory.clone(), vec![1], tensors2[0].strides.clone(), 4), CopyDescriptor::new(tensors2[1].memory.clone(), vec![1], tensors2[1].strides.clone(), 4), CopyDescriptor::new(tensors2[2].memory.clone(), vec![1], tensors2[2].strides.clone(), 4)])).unwrap();
    assert_eq!(read3[0].to_elems::<u32>(), vec![2489860451]);
    assert_eq!(read3[1].to_elems::<u32>(), vec![183092077]);
    assert_eq!(read3[2].to_elems::<u32>(), vec![1234093217]);

    // Every stream drains; everything is released.
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(t2.sync(), Ok(()));
    drop(h1);
    drop(tensors2);
    client.memory_cleanup();
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(t2.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s1, client, t2));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_875_shrunk() {
    seed_875(lockstep::ServerOptions::default());
}
