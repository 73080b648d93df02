//! Graphs: a captured launch sequence replays like the same launches run eagerly, keeps its
//! buffers alive, and the capture window refuses what it cannot record.

use lockstep::kernel::Scalar;
use lockstep::{
    Bytes, CaptureError, ComputeClient, CubeCount, Device, Graph, Handle, KernelArguments,
    ServerError, StreamId,
};
use proptest::collection::vec;
use proptest::prelude::*;

use super::{Failure, RunConfig, err, expect_baseline, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::elementwise::{KernelKind, WORKGROUP, fill};

const SLOTS: usize = 4;
const ELEMS: usize = 16;

#[derive(Clone, Debug)]
struct Launch {
    kernel: KernelKind,
    dst: usize,
    src: usize,
    k: u32,
}

#[derive(Clone, Debug)]
struct DecodeLoop {
    launches: Vec<Launch>,
    /// Slots whose handles the user drops after capture; the graph must keep them alive.
    dropped: Vec<bool>,
    /// Per replay: fresh input for slot 0, and an optional eager launch on another stream.
    replays: Vec<(Vec<u32>, Option<Launch>)>,
    seed: u64,
}

fn launch() -> impl Strategy<Value = Launch> {
    let kernel = prop_oneof![
        Just(KernelKind::AddConst),
        Just(KernelKind::MulAdd),
        Just(KernelKind::AtomicSum)
    ];
    (kernel, 0..SLOTS, 0..SLOTS, 0u32..4)
        .prop_filter("a writable binding must not alias", |(k, d, s, _)| {
            !k.has_src() || d != s
        })
        .prop_map(|(kernel, dst, src, k)| Launch {
            kernel,
            dst,
            src,
            k,
        })
}

fn decode_loop() -> impl Strategy<Value = DecodeLoop> {
    (
        vec(launch(), 1..=6),
        vec(any::<bool>(), SLOTS),
        vec(
            (vec(any::<u32>(), ELEMS), proptest::option::of(launch())),
            1..=5,
        ),
        any::<u64>(),
    )
        .prop_map(|(launches, mut dropped, replays, seed)| {
            // Slot 0 takes fresh inputs and slot 1 is read back: the user keeps both.
            dropped[0] = false;
            dropped[1] = false;
            DecodeLoop {
                launches,
                dropped,
                replays,
                seed,
            }
        })
}

fn enqueue<D: Device>(c: &ComputeClient<D>, handles: &[Handle], l: &Launch) -> Result<(), String> {
    let mut args = KernelArguments::new().binding(&handles[l.dst]);
    if l.kernel.has_src() {
        args = args.binding(&handles[l.src]);
    }
    if l.kernel != KernelKind::AtomicSum {
        args = args.param(Scalar::U32(l.k));
    }
    let count = CubeCount::Static(l.kernel.workgroups(ELEMS, ELEMS), 1, 1);
    c.launch(&l.kernel.kernel(), count, args)
        .map_err(|e| format!("launch refused: {e}"))
}

fn apply(model: &mut [Vec<u32>], l: &Launch) {
    let src = model[l.src].clone();
    l.kernel.reference(&mut model[l.dst], &src, l.k);
}

fn refused(result: Result<(), ServerError>, operation: &str) -> Result<(), String> {
    match result {
        Err(ServerError::Capture(CaptureError::Refused { operation: op, .. }))
            if op == operation =>
        {
            Ok(())
        }
        other => Err(format!(
            "{operation} inside the capture window: expected a refusal, got {other:?}"
        )),
    }
}

/// A decode loop: the launches run eagerly once (the warm-up), are captured, and the graph is
/// replayed with fresh input after the user dropped some of its buffers, beside eager launches
/// on another stream; every replay reads back what eager execution gives.
pub(super) fn graph_replay<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(config, "graph_replay", decode_loop(), |case| {
        let session = factory.open(case.seed);
        let baseline = session.client.memory_usage().map_err(|e| e.to_string())?;
        let mut c = session.client.clone();
        c.set_stream(StreamId(0));
        let mut other = session.client.clone();
        other.set_stream(StreamId(1));

        let mut model: Vec<Vec<u32>> = (0..SLOTS).map(|s| vec![s as u32 + 1; ELEMS]).collect();
        c.graph_prepare().map_err(err("graph_prepare"))?;
        let handles: Vec<Handle> = model
            .iter()
            .map(|m| c.create(Bytes::from_elems(m)))
            .collect::<Result<_, _>>()
            .map_err(err("create"))?;
        // The warm-up run: the same launches, eagerly.
        for l in &case.launches {
            enqueue(&c, &handles, l)?;
            apply(&mut model, l);
        }
        c.sync().map_err(err("sync after warm-up"))?;

        let graph = capture(&c, &handles, &case.launches)?;
        // Nothing ran during the capture.
        let out = c
            .read_one(handles[1].clone())
            .map_err(err("read after capture"))?;
        ensure!(
            out.to_elems::<u32>() == model[1],
            "the captured launches ran during the capture"
        );

        let kept: Vec<Option<Handle>> = handles
            .into_iter()
            .zip(&case.dropped)
            .map(|(handle, &drop_it)| (!drop_it).then_some(handle))
            .collect();
        replay(&other, &graph, &kept, &mut model, &case)?;
        c.sync().map_err(err("sync after replays"))?;
        drop(graph);
        drop(kept);
        expect_baseline(&session.client, baseline)?;
        expect_clean(&session)
    })
}

