//! Collectives and peer copies on a simulated cluster, through `ComputeClient`: exact results,
//! what only the simulator can show (peers that never arrive, determinism across threads), and
//! the errors a call returns at once. Properties over random inputs live in the conformance
//! suite (`collectives.rs`).

use lockstep::kernel::ElemType;
use lockstep::{
    Bytes, CaptureError, CollectiveError, ComputeClient, CopyDescriptor, DeviceId, Handle, IoError,
    ReduceOperation, ServerError, ServerOptions, StreamId,
};
use lockstep_sim::{
    COLLECTIVE_TIMEOUT_NS, FaultKind, FaultPlan, ScriptedFault, SimCluster, SimConfig, SimDevice,
    SimProbe,
};

fn cluster(config: SimConfig, count: u32) -> Vec<ComputeClient<SimDevice>> {
    clients(SimCluster::new(config, count))
}

fn clients(cluster: SimCluster) -> Vec<ComputeClient<SimDevice>> {
    cluster
        .into_devices()
        .into_iter()
        .map(ComputeClient::new)
        .collect()
}

fn ids(clients: &[ComputeClient<SimDevice>]) -> Vec<DeviceId> {
    clients.iter().map(|c| c.peer_id()).collect()
}

fn sim(index: u32) -> DeviceId {
    DeviceId { type_id: 0, index }
}

/// Each device all-reduces its own `inputs[r]` into a fresh buffer; returns the buffers. The
/// sources are dropped at once: the runtime releases them after the collective.
fn all_reduce_each(
    clients: &[ComputeClient<SimDevice>],
    inputs: &[Bytes],
    elem: ElemType,
    op: ReduceOperation,
) -> Vec<Handle> {
    clients
        .iter()
        .zip(inputs)
        .map(|(c, input)| {
            let src = c.create(input.clone()).unwrap();
            let dst = c.empty(input.len()).unwrap();
            c.all_reduce(src, dst.clone(), elem, ids(clients), op)
                .unwrap();
            dst
        })
        .collect()
}

#[test]
fn enumeration_lists_the_cluster() {
    let clients = cluster(SimConfig::new(1), 3);
    let c = &clients[2];
    assert_eq!(c.peer_id(), sim(2));
    assert_eq!(c.enumerate_devices(0), vec![sim(0), sim(1), sim(2)]);
    assert_eq!(c.enumerate_all_devices(), c.enumerate_devices(0));
    assert_eq!(c.device_count(0), 3);
    assert_eq!(c.device_count(2), 0);
    assert_eq!(c.device_count_total(), 3);
    let alone = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    assert_eq!(alone.enumerate_all_devices(), vec![sim(0)]);
}

#[test]
fn float_sums_fold_in_rank_order_on_every_device() {
    let clients = cluster(SimConfig::new(7), 3);
    // (1e8 + 1) - 1e8 is 0 in f32 when folded in rank order; any other order gives 1.
    let inputs = [1e8f32, 1.0, -1e8].map(|x| Bytes::from_elems(&[x, 2.0 * x]));
    let outputs = all_reduce_each(&clients, &inputs, ElemType::F32, ReduceOperation::Sum);
    for (c, out) in clients.iter().zip(outputs) {
        assert_eq!(c.read_one(out).unwrap().to_elems::<f32>(), vec![0.0, 0.0]);
    }
}

#[test]
fn integer_reductions_are_exact() {
    let clients = cluster(SimConfig::new(8), 2);
    let inputs = [[5i32, -3, 7], [-2, -9, 7]].map(|v| Bytes::from_elems(&v));
    let cases = [
        (ReduceOperation::Sum, vec![3, -12, 14]),
        (ReduceOperation::Prod, vec![-10, 27, 49]),
        (ReduceOperation::Min, vec![-2, -9, 7]),
        (ReduceOperation::Max, vec![5, -3, 7]),
        (ReduceOperation::Mean, vec![1, -6, 7]),
    ];
    for (op, expected) in cases {
        let outputs = all_reduce_each(&clients, &inputs, ElemType::I32, op);
        for (c, out) in clients.iter().zip(outputs) {
            assert_eq!(c.read_one(out).unwrap().to_elems::<i32>(), expected, "{op}");
        }
    }
}

