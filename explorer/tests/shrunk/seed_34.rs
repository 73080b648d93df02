/// `lockstep replay --seed 34 --shrink`: 68 operations shrunk to 3 in 54 runs.
/// Explored with `ServerOptions { kernel_checks: KernelChecks { checked: true }, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: false, peer_copy_view_offsets: true, invariant_checks_every_task: true, launch_aliasing_by_range: true, peer_copies_within_group: true, lazy_read_errors_returned: true, record: Env }`,
/// it failed in the final read of everything live: a read on the explored device differs from the model in values
pub fn seed_34(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, KernelArguments, MemoryLayoutDescriptor, MemoryLayoutStrategy, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 1073741824,
        max_allocation_bytes: 268435456,
        max_background_steps: 1,
        watchdog_ns: 1000000000,
        ..SimConfig::new(34)
    })];
    let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();
    let mut clients = devices
        .into_iter()
        .map(|device| ComputeClient::inline(device, options));
    // The explorer's own thread: setup, cleanup, memory baseline.
    let mut client = clients.next().unwrap();
    client.set_stream(StreamId(100));
    let baseline = client.memory_usage().unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let tensors1 = t0.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[196364518])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![1], 4), Bytes::from_elems::<u32>(&[3730067053])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[311834477])),
    ]).unwrap();
    let mut t1 = client.clone();
    t1.set_stream(StreamId(65537));
    let h2 = t1.create(Bytes::from_elems::<u32>(&[1590641128])).unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let explore_1 = {
        let mut b = KernelBuilder::new("explore_1", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let _src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.lt(dst.len()), |b| {
            b.store(dst, i, k);
        });
        b.build().unwrap()
    };
    s1.launch(&explore_1, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&tensors1[1].memory).binding(&h2).param(Scalar::U32(1061707932))).unwrap();

    // Every stream drains; everything live reads back as the model holds it;
    // everything is released.
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    let read3 = block_on(client.read_async(vec![h2.clone()])).unwrap();
    assert_eq!(read3[0].to_elems::<u32>(), vec![1590641128]);
    let read4 = block_on(client.read_tensor_async(vec![CopyDescriptor::new(tensors1[0].memory.clone(), vec![1], tensors1[0].strides.clone(), 4), CopyDescriptor::new(tensors1[1].memory.clone(), vec![1], tensors1[1].strides.clone(), 4), CopyDescriptor::new(tensors1[2].memory.clone(), vec![1], tensors1[2].strides.clone(), 4)])).unwrap();
    assert_eq!(read4[0].to_elems::<u32>(), vec![196364518]);
    assert_eq!(read4[1].to_elems::<u32>(), vec![1061707932]);
    assert_eq!(read4[2].to_elems::<u32>(), vec![311834477]);
    drop(h2);
    drop(tensors1);
    client.memory_cleanup();
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(client.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s1, client, t0, t1));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_34_shrunk() {
    seed_34(lockstep::ServerOptions::default());
}