/// Captures `launches` on `c`'s prepared stream, checking on the way that the window refuses a
/// read, `sync`, `flush` and a second `start_capture`, and that once it is closed `stop_capture`
/// and `start_capture` are refused as out of order.
fn capture<D: Device>(
    c: &ComputeClient<D>,
    handles: &[Handle],
    launches: &[Launch],
) -> Result<Graph<D>, String> {
    c.start_capture().map_err(err("start_capture"))?;
    for l in launches {
        enqueue(c, handles, l)?;
    }
    refused(c.read_one(handles[1].clone()).map(|_| ()), "read")?;
    refused(c.sync(), "sync")?;
    refused(c.flush(), "flush")?;
    match c.start_capture() {
        Err(ServerError::Capture(CaptureError::AlreadyCapturing { .. })) => {}
        other => return Err(format!("a second start_capture: {other:?}")),
    }
    let graph = c.stop_capture().map_err(err("stop_capture"))?;
    match c.stop_capture() {
        Err(ServerError::Capture(CaptureError::NotCapturing { .. })) => {}
        other => return Err(format!("stop_capture without a capture: {other:?}")),
    }
    match c.start_capture() {
        Err(ServerError::Capture(CaptureError::NotPrepared { .. })) => {}
        other => return Err(format!("start_capture without graph_prepare: {other:?}")),
    }
    Ok(graph)
}

/// Replays `graph` once per case replay from `other`'s stream: fresh input into slot 0, an
/// eager launch first when its slots are kept, then the graph; slot 1 must read as `model`,
/// which applies the same launches.
fn replay<D: Device>(
    other: &ComputeClient<D>,
    graph: &Graph<D>,
    kept: &[Option<Handle>],
    model: &mut [Vec<u32>],
    case: &DecodeLoop,
) -> Result<(), String> {
    for (replay, (input, eager)) in case.replays.iter().enumerate() {
        let input_handle = kept[0].as_ref().expect("slot 0 is kept");
        other
            .write(input_handle, Bytes::from_elems(input))
            .map_err(|e| format!("write: {e}"))?;
        model[0] = input.clone();
        if let Some(l) = eager
            .as_ref()
            .filter(|l| kept[l.dst].is_some() && kept[l.src].is_some())
        {
            let live: Vec<Handle> = kept
                .iter()
                .map(|h| h.clone().unwrap_or_else(|| input_handle.clone()))
                .collect();
            enqueue(other, &live, l)?;
            apply(model, l);
        }
        graph.replay();
        for l in &case.launches {
            apply(model, l);
        }
        let out_handle = kept[1].clone().expect("slot 1 is kept");
        let out = other
            .read_one(out_handle)
            .map_err(err("read after replay"))?;
        ensure!(
            out.to_elems::<u32>() == model[1],
            "replay {replay}: read {:?}, eager execution gives {:?}",
            out.to_elems::<u32>(),
            model[1]
        );
    }
    Ok(())
}

/// What a capture window is given that it cannot record; or `FirstUse`, which it can: the
/// first use, in the window, of an `empty` handle allocated before it (the runtime registers
/// such an allocation at its first use, which must not count as an allocation in the capture).
#[derive(Clone, Copy, Debug)]
enum Intrusion {
    Write,
    Allocate,
    Both,
    FirstUse,
}

