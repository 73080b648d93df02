//! A simulated run as a Chrome/Perfetto trace (JSON trace-event format, opens in
//! ui.perfetto.dev): one track per stream, a slice per operation, a flow from each recorded
//! event to the waits on it, a counter of device memory, and each sanitizer report as an
//! instant event on the track of the operation that raised it (the report's text its `report`
//! argument).

use lockstep_sim::TraceEntry;
use serde_json::{Value, json};

/// Markers and waits take no virtual time; they get this width (µs) so flows can attach.
const INSTANT_US: f64 = 0.001;

/// The trace-event JSON of `entries`, in execution order.
pub fn trace_json(entries: &[TraceEntry]) -> Value {
    let mut events = Vec::with_capacity(entries.len() * 2);
    let mut streams: Vec<u32> = entries.iter().map(|e| e.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for stream in streams {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": 0, "tid": stream,
            "args": { "name": format!("stream {stream}") },
        }));
    }
    for entry in entries {
        let ts = entry.start_ns as f64 / 1000.0;
        let dur = (entry.duration_ns as f64 / 1000.0).max(INSTANT_US);
        let name = match (entry.op, entry.marker) {
            ("launch", _) => format!("launch {}", entry.detail),
            ("marker", Some(id)) => format!("record event {id}"),
            ("wait", Some(id)) => format!("wait event {id}"),
            (op, _) => op.to_owned(),
        };
        events.push(json!({
            "ph": "X", "name": name, "cat": entry.op, "pid": 0, "tid": entry.stream,
            "ts": ts, "dur": dur, "args": { "detail": entry.detail },
        }));
        match (entry.op, entry.marker) {
            ("marker", Some(id)) => events.push(json!({
                "ph": "s", "name": "event", "cat": "event", "id": id, "pid": 0,
                "tid": entry.stream, "ts": ts,
            })),
            ("wait", Some(id)) => events.push(json!({
                "ph": "f", "bp": "e", "name": "event", "cat": "event", "id": id, "pid": 0,
                "tid": entry.stream, "ts": ts,
            })),
            _ => {}
        }
        for report in &entry.reports {
            events.push(json!({
                "ph": "i", "s": "t", "name": "sanitizer report", "cat": "sanitizer", "pid": 0,
                "tid": entry.stream, "ts": ts, "args": { "report": report, "operation": name },
            }));
        }
        events.push(json!({
            "ph": "C", "name": "device memory", "pid": 0, "ts": ts,
            "args": { "bytes": entry.bytes_live },
        }));
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ns" })
}

/// One line per sanitizer report of `entries`, naming the operation that raised it, its
/// stream and virtual time: what `lockstep replay` prints.
pub fn report_lines(entries: &[TraceEntry]) -> Vec<String> {
    entries
        .iter()
        .flat_map(|entry| {
            entry.reports.iter().map(move |report| {
                format!(
                    "sanitizer report at {} ns on stream {} ({} {}): {report}",
                    entry.start_ns, entry.stream, entry.op, entry.detail
                )
            })
        })
        .collect()
}
