//! A recording's summary (`lockstep recording PATH`): calls by kind, devices, streams, threads,
//! bytes, kernels and errors, folded one event at a time so a file of any size streams.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::format::{Data, DeviceRecord, Event, Op, Outcome, Range};

/// What a recording holds, counted. Build it with [`add`](Self::add) per event; `Display`
/// prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// The recording process, if its event was read.
    pub pid: Option<u32>,
    /// Devices, by recording number.
    pub devices: BTreeMap<u32, DeviceRecord>,
    /// Calls, by kind.
    pub calls: BTreeMap<String, u64>,
    /// Streams called, with their call counts.
    pub streams: BTreeMap<u64, u64>,
    /// Threads that called.
    pub threads: BTreeSet<u32>,
    /// Bytes of creates and writes (saturating at `u64::MAX`, as the other byte counts).
    pub bytes_written: u64,
    /// Of which the recording holds only a hash.
    pub bytes_written_hashed: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Kernels by name, with their launch counts (launches name kernels by hash).
    pub kernels: BTreeMap<String, u64>,
    /// Errors returned: (call, message), in file order.
    pub errors: Vec<(u64, String)>,
    /// Kernel names by hash, to name launches.
    names: BTreeMap<u64, String>,
}

impl Summary {
    /// Counts `event`.
    pub fn add(&mut self, event: &Event) {
        match event {
            Event::Process { pid, .. } => self.pid = Some(*pid),
            Event::Device(device) => {
                self.devices.insert(device.device, device.clone());
            }
            Event::Kernel { hash, def } => {
                self.names.insert(*hash, def.name.clone());
                self.kernels.entry(def.name.clone()).or_insert(0);
            }
            Event::Call {
                call,
                thread,
                stream,
                op,
                ..
            } => self.add_call(*call, *thread, *stream, op),
            Event::Outcome { call, outcome, .. } => match outcome {
                Outcome::Ok => {}
                Outcome::Read(ranges) => {
                    let bytes = ranges.iter().map(|r| r.hashes.len);
                    self.bytes_read = bytes.fold(self.bytes_read, u64::saturating_add);
                }
                Outcome::Err(message) => self.errors.push((*call, message.clone())),
            },
        }
    }