#[test]
fn in_place_all_reduce_reads_earlier_writes_of_the_stream() {
    let clients = cluster(SimConfig::new(9), 2);
    let handles: Vec<Handle> = clients
        .iter()
        .map(|c| {
            let h = c.create(Bytes::from_elems(&[0u32; 4])).unwrap();
            // Enqueued, not yet executed: the all-reduce must see it.
            c.write(&h, Bytes::from_elems(&[c.peer_id().index + 1; 4]))
                .unwrap();
            c.all_reduce(
                h.clone(),
                h.clone(),
                ElemType::U32,
                ids(&clients),
                ReduceOperation::Sum,
            )
            .unwrap();
            h
        })
        .collect();
    for (c, h) in clients.iter().zip(handles) {
        assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![3; 4]);
    }
}

#[test]
fn to_client_copies_between_devices_in_stream_order() {
    let clients = cluster(SimConfig::new(10), 2);
    let (a, b) = (&clients[0], &clients[1]);
    let src = a.create(Bytes::from_elems(&[0u32; 64])).unwrap();
    let data: Vec<u32> = (0..64).collect();
    a.write(&src, Bytes::from_elems(&data)).unwrap();
    let copied = a.to_client(src.clone(), b, ElemType::U32).unwrap();
    assert_eq!(copied.device(), b.device_id());
    // A later write to the source on its stream does not reach the copy.
    a.write(&src, Bytes::from_elems(&[7u32; 64])).unwrap();
    // Another stream of the destination sees the copied bytes too.
    let mut other = b.clone();
    other.set_stream(StreamId(77));
    assert_eq!(other.read_one(copied).unwrap().to_elems::<u32>(), data);
    assert_eq!(a.read_one(src).unwrap().to_elems::<u32>(), vec![7; 64]);
    for c in &clients {
        c.sync().unwrap();
    }
}

/// `to_client` between devices of two clusters hung: ordinals 0 and 1 looked like peers, so the
/// send waited at one hub for a receive posted at the other. Devices of different clusters are
/// of different peer groups, and the copy goes through the host. The copy runs on a thread of
/// its own, so that a regression fails after a minute instead of hanging the suite.
#[test]
fn to_client_between_two_clusters_copies_through_the_host() {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let one = cluster(SimConfig::new(11), 2);
        let other = cluster(SimConfig::new(12), 2);
        let (a, b) = (&one[0], &other[1]);
        assert_ne!(
            a.peer_id(),
            b.peer_id(),
            "the case that hung: different ordinals"
        );
        let data: Vec<u32> = (0..64).collect();
        let src = a.create(Bytes::from_elems(&data)).unwrap();
        let copied = a.to_client(src, b, ElemType::U32).unwrap();
        let read = b.read_one(copied).unwrap().to_elems::<u32>();
        done.send(read == data).unwrap();
    });
    let copied = finished.recv_timeout(std::time::Duration::from_secs(60));
    assert_eq!(
        copied,
        Ok(true),
        "the copy between clusters hung or was wrong"
    );
}

#[test]
fn to_client_tensor_gathers_a_pitched_tensor() {
    let clients = cluster(SimConfig::new(11), 2);
    let data: Vec<u32> = (0..15).collect();
    let layout = clients[0]
        .create_tensor(Bytes::from_elems(&data), &[3, 5], 4)
        .unwrap();
    let descriptor = CopyDescriptor::new(layout.memory, vec![3, 5], layout.strides, 4);
    let copied = clients[0]
        .to_client_tensor(descriptor, &clients[1], ElemType::U32)
        .unwrap();
    assert_eq!(clients[1].read_one(copied).unwrap().to_elems::<u32>(), data);
}

