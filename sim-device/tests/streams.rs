//! Streams made visible: `sync_all` over every stream and failures that name their stream
//! (issue 16; the tracing that names the stream of every call is `stream_events.rs`).

use lockstep::{Bytes, CaptureError, ComputeClient, ServerError, StreamId};
use lockstep_sim::{
    FaultKind, FaultPlan, InjectedFault, ScriptedFault, SimConfig, SimDevice, SimProbe,
};

#[expect(dead_code, reason = "these tests launch no kernel")]
mod common;
use common::pinned;

fn client_with(faults: Vec<ScriptedFault>) -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(SimConfig::new(21).with_faults(FaultPlan::scripted(faults)));
    let probe = device.probe();
    (ComputeClient::new(device), probe)
}

fn transfer_failure(stream: u64, nth: u64, count: u64) -> ScriptedFault {
    ScriptedFault::window(FaultKind::TransferFailure, nth, count)
        .on_stream(StreamId(stream))
        .expect("a transfer belongs to a stream")
}

#[test]
fn sync_all_returns_every_failure_once_streams_in_order_each_oldest_first() {
    // Stream 0's second transfer fails, and stream 2's first two; stream 1's none.
    let (c, probe) = client_with(vec![transfer_failure(0, 2, 1), transfer_failure(2, 1, 2)]);
    let (s0, s1, s2) = (pinned(&c, 0), pinned(&c, 1), pinned(&c, 2));
    let h2 = s2.create(Bytes::from_elems(&[3u32])).unwrap();
    s2.write(&h2, Bytes::from_elems(&[4u32])).unwrap();
    let h0 = s0.create(Bytes::from_elems(&[1u32])).unwrap();
    s0.write(&h0, Bytes::from_elems(&[5u32])).unwrap();
    let h1 = s1.create(Bytes::from_elems(&[2u32])).unwrap();

    let mut surfaced = Vec::new();
    while let Err(err) = c.sync_all() {
        let id = InjectedFault::id_in(&err.to_string()).expect("an injected failure");
        surfaced.push((err.stream().expect("a stream's failure"), id));
    }
    let injected = probe.observations().faults.clone();
    let id_on = |stream: u64, nth: usize| {
        injected
            .iter()
            .filter(|f| f.stream_id == Some(StreamId(stream)))
            .nth(nth)
            .expect("injected")
            .id
    };
    assert_eq!(
        surfaced,
        vec![
            (StreamId(0), id_on(0, 0)),
            (StreamId(2), id_on(2, 0)),
            (StreamId(2), id_on(2, 1)),
        ]
    );
    // Each was returned once: the streams' own syncs find nothing more.
    for s in [&s0, &s1, &s2] {
        s.sync().unwrap();
    }
    // A failed write leaves its target as it was; stream 2's create never wrote.
    assert_eq!(s0.read_one(h0).unwrap().to_elems::<u32>(), vec![1]);
    assert_eq!(s1.read_one(h1).unwrap().to_elems::<u32>(), vec![2]);
    drop(h2);
}

#[test]
fn sync_all_waits_for_the_work_of_every_thread() {
    // Nothing runs in the background: work runs only when something waits for it.
    let config = SimConfig {
        max_background_steps: 0,
        ..SimConfig::new(22)
    };
    let device = SimDevice::new(config);
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let handle = c.empty(4 << 10).unwrap();
    let worker = c.clone();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 0..8u32 {
                worker
                    .write_at(&handle, u64::from(i) * 512, Bytes::from(vec![i as u8; 512]))
                    .unwrap();
            }
        });
    });
    // This thread's stream holds nothing of the worker's: its sync leaves the writes queued.
    c.sync().unwrap();
    let observed = probe.observations().clone();
    assert!(
        observed.ops_executed < observed.ops_enqueued,
        "{observed:?}"
    );
    c.sync_all().unwrap();
    let observed = probe.observations().clone();
    assert_eq!(observed.ops_executed, observed.ops_enqueued);
}

#[test]
fn sync_all_is_refused_while_a_stream_captures() {
    let (c, _) = client_with(Vec::new());
    let capturing = pinned(&c, 3);
    let other = pinned(&c, 4);
    let h = other.create(Bytes::from_elems(&[1u32])).unwrap();
    capturing.graph_prepare().unwrap();
    capturing.start_capture().unwrap();
    assert_eq!(
        other.sync_all(),
        Err(ServerError::Capture(CaptureError::Refused {
            operation: "sync_all",
            stream: StreamId(3),
        }))
    );
    let graph = capturing.stop_capture().unwrap();
    other.sync_all().unwrap();
    drop((graph, h));
}
