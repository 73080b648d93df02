/// `lockstep replay --seed 58 --shrink`: 184 operations shrunk to 5 in 121 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: true, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: false, launch_view_offsets: true }`,
/// it failed in operation `Read`: unexpected error on stream-#: graph capture failed
pub fn seed_58(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments, MemoryPoolsConfig, PoolPreset, StreamId};
    use lockstep::kernel::{Access, Axis, ElemType, Expr, KernelBuilder, Scalar};
    use lockstep_sim::{SimConfig, SimDevice, SimProbe};

    let devices = vec![SimDevice::new(SimConfig {
        memory_bytes: 134217728,
        max_allocation_bytes: 268435456,
        max_background_steps: 4,
        watchdog_ns: 1000000000,
        ..SimConfig::new(58)
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
    let mut s1 = client.clone();
    s1.set_stream(StreamId(1));
    let h1 = s1.create(Bytes::from_elems::<u32>(&[782654548])).unwrap();
    let h2 = s1.create(Bytes::from_elems::<u32>(&[3121497707])).unwrap();
    let mut s0 = client.clone();
    s0.set_stream(StreamId(0));
    s0.graph_prepare().unwrap();
    let explore_0 = {
        let mut b = KernelBuilder::new("explore_0", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let _src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            b.store(dst, i, Expr::from(16u32) | (k.clone() + k.clone()).min(k.clone() - 5u32));
        });
        Kernel::new(b.build().unwrap()).unwrap()
    };
    s0.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h2).binding(&h1).param(Scalar::U32(191137383))).unwrap();
    s0.start_capture().unwrap();
    s0.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h2).binding(&h1).param(Scalar::U32(191137383))).unwrap();
    s1.write_at(&h2, 0, Bytes::from_elems::<u32>(&[1184695119])).unwrap();
    assert_eq!(s1.read_one(h1.clone()).unwrap().to_elems::<u32>(), vec![782654548]);

    // No capture outlives the workload.
    let graph3 = s0.stop_capture().unwrap();

    // Every stream drains; everything is released.
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    drop(graph3);
    drop(h2);
    drop(h1);
    client.memory_cleanup();
    assert_eq!(s0.sync(), Ok(()));
    assert_eq!(s1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s0, s1, client));
    for probe in probes.iter().skip(1).chain(probes.first()) {
        let observed = probe.observations();
        assert!(!observed.watchdog_fired, "hang: virtual time passed the watchdog");
        assert!(observed.reports.is_empty(), "sanitizer: {:?}", observed.reports);
    }
}

#[test]
fn seed_58_shrunk() {
    seed_58(lockstep::ServerOptions::default());
}