#[test]
fn a_peer_that_never_arrives_times_out_on_virtual_time() {
    let absent = FaultPlan::scripted([ScriptedFault::at(FaultKind::PeerAbsent, 1)]);
    let configs = vec![SimConfig::new(12), SimConfig::new(13).with_faults(absent)];
    let cluster = SimCluster::from_configs(configs);
    let probe: SimProbe = cluster_probe(&cluster, 0);
    let clients = clients(cluster);
    let inputs = [Bytes::from_elems(&[1u32]), Bytes::from_elems(&[2u32])];
    all_reduce_each(&clients, &inputs, ElemType::U32, ReduceOperation::Sum);
    let before_ns = probe.observations().virtual_time_ns;
    assert_eq!(
        clients[0].sync(),
        Err(ServerError::Collective {
            stream: clients[0].stream_id(),
            error: CollectiveError::PeerTimeout {
                devices: vec![sim(0), sim(1)],
                sequence: 0,
                peer: sim(1),
                timeout_ns: COLLECTIVE_TIMEOUT_NS,
            },
        })
    );
    assert!(probe.observations().virtual_time_ns >= COLLECTIVE_TIMEOUT_NS.max(before_ns));
    match clients[1].sync() {
        Err(ServerError::Collective {
            error: CollectiveError::CommunicatorFailed { reason, .. },
            ..
        }) => {
            assert!(reason.contains("never joined all_reduce #0"), "{reason}")
        }
        other => panic!("expected the absent device's own failure, got {other:?}"),
    }
    // Reported once; the next collective succeeds on both.
    let inputs = [Bytes::from_elems(&[5u32]), Bytes::from_elems(&[6u32])];
    let outputs = all_reduce_each(&clients, &inputs, ElemType::U32, ReduceOperation::Sum);
    for (c, out) in clients.iter().zip(outputs) {
        assert_eq!(c.read_one(out).unwrap().to_elems::<u32>(), vec![11]);
    }
}

fn cluster_probe(cluster: &SimCluster, ordinal: usize) -> SimProbe {
    cluster.devices()[ordinal].probe()
}

#[test]
fn a_dropped_peer_times_out_instead_of_hanging() {
    let mut clients = cluster(SimConfig::new(14), 2);
    let devices = ids(&clients);
    drop(clients.pop());
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1.0f32])).unwrap();
    c.all_reduce(h.clone(), h, ElemType::F32, devices, ReduceOperation::Max)
        .unwrap();
    assert!(matches!(
        c.sync(),
        Err(ServerError::Collective { error: CollectiveError::PeerTimeout { peer, .. }, .. }) if peer == sim(1)
    ));
}

#[test]
fn peers_with_different_sizes_fail_on_every_device() {
    let clients = cluster(SimConfig::new(15), 2);
    let inputs = [Bytes::from_elems(&[1u32]), Bytes::from_elems(&[1u32, 2])];
    all_reduce_each(&clients, &inputs, ElemType::U32, ReduceOperation::Sum);
    for c in &clients {
        match c.sync() {
            Err(ServerError::Collective {
                error: CollectiveError::Mismatch { reason },
                ..
            }) => assert_eq!(
                reason,
                "all_reduce #0 got rank 0: 4 bytes of u32, sum; rank 1: 8 bytes of u32, sum"
            ),
            other => panic!("expected a mismatch, got {other:?}"),
        }
    }
}

#[test]
fn bad_calls_are_refused_at_once() {
    let clients = cluster(SimConfig::new(16), 2);
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1u32, 2])).unwrap();
    let short = c.create(Bytes::from_elems(&[1u32])).unwrap();
    let foreign = clients[1].create(Bytes::from_elems(&[1u32, 2])).unwrap();
    let sum = ReduceOperation::Sum;
    let u32 = ElemType::U32;
    assert!(matches!(
        c.all_reduce(h.clone(), h.clone(), u32, vec![sim(1)], sum),
        Err(ServerError::Collective {
            error: CollectiveError::NotInCommunicator { .. },
            ..
        })
    ));
    assert!(matches!(
        c.all_reduce(h.clone(), h.clone(), u32, vec![sim(0), sim(0)], sum),
        Err(ServerError::Collective {
            error: CollectiveError::InvalidDevices { .. },
            ..
        })
    ));
    assert!(matches!(
        c.all_reduce(h.clone(), h.clone(), u32, vec![sim(0), sim(5)], sum),
        Err(ServerError::Collective {
            error: CollectiveError::InvalidDevices { .. },
            ..
        })
    ));
    assert!(matches!(
        c.all_reduce(h.clone(), short, u32, vec![sim(0)], sum),
        Err(ServerError::Io(IoError::SizeMismatch { .. }))
    ));
    assert!(matches!(
        c.all_reduce(h.clone(), foreign, u32, vec![sim(0)], sum),
        Err(ServerError::Io(IoError::WrongDevice { .. }))
    ));
    let odd = c.create(Bytes::from(vec![0u8; 6])).unwrap();
    assert!(matches!(
        c.to_client(odd, &clients[1], u32),
        Err(ServerError::Collective {
            error: CollectiveError::Mismatch { .. },
            ..
        })
    ));
    // Nothing was enqueued: the stream is healthy.
    c.sync().unwrap();
}

