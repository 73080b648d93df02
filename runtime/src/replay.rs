//! Replaying a recording (`record`) on any device, from one thread: each call goes to its
//! recorded device and stream, and every read and waiting call's outcome is checked against
//! the recording. [`replay`] feeds a file's events in file order (`lockstep replay
//! --recording` runs it on the simulator); [`Replayer`] takes events one at a time, so the
//! explorer feeds the same calls in other orders through this one path.
//!
//! A read matches when its chunk hashes do; where they differ and the recording kept the
//! bytes, value by value, floats that kernels computed within a [`FloatTolerance`]
//! (`compare.rs`): another device rounds transcendental functions its own way.
//!
//! Graphs are captured and replayed again, dry runs stay dry. What it cannot check it says,
//! never passes silently: a read of memory that data recorded only as a hash reached (written
//! as zeros instead, and carried through launches to their writable bindings), kernels the
//! device cannot run (their launches skipped), and calls recorded by name only ([`Op::Other`]:
//! collectives, peer copies, memory settings), with what they may have written. Invariants: every recorded buffer maps to at most one
//! live replay handle, dropped at its recorded release; a call's outcome is compared once,
//! when the recording's [`Event::Outcome`] for it arrives.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use thiserror::Error;

use crate::block_on::block_on;
use crate::bytes::Bytes;
use crate::client::ComputeClient;
use crate::device::Device;
use crate::graph::Graph;
use crate::handle::Handle;
use crate::kernel::{Access, Kernel};
use crate::launch::{CubeCount, KernelArguments};
use crate::record::{Count, Data, DeviceRecord, Event, Op, Outcome, Range, Reader, RecordingError};
use crate::stream::StreamId;

mod compare;
mod report;

pub use compare::FloatTolerance;
use compare::{FloatRanges, Verdict};
pub use report::{FloatDifference, Mismatch, MismatchDetail, ReplayReport};

/// Why a replay stopped before the recording's end.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The recording cannot be read past a point (what came before was replayed).
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// A call names a device no [`Event::Device`] declared before it.
    #[error("call {call} names device {device}, which the recording never declared")]
    UnknownDevice {
        /// The call.
        call: u64,
        /// Its device number.
        device: u32,
    },
}

/// What a replayed waiting call returned, until its recorded outcome arrives.
enum Replayed {
    Ok,
    Err(String),
    /// The bytes of each range, with the kernel-written floats of its buffer then.
    Read(Vec<(Bytes, Option<FloatRanges>)>),
    /// Its result cannot be compared, for this reason.
    Unchecked(String),
}

struct Pending {
    kind: String,
    stream: u64,
    thread: u32,
    ranges: Vec<Range>,
    replayed: Replayed,
}

/// Replays the recording `input` on the clients `open` starts, one per recorded device, in
/// file order, accepting kernels' floats within `tolerance`.
///
/// # Errors
/// [`ReplayError`] if the recording is unreadable past a point, or names an undeclared device;
/// differences are not errors but the report's [`mismatches`](ReplayReport::mismatches).
pub fn replay<D: Device>(
    input: impl Read,
    tolerance: FloatTolerance,
    open: impl FnMut(&DeviceRecord) -> ComputeClient<D>,
) -> Result<ReplayReport, ReplayError> {
    let mut replayer = Replayer::new(open).with_tolerance(tolerance);
    for event in Reader::new(input) {
        replayer.event(event?)?;
    }
    Ok(replayer.into_report())
}

/// A replay in progress, fed one [`Event`] at a time.
///
/// Events may come in any order that keeps a declaration ([`Event::Device`],
/// [`Event::Kernel`]) before the calls naming it and a call before its [`Event::Outcome`];
/// calls of buffers, kernels or graphs that no replayed call made are skipped and counted, and
/// a call whose outcome never comes is not compared. Every call runs to completion inside
/// [`event`](Self::event) (a read waits for its bytes).
pub struct Replayer<D: Device, F> {
    open: F,
    clients: BTreeMap<u32, ComputeClient<D>>,
    /// Replay handles by recorded (device, buffer).
    handles: BTreeMap<(u32, u64), Handle>,
    /// Kernels by content hash, or why they cannot be built.
    kernels: BTreeMap<u64, Result<Kernel, String>>,
    pending: BTreeMap<u64, Pending>,
    /// Replay graphs by recorded (device, `stop_capture` call).
    graphs: BTreeMap<(u32, u64), Graph<D>>,
    /// Recorded (device, buffer)s whose contents the replay cannot know, and why.
    tainted: BTreeMap<(u32, u64), String>,
    /// The ranges of recorded (device, buffer)s that kernels last wrote as floats.
    floats: BTreeMap<(u32, u64), FloatRanges>,
    tolerance: FloatTolerance,
    /// Every error a replayed call returned, by recorded call, in replay order.
    errors: Vec<(u64, String)>,
    report: ReplayReport,
}