    fn add_call(&mut self, call: u64, thread: u32, stream: u64, op: &Op) {
        *self.calls.entry(op.kind().to_owned()).or_insert(0) += 1;
        *self.streams.entry(stream).or_insert(0) += 1;
        self.threads.insert(thread);
        let data = match op {
            Op::Create { data: Some(d), .. } | Op::Write { data: d, .. } => Some(d),
            _ => None,
        };
        // Lengths are the file's word: a corrupted one must not overflow the totals.
        if let Some(data) = data {
            self.bytes_written = self.bytes_written.saturating_add(data.len());
            if let Data::Hash { len, .. } = data {
                self.bytes_written_hashed = self.bytes_written_hashed.saturating_add(*len);
            }
        }
        match op {
            Op::Launch { kernel, .. } => {
                let name = self.names.get(kernel).cloned();
                let name = name.unwrap_or_else(|| format!("kernel {kernel:#018x}"));
                *self.kernels.entry(name).or_insert(0) += 1;
            }
            Op::Refused { error, .. } => self.errors.push((call, error.clone())),
            _ => {}
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pid = self.pid.map_or("?".to_owned(), |p| p.to_string());
        writeln!(f, "process {pid}")?;
        writeln!(f, "devices: {}", self.devices.len())?;
        for d in self.devices.values() {
            let index = d
                .index
                .map_or("unregistered".to_owned(), |i| format!("index {i}"));
            writeln!(
                f,
                "  {}: {} (backend {}, {index})",
                d.device, d.name, d.backend
            )?;
        }
        let total: u64 = self.calls.values().sum();
        writeln!(f, "calls: {total}")?;
        for (kind, n) in &self.calls {
            writeln!(f, "  {kind}: {n}")?;
        }
        writeln!(f, "streams: {}", self.streams.len())?;
        for (stream, n) in &self.streams {
            writeln!(f, "  {stream}: {n} calls")?;
        }
        writeln!(f, "threads: {}", self.threads.len())?;
        writeln!(
            f,
            "bytes: {} written ({} of them as hashes), {} read",
            self.bytes_written, self.bytes_written_hashed, self.bytes_read
        )?;
        writeln!(f, "kernels: {}", self.kernels.len())?;
        for (name, n) in &self.kernels {
            writeln!(f, "  {name}: {n} launches")?;
        }
        writeln!(f, "errors: {}", self.errors.len())?;
        for (call, message) in &self.errors {
            writeln!(f, "  call {call}: {message}")?;
        }
        Ok(())
    }
}

/// One line for `event`, for people (`lockstep recording --events`): data and hashes elided.
pub fn brief(event: &Event) -> String {
    match event {
        Event::Process {
            pid,
            data_bytes_max,
        } => format!("process {pid}, data kept up to {data_bytes_max} bytes"),
        Event::Device(d) => format!("device {}: {} (backend {})", d.device, d.name, d.backend),
        Event::Kernel { hash, def } => format!("kernel {hash:#018x}: {}", def.name),
        Event::Call {
            call,
            device,
            thread,
            stream,
            op,
            ..
        } => format!(
            "call {call} (device {device}, thread {thread}, stream {stream}): {}",
            brief_op(op)
        ),
        Event::Outcome { call, outcome, .. } => match outcome {
            Outcome::Ok => format!("call {call} returned Ok"),
            Outcome::Read(ranges) => format!("call {call} read {} ranges", ranges.len()),
            Outcome::Err(err) => format!("call {call} returned an error: {err}"),
        },
    }
}

/// When `event` happened, for a call or an outcome: milliseconds since the recorder opened
/// (`lockstep recording --events` prints it before [`brief`], which leaves it out so that a
/// listing of calls reads the same in every run).
pub fn time_of(event: &Event) -> Option<String> {
    match event {
        Event::Call { at_ns, .. } | Event::Outcome { at_ns, .. } => {
            Some(format!("{:.3} ms", *at_ns as f64 / 1e6))
        }
        _ => None,
    }
}

fn brief_range(r: &Range) -> String {
    format!("{}[{}..{}]", r.buffer, r.offset, r.offset + r.len)
}

fn brief_data(data: &Data) -> &'static str {
    match data {
        Data::Bytes(_) => "bytes",
        Data::Hash { .. } => "a hash",
    }
}

fn brief_op(op: &Op) -> String {
    let ranges = |ranges: &[Range]| {
        let all: Vec<String> = ranges.iter().map(brief_range).collect();
        all.join(", ")
    };
    match op {
        Op::Create {
            buffer,
            bytes,
            data,
        } => {
            let data = data.as_ref().map_or("nothing", brief_data);
            format!("create {buffer} of {bytes} bytes, filled with {data}")
        }
        Op::Write { range, data } => {
            format!("write {} with {}", brief_range(range), brief_data(data))
        }
        Op::Launch {
            kernel,
            count,
            bindings,
            params,
            dry_run,
        } => format!(
            "launch {kernel:#018x} {count:?} on {} with {params:?}{}",
            ranges(bindings),
            if *dry_run { " (dry run)" } else { "" }
        ),
        Op::Read { ranges: read } => format!("read {}", ranges(read)),
        Op::Compile { kernel } => format!("compile {kernel:#018x}"),
        Op::Release { buffer } => format!("release {buffer}"),
        Op::Refused { name, error } => format!("{name} refused: {error}"),
        Op::Other { name, writes } => format!("{name} (writes {})", ranges(writes)),
        Op::GraphReplay { graph } => format!("replay the graph of call {graph}"),
        Op::GraphRelease { graph } => format!("release the graph of call {graph}"),
        Op::Flush
        | Op::Sync
        | Op::SyncAll
        | Op::GraphPrepare
        | Op::StartCapture
        | Op::StopCapture => op.kind().to_owned(),
    }
}