/// Runs the same two-device program and returns each device's trace hash and virtual time.
fn two_device_program(seed: u64) -> Vec<(u64, u64)> {
    let cluster = SimCluster::new(SimConfig::new(seed), 2);
    let probes: Vec<SimProbe> = cluster.devices().iter().map(|d| d.probe()).collect();
    let clients = clients(cluster);
    for round in 0..4u32 {
        let inputs = [
            Bytes::from_elems(&[round as f32 * 0.1, 3.0]),
            Bytes::from_elems(&[1.0f32, round as f32]),
        ];
        // Every handle the program does not read back drops at once, so releases interleave
        // with the collectives: the runtime submits them from this thread, in program order.
        all_reduce_each(&clients, &inputs, ElemType::F32, ReduceOperation::Mean);
        let src = clients[round as usize % 2]
            .create(Bytes::from_elems(&[round; 8]))
            .unwrap();
        let dst = &clients[(round as usize + 1) % 2];
        let copied = clients[round as usize % 2]
            .to_client(src, dst, ElemType::U32)
            .unwrap();
        assert_eq!(
            dst.read_one(copied).unwrap().to_elems::<u32>(),
            vec![round; 8]
        );
    }
    for c in &clients {
        c.sync().unwrap();
    }
    probes
        .iter()
        .map(|p| {
            let obs = p.observations();
            assert!(obs.reports.is_empty(), "sanitizer: {:?}", obs.reports);
            (obs.trace_hash, obs.virtual_time_ns)
        })
        .collect()
}

#[test]
fn collectives_replay_identically_whatever_the_threads_do() {
    let first = two_device_program(21);
    for _ in 0..4 {
        assert_eq!(two_device_program(21), first);
    }
}

/// Sanitizer reports of an all-reduce on stream 2 reading what stream 1 wrote.
fn reports_of_cross_stream_all_reduce(cross_stream_ordering: bool) -> Vec<String> {
    let device = SimDevice::new(SimConfig::new(30));
    let probe = device.probe();
    let options = ServerOptions {
        cross_stream_ordering,
        ..ServerOptions::default()
    };
    let client = ComputeClient::with_options(device, options);
    let (mut writer, mut reducer) = (client.clone(), client.clone());
    writer.set_stream(StreamId(1));
    reducer.set_stream(StreamId(2));
    let src = writer.create(Bytes::from_elems(&[1u32; 16])).unwrap();
    let dst = reducer.empty(64).unwrap();
    let devices = vec![reducer.peer_id()];
    reducer
        .all_reduce(
            src.clone(),
            dst.clone(),
            ElemType::U32,
            devices,
            ReduceOperation::Sum,
        )
        .unwrap();
    assert_eq!(
        reducer.read_one(dst).unwrap().to_elems::<u32>(),
        vec![1; 16]
    );
    writer.sync().unwrap();
    let observations = probe.observations();
    observations.reports.iter().map(|r| r.to_string()).collect()
}

#[test]
fn the_sanitizer_checks_collectives_like_any_access() {
    assert_eq!(
        reports_of_cross_stream_all_reduce(true),
        Vec::<String>::new()
    );
    // Without the runtime's event wait, the all-reduce races with the write it reads.
    let reports = reports_of_cross_stream_all_reduce(false);
    assert!(
        reports.iter().any(|r| r.contains("all_reduce")),
        "{reports:#?}"
    );
}