pub(super) fn capture_refusals<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let intrusion = prop_oneof![
        Just(Intrusion::Write),
        Just(Intrusion::Allocate),
        Just(Intrusion::Both),
        Just(Intrusion::FirstUse)
    ];
    run_cases(
        config,
        "capture_refusals",
        (any::<u64>(), intrusion),
        |(seed, intrusion)| {
            let session = factory.open(seed);
            let mut c = session.client.clone();
            c.set_stream(StreamId(3));
            let hardware = c.features().graphs == lockstep::GraphSupport::Hardware;
            let handle = c
                .create(Bytes::from_elems(&[5u32; 8]))
                .map_err(|e| e.to_string())?;
            let early = c.empty(ELEMS * 4).map_err(|e| e.to_string())?;
            c.graph_prepare().map_err(|e| e.to_string())?;
            c.start_capture().map_err(|e| e.to_string())?;
            let _late = intrude(&c, intrusion, &handle, &early)?;
            let stopped = c.stop_capture();
            judge_stop(&c, intrusion, hardware, stopped, &early)?;
            // The capture ended: the stream works again and a refused write never happened.
            let bytes = c
                .read_one(handle)
                .map_err(|e| format!("read after the capture: {e}"))?;
            ensure!(
                bytes.to_elems::<u32>() == vec![5u32; 8],
                "the refused write reached the buffer"
            );
            c.sync().map_err(|e| e.to_string())?;
            expect_clean(&session)
        },
    )
}

/// Does in the capture window what `intrusion` says: launches on `early` for its first use,
/// allocates (the allocation is returned, to outlive the window), writes `handle`.
fn intrude<D: Device>(
    c: &ComputeClient<D>,
    intrusion: Intrusion,
    handle: &Handle,
    early: &Handle,
) -> Result<Option<Handle>, String> {
    if let Intrusion::FirstUse = intrusion {
        let args = KernelArguments::new().binding(early).param(Scalar::U32(9));
        let count = CubeCount::Static((ELEMS as u32).div_ceil(WORKGROUP), 1, 1);
        c.launch(&fill(), count, args)
            .map_err(|e| format!("first use in the window: {e}"))?;
    }
    let late = match intrusion {
        Intrusion::Allocate | Intrusion::Both => Some(
            c.empty(64)
                .map_err(|e| format!("empty in the window: {e}"))?,
        ),
        Intrusion::Write | Intrusion::FirstUse => None,
    };
    if matches!(intrusion, Intrusion::Write | Intrusion::Both) {
        c.write(handle, Bytes::from_elems(&[6u32; 8]))
            .map_err(|e| format!("write in the window: {e}"))?;
    }
    Ok(late)
}

/// `stop_capture` fails for a write in the window, and for an allocation where graphs are the
/// hardware's; a software graph merely wastes the allocation, and a first use of memory
/// allocated before the window is recorded like any launch (its replay fills `early`).
fn judge_stop<D: Device>(
    c: &ComputeClient<D>,
    intrusion: Intrusion,
    hardware: bool,
    stopped: Result<Graph<D>, ServerError>,
    early: &Handle,
) -> Result<(), String> {
    match (intrusion, stopped) {
        (
            Intrusion::Write | Intrusion::Both,
            Err(ServerError::Capture(CaptureError::WriteInCapture { .. })),
        ) => Ok(()),
        (
            Intrusion::Allocate,
            Err(ServerError::Capture(CaptureError::AllocationInCapture { .. })),
        ) if hardware => Ok(()),
        (Intrusion::Allocate, Ok(graph)) if !hardware => {
            drop(graph);
            Ok(())
        }
        (Intrusion::FirstUse, Ok(graph)) => {
            graph.replay();
            let filled = c
                .read_one(early.clone())
                .map_err(|e| format!("read of the replayed fill: {e}"))?;
            ensure!(
                filled.to_elems::<u32>() == vec![9u32; ELEMS],
                "the replayed fill did not reach its output"
            );
            Ok(())
        }
        (intrusion, other) => Err(format!(
            "stop_capture after {intrusion:?} (hardware graphs: {hardware}): {other:?}"
        )),
    }
}