/// Where a call runs: its number, device, thread and stream.
#[derive(Clone, Copy)]
struct At {
    call: u64,
    device: u32,
    thread: u32,
    stream: u64,
}

impl<D: Device, F: FnMut(&DeviceRecord) -> ComputeClient<D>> Replayer<D, F> {
    /// A replay of nothing yet, on the clients `open` starts, one per [`Event::Device`].
    pub fn new(open: F) -> Self {
        Replayer {
            open,
            clients: BTreeMap::new(),
            handles: BTreeMap::new(),
            kernels: BTreeMap::new(),
            pending: BTreeMap::new(),
            graphs: BTreeMap::new(),
            tainted: BTreeMap::new(),
            floats: BTreeMap::new(),
            tolerance: FloatTolerance::default(),
            errors: Vec::new(),
            report: ReplayReport::default(),
        }
    }

    /// Accepts floats that kernels computed within `tolerance` ([`FloatTolerance::default`]
    /// unless set; [`FloatTolerance::EXACT`] for bit-exact).
    pub fn with_tolerance(self, tolerance: FloatTolerance) -> Self {
        Self { tolerance, ..self }
    }

    /// What the replay found so far.
    pub fn report(&self) -> &ReplayReport {
        &self.report
    }

    /// What the replay found.
    pub fn into_report(self) -> ReplayReport {
        self.report
    }

    /// Every error a replayed call returned (refused at the call or when waited on), with the
    /// recorded call, in replay order: what the explorer matches against injected faults.
    pub fn errors(&self) -> &[(u64, String)] {
        &self.errors
    }

    /// Whether some buffer holds contents the replay cannot know (a call recorded by name only
    /// or a launch not run may have written it): reading it may read bytes never written.
    pub fn has_unknown_contents(&self) -> bool {
        !self.tainted.is_empty()
    }

    /// Replays one event: declares a device or kernel, runs a call, or compares an outcome.
    ///
    /// # Errors
    /// [`ReplayError::UnknownDevice`] for a call naming a device not declared before it.
    pub fn event(&mut self, event: Event) -> Result<(), ReplayError> {
        match event {
            Event::Process { .. } => {}
            Event::Device(device) => {
                let client = (self.open)(&device);
                self.clients.insert(device.device, client);
            }
            Event::Kernel { hash, def } => {
                let name = def.name.clone();
                let kernel = Kernel::new(def)
                    .map_err(|err| format!("kernel {name} does not validate: {err}"));
                self.kernels.insert(hash, kernel);
            }
            Event::Call {
                call,
                device,
                thread,
                stream,
                op,
                ..
            } => {
                let at = At {
                    call,
                    device,
                    thread,
                    stream,
                };
                let Some(client) = self.clients.get(&device) else {
                    return Err(ReplayError::UnknownDevice { call, device });
                };
                let mut client = client.clone();
                client.set_stream(StreamId(stream));
                self.call(&client, at, op);
            }
            Event::Outcome { call, outcome, .. } => self.outcome(call, outcome),
        }
        Ok(())
    }

    fn skip(&mut self, reason: String) {
        *self.report.skipped.entry(reason).or_insert(0) += 1;
    }

    /// A call the device refused with `err`: skipped, and its error kept.
    fn refused(&mut self, at: At, what: &str, err: impl fmt::Display) {
        self.errors.push((at.call, err.to_string()));
        self.skip(format!("{what} on this device: {err}"));
    }