/// What a person reads when a collective goes wrong, from real runs where the simulator can
/// produce the error.
#[test]
fn collective_errors_say_what_went_wrong() {
    let absent = FaultPlan::scripted([ScriptedFault::at(FaultKind::PeerAbsent, 1)]);
    let cluster = SimCluster::from_configs(vec![
        SimConfig::new(40),
        SimConfig::new(41).with_faults(absent),
    ]);
    // Pinned, so that the messages name the same streams in every run of the test binary.
    let mut clients = clients(cluster);
    for (i, c) in clients.iter_mut().enumerate() {
        c.set_stream(StreamId(i as u64));
    }
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1u32, 2])).unwrap();
    let short = c.create(Bytes::from_elems(&[1u32])).unwrap();
    let odd = c.create(Bytes::from(vec![0u8; 6])).unwrap();
    let sum = ReduceOperation::Sum;
    let mut messages = vec![
        c.all_reduce(h.clone(), h.clone(), ElemType::U32, vec![sim(1)], sum),
        c.all_reduce(
            h.clone(),
            h.clone(),
            ElemType::U32,
            vec![sim(0), sim(0)],
            sum,
        ),
        c.all_reduce(
            h.clone(),
            h.clone(),
            ElemType::U32,
            vec![sim(0), sim(7)],
            sum,
        ),
        c.all_reduce(h.clone(), short, ElemType::U32, vec![sim(0)], sum),
        c.to_client(odd, &clients[1], ElemType::F32).map(|_| ()),
    ];
    let inputs = [Bytes::from_elems(&[1u32]), Bytes::from_elems(&[2u32])];
    all_reduce_each(&clients, &inputs, ElemType::U32, sum);
    messages.extend(clients.iter().map(|c| c.sync()));
    let inputs = [
        Bytes::from_elems(&[1.0f32]),
        Bytes::from_elems(&[1.0f32, 2.0]),
    ];
    all_reduce_each(&clients, &inputs, ElemType::F32, ReduceOperation::Max);
    messages.push(c.sync());
    messages.push(Err(ServerError::Collective {
        stream: StreamId(0),
        error: CollectiveError::Unsupported { device: sim(3) },
    }));
    let text: Vec<String> = messages
        .into_iter()
        .map(|m| m.expect_err("each case fails").to_string())
        .collect();
    insta::assert_snapshot!(text.join("\n"));
}

#[test]
fn calls_that_do_not_wait_for_the_device_return_before_the_peers_arrive() {
    // As on a GPU, only waiting for the device (sync, read) waits for the peers: allocating,
    // writing and flushing on device 0 before device 1 joins must not block.
    let clients = cluster(SimConfig::new(50), 2);
    let ids = ids(&clients);
    let h0 = clients[0].create(Bytes::from_elems(&[3u32; 8])).unwrap();
    clients[0]
        .all_reduce(
            h0.clone(),
            h0.clone(),
            ElemType::U32,
            ids.clone(),
            ReduceOperation::Max,
        )
        .unwrap();
    let other = clients[0].create(Bytes::from_elems(&[9u32])).unwrap();
    clients[0]
        .write(&other, Bytes::from_elems(&[10u32]))
        .unwrap();
    clients[0].flush().unwrap();
    let h1 = clients[1].create(Bytes::from_elems(&[5u32; 8])).unwrap();
    clients[1]
        .all_reduce(
            h1.clone(),
            h1.clone(),
            ElemType::U32,
            ids,
            ReduceOperation::Max,
        )
        .unwrap();
    assert_eq!(
        clients[0].read_one(h0).unwrap().to_elems::<u32>(),
        vec![5; 8]
    );
    assert_eq!(
        clients[1].read_one(h1).unwrap().to_elems::<u32>(),
        vec![5; 8]
    );
    assert_eq!(
        clients[0].read_one(other).unwrap().to_elems::<u32>(),
        vec![10]
    );
}

#[test]
fn a_collective_inside_a_capture_window_is_refused_once_the_window_closes() {
    let clients = cluster(SimConfig::new(60), 1);
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1u32; 4])).unwrap();
    c.graph_prepare().unwrap();
    c.start_capture().unwrap();
    c.all_reduce(
        h.clone(),
        h.clone(),
        ElemType::U32,
        ids(&clients),
        ReduceOperation::Sum,
    )
    .unwrap();
    let _graph = c.stop_capture().unwrap();
    assert_eq!(
        c.sync(),
        Err(ServerError::Capture(CaptureError::Refused {
            operation: "all_reduce",
            stream: c.stream_id(),
        }))
    );
    // Nothing ran: the data is as written, and the stream is healthy again.
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![1; 4]);
}

