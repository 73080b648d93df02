/// `lockstep replay --seed 124 --shrink`: 120 operations shrunk to 5 in 109 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: false, invariant_checks_every_task: true }`,
/// it failed in operation `ReadTensors`: read on stream-#: read # elements, model holds #; first difference at element #
pub fn seed_124(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, Kernel, KernelArguments, MemoryLayoutDescriptor, MemoryLayoutStrategy, MemoryPoolsConfig, PoolPreset, StreamId, block_on};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 268435456,
        max_allocation_bytes: 67108864,
        max_background_steps: 1,
        watchdog_ns: 1000000000,
        ..SimConfig::new(124)
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
    let tensors1 = t0.create_tensors(vec![
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![1], 4), Bytes::from_elems::<u32>(&[781359053])),
        (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![1], 4), Bytes::from_elems::<u32>(&[301006301])),
    ]).unwrap();
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    let h2 = s0.create(Bytes::from_elems::<u32>(&[3595480988])).unwrap();
    let mut t1 = client.clone();
    t1.set_stream(StreamId(65537));
    let explore_0 = {
        let mut b = KernelBuilder::new("explore_0", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let _src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            b.store(dst, i, k.clone());
        });
        Kernel::new(b.build().unwrap()).unwrap()
    };
    t1.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&tensors1[1].memory).binding(&h2).param(Scalar::U32(2821867794))).unwrap();
    let none3 = t0.empty(0).unwrap();
    assert_eq!(none3.size(), 0);
    t0.write_at(&none3, 0, Bytes::default()).unwrap();
    assert!(t0.read_one(none3).unwrap().is_empty());
    let read4 = block_on(s0.read_tensor_async(vec![CopyDescriptor::new(tensors1[0].memory.clone(), vec![1], tensors1[0].strides.clone(), 4), CopyDescriptor::new(tensors1[1].memory.clone(), vec![1], tensors1[1].strides.clone(), 4)])).unwrap();
    assert_eq!(read4[0].to_elems::<u32>(), vec![781359053]);
    assert_eq!(read4[1].to_elems::<u32>(), vec![2821867794]);

    // Every stream drains; everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    drop(h2);
    drop(tensors1);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, client, t0, t1));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_124_shrunk() {
    seed_124(lockstep::ServerOptions::default());
}
