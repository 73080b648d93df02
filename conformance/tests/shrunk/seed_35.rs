/// `lockstep replay --seed 35 --shrink`: 138 operations shrunk to 4 in 121 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: false, deferred_frees: true, checked_slot_sizes: true, refused_stop_capture_keeps_state: true, capture_aware_events: true, launch_view_offsets: true }`,
/// it failed in operation `AllReduce`: all_reduce (Sum) on peer #:# differs from the reference
pub fn seed_35(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments, MemoryPoolsConfig, PoolPreset, ReduceOperation, StreamId};
    use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
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
    let mut s5 = client.clone();
    s5.set_stream(StreamId(5));
    let h1 = s5.create(Bytes::from_elems::<u32>(&[801973240])).unwrap();
    let mut s6 = client.clone();
    s6.set_stream(StreamId(6));
    let part2 = peer0.create(Bytes::from_elems::<u32>(&[3367862318])).unwrap();
    let h3 = peer0.to_client(part2, &s6, ElemType::U32).unwrap();
    let mut s4 = client.clone();
    s4.set_stream(StreamId(4));
    let explore_0 = {
        let mut b = KernelBuilder::new("explore_0", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            let d = dst.load(i.clone());
            let s = src.load((i.clone() * 2u32 + 6u32) % src.len());
            b.store(dst, i, (s.clone() ^ d.clone()).lt(k.clone().lt(k.clone()).select(k.clone(), k.clone())).select(s.clone() & s.clone(), 3u32).min(d.clone()));
        });
        Kernel::new(b.build().unwrap()).unwrap()
    };
    s4.launch(&explore_0, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h3).binding(&h1).param(Scalar::U32(3482818010))).unwrap();
    let devices4 = vec![s6.peer_id(), peer0.peer_id()];
    s6.all_reduce(h3.clone(), h3.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Sum).unwrap();
    let part5 = peer0.create(Bytes::from_elems::<u32>(&[1822010944])).unwrap();
    peer0.all_reduce(part5.clone(), part5.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Sum).unwrap();
    assert_eq!(peer0.read_one(part5).unwrap().to_elems::<u32>(), vec![1822010947]);

    // Every stream drains; everything is released.
    assert_eq!(s4.sync(), Ok(()));
    assert_eq!(s5.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    drop(h3);
    drop(h1);
    client.memory_cleanup();
    assert_eq!(s4.sync(), Ok(()));
    assert_eq!(s5.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);
    assert_eq!(peer0.sync(), Ok(()));
    peer0.memory_cleanup();
    assert_eq!(peer0.sync(), Ok(()));
    assert_eq!(peer0.memory_usage().unwrap(), peer0_baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s4, s5, s6, client, peer0));
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