#[test]
fn a_sender_that_never_sends_fails_the_receiving_read() {
    let absent = FaultPlan::scripted([ScriptedFault::at(FaultKind::PeerAbsent, 1)]);
    let configs = vec![SimConfig::new(70).with_faults(absent), SimConfig::new(71)];
    let clients = clients(SimCluster::from_configs(configs));
    let (a, b) = (&clients[0], &clients[1]);
    let src = a.create(Bytes::from_elems(&[4u32; 4])).unwrap();
    let copied = a.to_client(src.clone(), b, ElemType::U32).unwrap();
    assert_eq!(
        b.read_one(copied),
        Err(ServerError::Collective {
            stream: b.stream_id(),
            error: CollectiveError::PeerTimeout {
                devices: vec![sim(0), sim(1)],
                sequence: 0,
                peer: sim(0),
                timeout_ns: COLLECTIVE_TIMEOUT_NS,
            },
        })
    );
    assert!(matches!(
        a.sync(),
        Err(ServerError::Collective {
            error: CollectiveError::CommunicatorFailed { .. },
            ..
        })
    ));
    // The next copy goes through.
    let copied = a.to_client(src, b, ElemType::U32).unwrap();
    assert_eq!(b.read_one(copied).unwrap().to_elems::<u32>(), vec![4; 4]);
}

#[test]
fn send_to_and_receive_from_copy_between_clients_that_hold_only_their_own() {
    // As across processes: each side calls its half; device 1 joins the communicator of all
    // three devices without copying anything.
    let clients = cluster(SimConfig::new(21), 3);
    let src = clients[0].create(Bytes::from_elems(&[5u32, 6, 7])).unwrap();
    clients[0].send_to(src, sim(2)).unwrap();
    clients[1]
        .ensure_init_collective(clients[1].enumerate_all_devices())
        .unwrap();
    let received = clients[2].receive_from(sim(0), 12).unwrap();
    assert_eq!(
        clients[2].read_one(received).unwrap().to_elems::<u32>(),
        vec![5, 6, 7]
    );
    let empty = clients[0].create(Bytes::from(Vec::new())).unwrap();
    clients[0].send_to(empty, sim(1)).unwrap();
    let nothing = clients[1].receive_from(sim(0), 0).unwrap();
    assert_eq!(clients[1].read_one(nothing).unwrap().len(), 0);
    for c in &clients {
        c.sync().unwrap();
    }
}

#[test]
fn point_to_point_copies_refuse_a_bad_peer_at_once() {
    let clients = cluster(SimConfig::new(22), 2);
    let c = &clients[0];
    let h = c.create(Bytes::from_elems(&[1u32])).unwrap();
    let message = |result: Result<(), ServerError>| match result {
        Err(ServerError::Collective { error, .. }) => error.to_string(),
        other => panic!("expected a refused collective, got {other:?}"),
    };
    insta::assert_snapshot!(message(c.send_to(h.clone(), sim(0))), @"invalid device list [0:0, 0:1]: 0:0 cannot copy to itself");
    insta::assert_snapshot!(message(c.send_to(h.clone(), sim(2))), @"device 0:2 is not one of the communicator's devices [0:0, 0:1]");
    insta::assert_snapshot!(message(c.receive_from(sim(3), 4).map(drop)), @"device 0:3 is not one of the communicator's devices [0:0, 0:1]");
    let alone = ComputeClient::new(SimDevice::new(SimConfig::new(22)));
    let other = alone.create(Bytes::from_elems(&[1u32])).unwrap();
    assert!(matches!(
        c.send_to(other, sim(1)),
        Err(ServerError::Io(IoError::WrongDevice { .. }))
    ));
    c.sync().unwrap();
}

/// A peer copy into a stream that captures a graph: the receive is no launch, so it was refused
/// inside the window while the send went out, and the next copy between the two devices paired
/// its receive with that first send, silently giving the first copy's bytes. A copy is refused
/// at the call while either stream captures, and the next copy carries its own bytes.
#[test]
fn a_peer_copy_is_refused_while_either_stream_captures() {
    let clients = cluster(SimConfig::new(80), 2);
    let (a, b) = (&clients[0], &clients[1]);
    let first = a.create(Bytes::from_elems(&[1u32; 4])).unwrap();
    for capturing in [b, a] {
        capturing.graph_prepare().unwrap();
        capturing.start_capture().unwrap();
        let refused = a.to_client(first.clone(), b, ElemType::U32).unwrap_err();
        assert_eq!(
            refused,
            ServerError::Capture(CaptureError::Refused {
                operation: "to_client",
                stream: capturing.stream_id(),
            })
        );
        let _graph = capturing.stop_capture().unwrap();
    }
    let second = a.create(Bytes::from_elems(&[2u32; 4])).unwrap();
    let copied = a.to_client(second, b, ElemType::U32).unwrap();
    assert_eq!(b.read_one(copied).unwrap().to_elems::<u32>(), vec![2; 4]);
    a.sync().unwrap();
    b.sync().unwrap();
}
