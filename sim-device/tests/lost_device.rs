//! A lost device never hangs a caller: once the runtime's invariant check has marked a device
//! lost, every public call on it answers (most with `DeviceLost`), and so do its peers' calls
//! that wait for it. All-reduces and `to_client` with a lost peer hung before the runtime told
//! the device it was abandoned (`Device::abandon`): the simulator's hub kept waiting for it.
//! Each call runs on a thread of its own, bounded by a minute (a bound on a hang, never a
//! passing verdict).

use std::sync::Arc;
use std::time::Duration;

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, CubeCount, Graph, Handle, Kernel, KernelArguments,
    KernelConfig, MemoryLayoutDescriptor, MemoryLayoutStrategy, MemoryPoolsConfig, PlantedDefect,
    PoolPreset, ReduceOperation, ServerError, ServerOptions, ThroughputKey,
};
use lockstep_sim::{SimCluster, SimConfig, SimDevice};

fn kernel() -> Kernel {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let d = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(d.len()), |k| k.store(d, i, d.load(i) + 1u32));
    k.build().unwrap()
}

type C = ComputeClient<SimDevice>;
/// A call on the lost client (first) or its live peer (second), with a handle and a graph the
/// lost device made before; returns what it got, printed.
type Call = Arc<dyn Fn(&C, &C, &Handle, &Graph<SimDevice>) -> String + Send + Sync>;

#[test]
fn no_call_on_a_lost_device_or_its_peers_hangs() {
    let calls: Vec<(&str, Call)> = vec![
        (
            "create",
            Arc::new(|c, _, _, _| format!("{:?}", c.create(Bytes::from_elems(&[1u32])).map(drop))),
        ),
        (
            "empty",
            Arc::new(|c, _, _, _| format!("{:?}", c.empty(16).map(drop))),
        ),
        (
            "empty_big",
            Arc::new(|c, _, _, _| format!("{:?}", c.empty(300 << 20).map(drop))),
        ),
        (
            "write",
            Arc::new(|c, _, h, _| format!("{:?}", c.write(h, Bytes::from_elems(&[1u32; 4])))),
        ),
        (
            "read_one",
            Arc::new(|c, _, h, _| format!("{:?}", c.read_one(h.clone()).map(drop))),
        ),
        (
            "read_lazy",
            Arc::new(|c, _, h, _| {
                format!(
                    "{:?}",
                    c.read_lazy(CopyDescriptor::new(h.clone(), vec![4], vec![1], 4))
                        .materialize()
                        .map(drop)
                )
            }),
        ),
        (
            "launch+sync",
            Arc::new(|c, _, h, _| {
                format!(
                    "{:?} {:?}",
                    c.launch(
                        &kernel(),
                        CubeCount::Static(1, 1, 1),
                        KernelArguments::new().binding(h)
                    ),
                    c.sync()
                )
            }),
        ),
        (
            "compile",
            Arc::new(|c, _, _, _| format!("{:?}", c.compile(&kernel()))),
        ),
        (
            "capture",
            Arc::new(|c, _, h, _| {
                format!("{:?} {:?} {:?}", c.graph_prepare(), c.start_capture(), {
                    let _ = c.launch(
                        &kernel(),
                        CubeCount::Static(1, 1, 1),
                        KernelArguments::new().binding(h),
                    );
                    c.stop_capture().map(drop)
                })
            }),
        ),
        (
            "replay_old_graph",
            Arc::new(|c, _, _, g| {
                g.replay();
                format!("{:?}", c.sync())
            }),
        ),
        ("flush", Arc::new(|c, _, _, _| format!("{:?}", c.flush()))),
        (
            "sync_all",
            Arc::new(|c, _, _, _| format!("{:?}", c.sync_all())),
        ),
        (
            "memory_cleanup",
            Arc::new(|c, _, _, _| {
                c.memory_cleanup();
                "ok".into()
            }),
        ),
        (
            "memory_report",
            Arc::new(|c, _, _, _| format!("{:?}", c.memory_report().map(drop))),
        ),
        (
            "install",
            Arc::new(|c, _, _, _| {
                format!(
                    "{:?}",
                    c.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::Default))
                )
            }),
        ),
        (
            "budget",
            Arc::new(|c, _, _, _| format!("{:?}", c.set_memory_budget(Some(1 << 20)))),
        ),
        (
            "profile",
            Arc::new(|c, _, h, _| {
                format!(
                    "{:?}",
                    c.profile(
                        || c.launch(
                            &kernel(),
                            CubeCount::Static(1, 1, 1),
                            KernelArguments::new().binding(h)
                        ),
                        "p"
                    )
                    .map(|(_, d)| d.resolve_blocking())
                )
            }),
        ),
        (
            "throughput",
            Arc::new(|c, _, _, _| {
                format!(
                    "{:?}",
                    c.measure_throughput(
                        ThroughputKey::Memory,
                        KernelConfig {
                            workgroups: 2,
                            iterations: 1
                        }
                    )
                    .map(drop)
                )
            }),
        ),
        (
            "vector_sizes",
            Arc::new(|c, _, _, _| format!("{:?}", c.io_optimized_vector_sizes(4).count())),
        ),
        (
            "get_resource",
            Arc::new(|c, _, h, _| {
                format!(
                    "{:?}",
                    c.get_resource(h.clone()).map(|r| r.with_buffer(|_, o| o))
                )
            }),
        ),
        (
            "all_reduce",
            Arc::new(|c, p, h, _| {
                let devs = vec![c.peer_id(), p.peer_id()];
                let ph = p.create(Bytes::from_elems(&[1u32; 4]));
                let a = c.all_reduce(
                    h.clone(),
                    h.clone(),
                    ElemType::U32,
                    devs.clone(),
                    ReduceOperation::Sum,
                );
                let b = ph.map(|ph| {
                    p.all_reduce(ph.clone(), ph, ElemType::U32, devs, ReduceOperation::Sum)
                });
                format!("{a:?} {b:?} {:?} {:?}", c.sync(), p.sync())
            }),
        ),
        (
            "to_peer",
            Arc::new(|c, p, h, _| {
                let r = c.to_client(h.clone(), p, ElemType::U32);
                format!("{:?} {:?}", r.map(|h| p.read_one(h).map(drop)), c.sync())
            }),
        ),
        (
            "from_peer",
            Arc::new(|c, p, _, _| {
                let ph = p.create(Bytes::from_elems(&[1u32; 4])).unwrap();
                let r = p.to_client(ph, c, ElemType::U32);
                format!("{:?} {:?}", r.map(|h| c.read_one(h).map(drop)), p.sync())
            }),
        ),
        (
            "exclusive",
            Arc::new(|c, _, _, _| format!("{:?}", c.exclusive(|| 1))),
        ),
        (
            "create_tensors",
            Arc::new(|c, _, _, _| {
                format!(
                    "{:?}",
                    c.create_tensors(vec![(
                        MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Optimized, vec![2, 3], 4),
                        Bytes::from_elems(&[1u32; 6])
                    )])
                    .map(drop)
                )
            }),
        ),
        (
            "write_tensor",
            Arc::new(|c, _, h, _| {
                format!(
                    "{:?}",
                    c.write_tensor(
                        CopyDescriptor::new(h.clone(), vec![4], vec![1], 4),
                        Bytes::from_elems(&[1u32; 4])
                    )
                )
            }),
        ),
        (
            "persistent",
            Arc::new(|c, _, _, _| {
                format!(
                    "{:?}",
                    c.memory_persistent_allocation((), |()| c.empty(16).map(drop))
                )
            }),
        ),
        (
            "drop_handle_sync",
            Arc::new(|c, _, h, _| {
                drop(h.clone());
                format!("{:?}", c.sync())
            }),
        ),
    ];
    for (name, call) in calls {
        for threaded in [true, false] {
            let (done, got) = std::sync::mpsc::channel();
            let call = call.clone();
            std::thread::spawn(move || {
                let mut devs = SimCluster::new(SimConfig::new(1), 2).into_devices();
                let pd = devs.pop().unwrap();
                let d = devs.pop().unwrap();
                let (c, p) = if threaded {
                    (ComputeClient::new(d), ComputeClient::new(pd))
                } else {
                    (
                        ComputeClient::inline(d, ServerOptions::default()),
                        ComputeClient::inline(pd, ServerOptions::default()),
                    )
                };
                let h = c.create(Bytes::from_elems(&[0u32; 4])).unwrap();
                c.graph_prepare().unwrap();
                c.start_capture().unwrap();
                c.launch(
                    &kernel(),
                    CubeCount::Static(1, 1, 1),
                    KernelArguments::new().binding(&h),
                )
                .unwrap();
                let g = c.stop_capture().unwrap();
                c.sync().unwrap();
                let _keep = c.create(Bytes::from_elems(&[0u32; 4])).unwrap();
                assert!(c.plant_defect(PlantedDefect::MiscountBytesInUse));
                let _ = c.sync();
                let r = call(&c, &p, &h, &g);
                done.send(r).unwrap();
            });
            let answer = got.recv_timeout(Duration::from_secs(60));
            assert!(answer.is_ok(), "{name} (threaded client {threaded}) hung");
            println!(
                "{name} (threaded {threaded}): {}",
                answer.unwrap_or_default()
            );
        }
    }
}

