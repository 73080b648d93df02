//! Graph capture and synchronisation: each stream's capture state machine (Idle → Prepared →
//! Capturing → Idle, a call out of order refused and changing nothing), replays, and the
//! flushes and syncs that return a stream's failures once each.

use lockstep::{CaptureError, ServerError, StreamId};

use super::ops::{Op, stream};
use super::world::{Capture, GRAPHS, GraphSlot, STREAMS, World, Wrote};

pub(super) fn step(world: &mut World, op: &Op) -> Result<(), String> {
    match *op {
        Op::Prepare { dev, stream: s } => prepare(world, world.device(dev), stream(s)),
        Op::StartCapture { dev, stream: s } => start(world, world.device(dev), stream(s)),
        Op::StopCapture {
            dev,
            stream: s,
            graph,
        } => stop(world, world.device(dev), stream(s), Some(graph)),
        Op::Replay { graph } => {
            replay(world, graph);
            Ok(())
        }
        Op::DropGraph { graph } => {
            world.graphs[graph as usize % GRAPHS] = None;
            Ok(())
        }
        Op::Sync {
            dev,
            stream: s,
            which,
        } => sync(world, world.device(dev), stream(s), which % 4),
        _ => unreachable!("ops::step routes only graph and sync operations here"),
    }
}

fn prepare(world: &mut World, device: usize, s: usize) -> Result<(), String> {
    let result = world.client(device, s).graph_prepare();
    let state = world.stream_mut(device, s);
    match (result, &state.capture) {
        (
            Err(ServerError::Capture(CaptureError::AlreadyCapturing { .. })),
            Capture::Capturing { .. },
        ) => Ok(()),
        (Ok(()), Capture::Idle | Capture::Prepared) => {
            state.capture = Capture::Prepared;
            Ok(())
        }
        (result, _) => Err(format!("graph_prepare: {result:?}")),
    }
}

fn start(world: &mut World, device: usize, s: usize) -> Result<(), String> {
    let result = world.client(device, s).start_capture();
    let state = world.stream_mut(device, s);
    match (result, &state.capture) {
        (Err(ServerError::Capture(CaptureError::NotPrepared { .. })), Capture::Idle)
        | (
            Err(ServerError::Capture(CaptureError::AlreadyCapturing { .. })),
            Capture::Capturing { .. },
        ) => Ok(()),
        (Ok(()), Capture::Prepared) => {
            state.capture = Capture::Capturing {
                wrote: Wrote::No,
                writes: Vec::new(),
            };
            Ok(())
        }
        // The fault record cannot be made while the stream holds a failure: it is returned.
        (Err(err), Capture::Prepared) if state.excuses(&err) => Ok(()),
        (result, _) => Err(format!("start_capture: {result:?}")),
    }
}

/// `stop_capture` on a stream; the graph goes to graph slot `into` (or is dropped).
fn stop(world: &mut World, device: usize, s: usize, into: Option<u8>) -> Result<(), String> {
    let result = world.client(device, s).stop_capture();
    let state = world.stream_mut(device, s);
    let before = std::mem::take(&mut state.capture);
    match (result, before) {
        (
            Err(ServerError::Capture(CaptureError::NotCapturing { .. })),
            before @ (Capture::Idle | Capture::Prepared),
        ) => {
            state.capture = before;
            Ok(())
        }
        (
            Ok(graph),
            Capture::Capturing {
                wrote: Wrote::No | Wrote::Maybe,
                writes,
            },
        ) => {
            if let Some(into) = into {
                world.graphs[into as usize % GRAPHS] = Some(GraphSlot {
                    graph,
                    device,
                    stream: s,
                    writes,
                });
            }
            Ok(())
        }
        (
            Err(ServerError::Capture(CaptureError::WriteInCapture { .. })),
            Capture::Capturing {
                wrote: Wrote::Yes | Wrote::Maybe,
                ..
            },
        ) => Ok(()),
        (result, _) => Err(format!("stop_capture: {result:?}")),
    }
}

/// Ends stream `s`'s capture window, if open (the end of an input).
pub(super) fn close(world: &mut World, device: usize, s: usize) -> Result<(), String> {
    if world.stream(device, s).capturing() {
        stop(world, device, s, None)?;
    }
    Ok(())
}

/// Replays a graph: its launches may write what they captured, and fail (or the replay is
/// refused, if its stream captures now: a failure too).
fn replay(world: &mut World, graph: u8) {
    let Some(slot) = &world.graphs[graph as usize % GRAPHS] else {
        return;
    };
    slot.graph.replay();
    let (device, s, writes) = (slot.device, slot.stream, slot.writes.clone());
    world.forget(&writes);
    world.stream_mut(device, s).dirty = true;
}

/// `flush` (0), `sync` (1), `sync_all` (2) or `sync_collective` (3).
fn sync(world: &mut World, device: usize, s: usize, which: u8) -> Result<(), String> {
    let c = world.client(device, s);
    let state = world.stream(device, s);
    match which {
        0 => match c.flush() {
            Ok(()) if state.capturing() => Err("flush inside a capture window".into()),
            Ok(()) => Ok(()),
            Err(err) => state.check_blocking("flush", &err),
        },
        2 => sync_all(world, device),
        _ => {
            let result = if which == 1 {
                c.sync()
            } else {
                c.sync_collective()
            };
            match result {
                Ok(()) if state.capturing() => Err("sync inside a capture window".into()),
                Ok(()) => {
                    world.stream_mut(device, s).dirty = false;
                    Ok(())
                }
                Err(err) => state.check_blocking("sync", &err),
            }
        }
    }
}

/// `sync_all`: refused while any stream of the device captures; else the first failure of a
/// dirty stream, naming it, or `Ok` with every stream healthy.
fn sync_all(world: &mut World, device: usize) -> Result<(), String> {
    let result = world.client(device, 0).sync_all();
    let streams = &world.devices[device].streams;
    let capturing = streams.iter().any(|s| s.capturing());
    match result {
        Err(ServerError::Capture(CaptureError::Refused { .. })) if capturing => Ok(()),
        Ok(()) if !capturing => {
            let streams = &mut world.devices[device].streams;
            streams.iter_mut().for_each(|s| s.dirty = false);
            Ok(())
        }
        Err(err) if !capturing => {
            let named = err
                .stream()
                .map(|StreamId(k)| k as usize)
                .filter(|&k| k < STREAMS);
            match named {
                Some(k) if streams[k].dirty && streams[k].excuses(&err) => Ok(()),
                _ => Err(format!("sync_all: {err:?}")),
            }
        }
        result => Err(format!(
            "sync_all (a stream captures: {capturing}): {result:?}"
        )),
    }
}