    /// The replay handle viewing recorded `range` of `device`, if a replayed call made it.
    fn view(&self, device: u32, range: &Range) -> Option<Handle> {
        let handle = self.handles.get(&(device, range.buffer))?;
        handle.slice(range.offset, range.len).ok()
    }

    /// Why `ranges` of `device` hold contents the replay cannot know, if they do.
    fn taint_of(&self, device: u32, ranges: &[Range]) -> Option<String> {
        ranges
            .iter()
            .find_map(|r| self.tainted.get(&(device, r.buffer)).cloned())
    }

    /// `data`'s bytes, or zeros in their place (tainting `buffer`) if only a hash was recorded;
    /// its length was checked against a range of a buffer the device holds.
    fn bytes_of(&mut self, at: At, buffer: u64, data: Data) -> Bytes {
        match data {
            Data::Bytes(bytes) => Bytes::from_bytes_vec(bytes),
            Data::Hash { len, .. } => {
                let why = format!("call {} wrote {len} bytes recorded only as a hash", at.call);
                self.tainted.entry((at.device, buffer)).or_insert(why);
                Bytes::from_bytes_vec(vec![0; len as usize])
            }
        }
    }

    fn call(&mut self, client: &ComputeClient<D>, at: At, op: Op) {
        let kind = op.kind().to_owned();
        let mut read_ranges = Vec::new();
        let replayed = match op {
            Op::Create {
                buffer,
                bytes,
                data,
            } => {
                if data.as_ref().is_some_and(|data| data.len() != bytes) {
                    self.skip(malformed(&kind));
                    return;
                }
                // Data recorded as a hash is written as zeros once the buffer exists: the
                // device, not the file, bounds what is allocated.
                let created = match data {
                    Some(Data::Bytes(data)) => client.create(Bytes::from_bytes_vec(data)),
                    Some(hashed @ Data::Hash { .. }) => client.empty(bytes as usize).inspect(|h| {
                        let zeros = self.bytes_of(at, buffer, hashed);
                        let _ = client.write(h, zeros);
                    }),
                    None => client.empty(bytes as usize),
                };
                self.floats.remove(&(at.device, buffer));
                match created {
                    Ok(handle) => {
                        self.handles.insert((at.device, buffer), handle);
                    }
                    Err(err) => self.refused(at, "a create that fails", err),
                }
                None
            }
            Op::Write { range, data } => {
                let Some(view) = self.view(at.device, &range) else {
                    self.skip(unknown_buffer(&kind));
                    return;
                };
                if data.len() != range.len {
                    self.skip(malformed(&kind));
                    return;
                }
                let bytes = self.bytes_of(at, range.buffer, data);
                self.written(at.device, &range, None);
                if let Err(err) = client.write(&view, bytes) {
                    self.refused(at, "a write refused", err);
                }
                None
            }
            Op::Launch {
                kernel,
                count,
                bindings,
                params,
                dry_run,
            } => {
                let launch = |this: &mut Self| {
                    this.launch(client, at, kernel, count, &bindings, params.into_vec())
                };
                if dry_run {
                    crate::dry_run::dry_run(|| launch(self));
                } else {
                    launch(self);
                }
                None
            }
            Op::Read { ranges } => {
                let replayed = self.read(client, at, &ranges);
                read_ranges = ranges;
                Some(replayed)
            }
            Op::Compile { kernel } => Some(match self.kernels.get(&kernel) {
                Some(Ok(kernel)) => outcome_of(client.compile(kernel)),
                _ => Replayed::Unchecked(format!("kernel {kernel:#018x} was not recorded")),
            }),
            Op::GraphPrepare => Some(outcome_of(client.graph_prepare())),
            Op::StartCapture => Some(outcome_of(client.start_capture())),
            Op::StopCapture => Some(match client.stop_capture() {
                Ok(graph) => {
                    self.graphs.insert((at.device, at.call), graph);
                    Replayed::Ok
                }
                Err(err) => Replayed::Err(err.to_string()),
            }),
            Op::GraphReplay { graph } => {
                match self.graphs.get(&(at.device, graph)) {
                    Some(graph) => graph.replay(),
                    None => self.skip("a replay of a graph no replayed capture made".to_owned()),
                }
                None
            }
            Op::GraphRelease { graph } => {
                self.graphs.remove(&(at.device, graph));
                None
            }
            Op::Flush => Some(outcome_of(client.flush())),
            Op::Sync => Some(outcome_of(client.sync())),
            Op::SyncAll => Some(outcome_of(client.sync_all())),
            Op::Release { buffer } => {
                self.handles.remove(&(at.device, buffer));
                None
            }
            Op::Refused { .. } => {
                self.report.calls_refused += 1;
                return;
            }
            Op::Other { name, writes } => {
                for range in writes {
                    let why = format!("call {} (`{name}`) was not replayed", at.call);
                    self.tainted.entry((at.device, range.buffer)).or_insert(why);
                }
                self.skip(format!("`{name}` is recorded by name only"));
                return;
            }
        };
        self.report.calls_replayed += 1;
        if let Some(Replayed::Err(err)) = &replayed {
            self.errors.push((at.call, err.clone()));
        }
        if let Some(replayed) = replayed {
            let pending = Pending {
                kind,
                stream: at.stream,
                thread: at.thread,
                ranges: read_ranges,
                replayed,
            };
            self.pending.insert(at.call, pending);
        }
    }

