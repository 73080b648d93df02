/// `lockstep replay --seed 132 --shrink`: 128 operations shrunk to 4 in 91 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: false }`,
/// it failed after the workload: read on stream-#: read # elements, model holds #; first difference at element #
pub fn seed_132(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, Kernel, KernelArguments, MemoryLayoutDescriptor, MemoryLayoutStrategy, MemoryPoolsConfig, PoolPreset, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 268435456,
        max_allocation_bytes: 8388608,
        max_background_steps: 5,
        watchdog_ns: 1000000000,
        ..SimConfig::new(132)
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
    let mut t0 = client.clone();
    t0.set_stream(StreamId(65536));
    let h1 = t0.empty(4).unwrap();
    t0.write(&h1, Bytes::from_elems::<u32>(&[2837185671])).unwrap();
    let tensors2 = t0.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[3372831689])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![1], 4), Bytes::from_elems::<u32>(&[167904668])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[4080946370])),
    ]).unwrap();
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let explore_0 = {
        let mut b = KernelBuilder::new("explore_0", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            let d = dst.load(i.clone());
            let s = src.load((i.clone() * 3u32 + 6u32) % src.len());
            b.store(dst, i, (k.clone() | s.clone()) + d.clone().lt(s.clone() & k.clone()).select(d.clone() + d.clone(), s.clone() - d.clone()));
        });
        Kernel::new(b.build().unwrap()).unwrap()
    };
    s1.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&tensors2[1].memory).binding(&h1).param(Scalar::U32(3563195997))).unwrap();
    let mut s5 = client.clone();
    s5.set_stream(StreamId(5));
    let read3 = block_on(s5.read_tensor_async(vec![CopyDescriptor::new(tensors2[0].memory.clone(), vec![1], tensors2[0].strides.clone(), 4), CopyDescriptor::new(tensors2[1].memory.clone(), vec![1], tensors2[1].strides.clone(), 4), CopyDescriptor::new(tensors2[2].memory.clone(), vec![1], tensors2[2].strides.clone(), 4)])).unwrap();
    assert_eq!(read3[0].to_elems::<u32>(), vec![3372831689]);
    assert_eq!(read3[1].to_elems::<u32>(), vec![293739031]);
    assert_eq!(read3[2].to_elems::<u32>(), vec![4080946370]);

    // Every stream drains; everything is released.
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s5.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    drop(h1);
    drop(tensors2);
    client.memory_cleanup();
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(s5.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s1, s5, client, t0));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_132_shrunk() {
    seed_132(lockstep::ServerOptions::default());
}
