/// `lockstep replay --seed 35 --shrink`: 138 operations shrunk to 6 in 298 runs.
/// Explored with `ServerOptions { checked_kernels: true, cross_stream_ordering: false, deferred_frees: true }`,
/// it failed in operation `AllReduce`: all_reduce (Max) on peer #:# differs from the reference
pub fn seed_35(options: lockstep::ServerOptions) {
    use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments, MemoryPoolsConfig, PoolPreset, ReduceOperation, StreamId};
    use lockstep::kernel::{Access, Axis, ElemType, Expr, KernelBuilder, Scalar};
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
    let mut s3 = client.clone();
    s3.set_stream(StreamId(3));
    let h1 = s3.create(Bytes::from_elems::<u32>(&[2149100335])).unwrap();
    let mut t0 = client.clone();
    t0.set_stream(StreamId(101));
    let h2 = t0.create(Bytes::from_elems::<u32>(&[2237417963])).unwrap();
    let mut t1 = client.clone();
    t1.set_stream(StreamId(102));
    t1.write_at(&h1, 0, Bytes::from_elems::<u32>(&[2961694256])).unwrap();
    let h3 = s3.empty(8).unwrap();
    s3.write(&h3, Bytes::from_elems::<u32>(&[2112077365, 3728370636])).unwrap();
    let mut s6 = client.clone();
    s6.set_stream(StreamId(6));
    let explore_1 = {
        let mut b = KernelBuilder::new("explore_1", [8, 1, 1]);
        let dst = b.binding(ElemType::U32, Access::ReadWrite);
        let src = b.binding(ElemType::U32, Access::Read);
        let k = b.param(ElemType::U32);
        let i = b.global_id(Axis::X);
        b.if_(i.clone().lt(dst.len()), |b| {
            let d = dst.load(i.clone());
            let s = src.load((i.clone() * 1u32 + 0u32) % src.len());
            b.store(dst, i, s.clone().lt(Expr::from(63u32).lt(k.clone()).select(18u32, d.clone() & s.clone())).select(d.clone(), k.clone().lt(s.clone()).select(k.clone() - d.clone(), k.clone() - k.clone())));
        });
        Kernel::new(b.build().unwrap()).unwrap()
    };
    s6.launch(&explore_1, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&h3).binding(&h2).param(Scalar::U32(3466368923))).unwrap();
    let devices4 = vec![s3.peer_id(), peer0.peer_id()];
    s3.all_reduce(h3.clone(), h3.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Max).unwrap();
    let part5 = peer0.create(Bytes::from_elems::<u32>(&[2995745027, 2427471906])).unwrap();
    peer0.all_reduce(part5.clone(), part5.clone(), ElemType::U32, devices4.clone(), ReduceOperation::Max).unwrap();
    assert_eq!(peer0.read_one(part5).unwrap().to_elems::<u32>(), vec![2995745027, 2427471906]);

    // Every stream drains; everything is released.
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    drop(h1);
    drop(h3);
    drop(h2);
    client.memory_cleanup();
    assert_eq!(s3.sync(), Ok(()));
    assert_eq!(s6.sync(), Ok(()));
    assert_eq!(t0.sync(), Ok(()));
    assert_eq!(t1.sync(), Ok(()));
    assert_eq!(client.memory_usage().unwrap(), baseline);
    assert_eq!(peer0.sync(), Ok(()));
    peer0.memory_cleanup();
    assert_eq!(peer0.sync(), Ok(()));
    assert_eq!(peer0.memory_usage().unwrap(), peer0_baseline);

    // With every client gone, the simulator's verdicts: peers first.
    drop((s3, s6, client, t0, t1, peer0));
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
