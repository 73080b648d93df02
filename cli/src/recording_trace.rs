//! A recording as a Chrome/Perfetto trace (`lockstep recording PATH --perfetto FILE`; JSON
//! trace-event format, opens in ui.perfetto.dev): the recorded run on its own clock. One
//! process per recorded device; a track per host thread holds each call as a slice from its
//! issue to its return (a call that returns no outcome, such as a launch, gets a sliver), named
//! by its kind, with its number, stream and arguments; a track per stream repeats each call on
//! the stream it went to, so that the streams' use over time shows; an error returned is an
//! instant on the thread's track, its message an argument.

use std::collections::BTreeMap;

use lockstep::record::{Event, Outcome, brief};
use serde_json::{Value, json};

/// Width (µs) of a call that returns no outcome: wide enough to select.
const SLIVER_US: f64 = 0.1;

/// Stream tracks' ids start here, after any plausible host thread number, in order of the
/// streams' first calls (stream ids themselves can pass what trace viewers read as a track id).
const STREAM_TRACKS: u64 = 1 << 20;

/// The trace-event JSON of a recording's `events`, in file order.
pub fn trace_json(events: &[Event]) -> Value {
    let returned: BTreeMap<u64, (u64, &Outcome)> = events
        .iter()
        .filter_map(|event| match event {
            Event::Outcome {
                call,
                outcome,
                at_ns,
            } => Some((*call, (*at_ns, outcome))),
            _ => None,
        })
        .collect();
    let mut trace = Vec::new();
    let mut tracks = BTreeMap::new();
    let mut stream_tracks: BTreeMap<(u32, u64), u64> = BTreeMap::new();
    for event in events {
        match event {
            Event::Device(device) => trace.push(json!({
                "ph": "M", "name": "process_name", "pid": device.device,
                "args": { "name": format!("device {}: {}", device.device, device.name) },
            })),
            Event::Call {
                call,
                device,
                thread,
                stream,
                op,
                at_ns,
            } => {
                let thread_track = u64::from(*thread);
                let next = STREAM_TRACKS + stream_tracks.len() as u64;
                let stream_track = *stream_tracks.entry((*device, *stream)).or_insert(next);
                tracks.insert((*device, thread_track), format!("thread {thread}"));
                tracks.insert((*device, stream_track), format!("stream {stream}"));
                let outcome = returned.get(call);
                let ts = micros(*at_ns);
                let dur = outcome.map_or(SLIVER_US, |(end, _)| {
                    micros(end.saturating_sub(*at_ns)).max(SLIVER_US)
                });
                let args = json!({ "call": call, "stream": stream, "thread": thread, "what": brief(event) });
                for tid in [thread_track, stream_track] {
                    trace.push(json!({
                        "ph": "X", "name": op.kind(), "cat": "call", "pid": device, "tid": tid,
                        "ts": ts, "dur": dur, "args": args,
                    }));
                }
                if let Some((end, Outcome::Err(message))) = outcome {
                    trace.push(json!({
                        "ph": "i", "s": "t", "name": "error", "cat": "error", "pid": device,
                        "tid": thread_track, "ts": micros(*end),
                        "args": { "call": call, "error": message },
                    }));
                }
            }
            _ => {}
        }
    }
    for ((device, tid), name) in tracks {
        trace.push(json!({
            "ph": "M", "name": "thread_name", "pid": device, "tid": tid,
            "args": { "name": name },
        }));
    }
    json!({ "traceEvents": trace, "displayTimeUnit": "ns" })
}

/// Nanoseconds as the microseconds trace events count in.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}