/// The peer of an abandoned device does not wait for it: its all-reduce and its receive of a
/// copy from it fail with `PeerTimeout` (on virtual time), typed.
#[test]
fn a_peer_of_a_lost_device_fails_its_collectives_typed() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        peer_of_a_lost_device();
        done.send(()).unwrap();
    });
    let answer = finished.recv_timeout(Duration::from_secs(60));
    assert!(
        answer.is_ok(),
        "the peer of a lost device hung, or the check failed"
    );
}

fn peer_of_a_lost_device() {
    let mut devices = SimCluster::new(SimConfig::new(2), 2).into_devices();
    let peer = ComputeClient::new(devices.pop().unwrap());
    let lost = ComputeClient::new(devices.pop().unwrap());
    let h = lost.create(Bytes::from_elems(&[1u32; 4])).unwrap();
    assert!(lost.plant_defect(PlantedDefect::MiscountBytesInUse));
    assert!(matches!(lost.sync(), Err(ServerError::DeviceLost { .. })));
    let devs = vec![lost.peer_id(), peer.peer_id()];
    let mine = peer.create(Bytes::from_elems(&[2u32; 4])).unwrap();
    peer.all_reduce(
        mine.clone(),
        mine,
        ElemType::U32,
        devs,
        ReduceOperation::Sum,
    )
    .unwrap();
    let waited = peer.sync();
    assert!(
        matches!(&waited, Err(ServerError::Collective { error, .. })
            if matches!(error, lockstep::CollectiveError::PeerTimeout { .. })),
        "{waited:?}"
    );
    let copy = lost
        .to_client(h, &peer, ElemType::U32)
        .map(|c| peer.read_one(c));
    assert!(
        matches!(&copy, Ok(Err(ServerError::Collective { .. })) | Err(_)),
        "{copy:?}"
    );
}