    fn launch(
        &mut self,
        client: &ComputeClient<D>,
        at: At,
        hash: u64,
        count: Count,
        bindings: &[Range],
        params: Vec<crate::kernel::Scalar>,
    ) {
        let kernel = match self.kernels.get(&hash) {
            Some(Ok(kernel)) => match kernel.validate_for_device(client.properties()) {
                Ok(()) => Ok(kernel.clone()),
                Err(err) => Err(format!(
                    "kernel {} cannot run on {}: {err}",
                    kernel.name(),
                    client.properties().name
                )),
            },
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("kernel {hash:#018x} was not recorded")),
        };
        let views: Option<Vec<Handle>> = bindings.iter().map(|r| self.view(at.device, r)).collect();
        let count = match count {
            Count::Static([x, y, z]) => Some(CubeCount::Static(x, y, z)),
            Count::Dynamic(range) => self.view(at.device, &range).map(CubeCount::Dynamic),
        };
        let (Ok(kernel), Some(views), Some(count)) = (kernel, views, count) else {
            return self.skip_launch(at, hash, bindings);
        };
        let writable = |kernel: &Kernel| -> Vec<Range> {
            (bindings.iter().zip(&kernel.def().bindings))
                .filter(|(_, decl)| decl.access == Access::ReadWrite)
                .map(|(r, _)| *r)
                .collect()
        };
        if let Some(why) = self.taint_of(at.device, bindings) {
            for range in writable(&kernel) {
                self.tainted
                    .entry((at.device, range.buffer))
                    .or_insert(why.clone());
            }
        }
        if crate::dry_run::launch_mode() != crate::dry_run::LaunchMode::DryRun {
            for (range, decl) in bindings.iter().zip(&kernel.def().bindings) {
                if decl.access == Access::ReadWrite {
                    self.written(at.device, range, Some(decl.elem));
                }
            }
        }
        let args = KernelArguments {
            bindings: views,
            params,
        };
        if let Err(err) = client.launch(&kernel, count, args) {
            self.refused(at, "a launch refused", err);
        }
    }

    /// Notes that `range` of `device` was last written as `elem` by a kernel, or by the host.
    fn written(&mut self, device: u32, range: &Range, elem: Option<crate::kernel::ElemType>) {
        let floats = self.floats.entry((device, range.buffer)).or_default();
        floats.written(range.offset, range.offset + range.len, elem);
    }

    /// Skips a launch that cannot run here, saying why; its bindings' contents are unknown.
    fn skip_launch(&mut self, at: At, hash: u64, bindings: &[Range]) {
        let why = match self.kernels.get(&hash) {
            Some(Err(why)) => why.clone(),
            Some(Ok(kernel)) => format!(
                "a launch of {} on a buffer no replayed call made",
                kernel.name()
            ),
            None => format!("kernel {hash:#018x} was not recorded"),
        };
        for range in bindings {
            let taint = format!("call {} was not replayed: {why}", at.call);
            self.tainted
                .entry((at.device, range.buffer))
                .or_insert(taint);
        }
        self.skip(why);
    }

    fn read(&mut self, client: &ComputeClient<D>, at: At, ranges: &[Range]) -> Replayed {
        let views: Option<Vec<Handle>> = ranges.iter().map(|r| self.view(at.device, r)).collect();
        let Some(views) = views else {
            return Replayed::Unchecked(format!(
                "call {} reads a buffer no replayed call made",
                at.call
            ));
        };
        let result = block_on(client.read_async(views));
        if let Some(why) = self.taint_of(at.device, ranges) {
            // Not compared, but an error it returned is still one the device gave back.
            if let Err(err) = &result {
                self.errors.push((at.call, err.to_string()));
            }
            return Replayed::Unchecked(format!("call {} (read): {why}", at.call));
        }
        match result {
            Ok(bytes) => {
                let floats = ranges
                    .iter()
                    .map(|r| self.floats.get(&(at.device, r.buffer)).cloned());
                Replayed::Read(bytes.into_iter().zip(floats).collect())
            }
            Err(err) => Replayed::Err(err.to_string()),
        }
    }

    fn outcome(&mut self, call: u64, recorded: Outcome) {
        // A call not replayed (skipped, or refused) has nothing to compare.
        let Some(pending) = self.pending.remove(&call) else {
            return;
        };
        let mismatch = |detail| Mismatch {
            call,
            kind: pending.kind.clone(),
            stream: pending.stream,
            thread: pending.thread,
            detail,
        };
        let ranges = &pending.ranges;
        match (recorded, pending.replayed) {
            (_, Replayed::Unchecked(why)) => self.report.unchecked.push(why),
            (Outcome::Read(expected), Replayed::Read(actual)) if expected.len() != actual.len() => {
                let detail = MismatchDetail::Outcome {
                    recorded: format!("a read of {} ranges", expected.len()),
                    replayed: format!("a read of {} ranges", actual.len()),
                };
                self.report.mismatches.push(mismatch(detail));
            }
            (Outcome::Read(expected), Replayed::Read(actual)) => {
                let mut within: Option<FloatDifference> = None;
                // One entry per range read on both sides (checked above).
                for (index, ((recorded, (bytes, floats)), range)) in
                    expected.iter().zip(&actual).zip(ranges).enumerate()
                {
                    let at = (index, *range);
                    match compare::compare(at, recorded, bytes, floats.as_ref(), self.tolerance) {
                        Verdict::Exact => {}
                        Verdict::Within(difference) => {
                            within = Some(within.unwrap_or_default().max(difference));
                        }
                        Verdict::Differs(detail) => {
                            self.report.mismatches.push(mismatch(detail));
                            return;
                        }
                    }
                }
                self.report.reads_matched += 1;
                if let Some(difference) = within {
                    self.report.reads_within_tolerance += 1;
                    self.report.float_difference = self.report.float_difference.max(difference);
                }
            }
            (Outcome::Ok, Replayed::Ok) | (Outcome::Err(_), Replayed::Err(_)) => {
                self.report.outcomes_matched += 1;
            }
            (recorded, replayed) => {
                let detail = MismatchDetail::Outcome {
                    recorded: describe_recorded(&recorded),
                    replayed: describe_replayed(&replayed),
                };
                self.report.mismatches.push(mismatch(detail));
            }
        }
    }
}

fn malformed(kind: &str) -> String {
    format!("a {kind} whose data is not as long as its range (a malformed recording)")
}

fn unknown_buffer(kind: &str) -> String {
    format!("a {kind} of a buffer no replayed call made")
}

fn outcome_of<T, E: fmt::Display>(result: Result<T, E>) -> Replayed {
    match result {
        Ok(_) => Replayed::Ok,
        Err(err) => Replayed::Err(err.to_string()),
    }
}

fn describe_recorded(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Ok => "Ok".to_owned(),
        Outcome::Read(ranges) => format!("a read of {} ranges", ranges.len()),
        Outcome::Err(err) => format!("the error \"{err}\""),
    }
}

fn describe_replayed(replayed: &Replayed) -> String {
    match replayed {
        Replayed::Ok => "Ok".to_owned(),
        Replayed::Read(ranges) => format!("a read of {} ranges", ranges.len()),
        Replayed::Err(err) => format!("the error \"{err}\""),
        Replayed::Unchecked(why) => why.clone(),
    }
}
