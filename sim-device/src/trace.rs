//! The record of what a simulated device executed: a running hash that identifies the run, and
//! optionally every entry, for export.

use std::fmt;
use std::sync::Arc;

use lockstep::kernel::Fnv1a;

use crate::ops::{LaunchOp, Range};

/// One executed operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// Virtual time at which the operation started.
    pub start_ns: u64,
    /// Virtual time it took.
    pub duration_ns: u64,
    /// Index of the device stream, in creation order.
    pub stream: u32,
    /// What ran: "write", "read", "copy", "launch", "marker" (event or timestamp) or "wait".
    pub op: &'static str,
    /// Operands, e.g. buffer ids and byte ranges, or the kernel's name.
    pub detail: String,
    /// For "marker" and "wait": the marker (event) recorded or waited on.
    pub marker: Option<u64>,
    /// Device memory allocated after the operation.
    pub bytes_live: u64,
    /// The sanitizer reports this operation raised (a launch's races, divergent barriers and
    /// unwritten shared reads; a transfer's cross-stream race), as their text, in order. Kept
    /// only in recorded traces; not part of the trace hash (the reports are what the run
    /// did, not more of it).
    pub reports: Vec<String>,
}

/// What an observer can see of a simulated device while the runtime drives it.
#[derive(Clone, Debug, Default)]
pub struct Observations {
    /// Hash over every executed operation and its operands, in execution order. Equal seeds and
    /// equal programs give equal hashes, on every machine.
    pub trace_hash: u64,
    /// Operations executed so far.
    pub ops_executed: u64,
    /// Operations enqueued on the device's streams so far; each is numbered from 0 in enqueue
    /// order ([`InjectedFault::op`](crate::InjectedFault::op)).
    pub ops_enqueued: u64,
    /// The device's virtual clock, in nanoseconds.
    pub virtual_time_ns: u64,
    /// Everything the sanitizer reported, in order.
    pub reports: Vec<crate::SanitizerReport>,
    /// Every fault the device injected, in injection order.
    pub faults: Vec<crate::InjectedFault>,
    /// Set when virtual time passed [`SimConfig::watchdog_ns`](crate::SimConfig::watchdog_ns):
    /// the run hung (or ran away) in simulated time, and the device was lost to end it.
    pub watchdog_fired: bool,
    /// Every entry, when the device was configured with `record_trace`.
    pub entries: Vec<TraceEntry>,
}

/// What the trace hash takes of an operation's content (e.g. every byte a write stored): its
/// length and [`digest`]. Taken where the bytes are, so they need not outlive the operation
/// (a read's go to its pooled block).
pub(crate) struct Content {
    len: u64,
    digest: u64,
}

impl Content {
    /// The content of an operation that has none.
    pub fn none() -> Self {
        Self::of(&[])
    }

    /// The content `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            len: bytes.len() as u64,
            digest: digest(bytes),
        }
    }
}

/// A digest of an operation's content for the trace hash: FNV-1a's multiply-xor over
/// little-endian 8-byte words in four independent lanes, folded. Hashing byte by byte was a
/// fifth of the explorer's time; this is as deterministic.
fn digest(content: &[u8]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut lanes = [0xcbf2_9ce4_8422_2325u64; 4];
    let mut blocks = content.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let word = u64::from_le_bytes(word.try_into().expect("8-byte chunk"));
            *lane = (*lane ^ word).wrapping_mul(PRIME);
        }
    }
    let mut folded = Fnv1a::default();
    for lane in lanes {
        folded.write_u64(lane);
    }
    folded.write_bytes(blocks.remainder());
    folded.0
}

/// What an executed operation's entry says of its operands (its [`TraceEntry::detail`]), kept
/// as data: the trace hash reads its text written straight into the hasher, and only a recorded
/// trace makes it a `String` (a `String` formatted per operation was 3% of the explorer's time).
pub(crate) enum Detail {
    /// A write or read of a range, and what a failure adds (empty when it succeeded).
    Transfer(Range, &'static str),
    /// A device copy from the first range to the second, and what a failure adds.
    Copy(Range, Range, &'static str),
    /// A launch, and the invocations it ran.
    Launch(Arc<LaunchOp>, u64),
    /// An event or timestamp recorded or waited on.
    Marker(u64),
    /// Anything rarer (collectives), formatted where it ran.
    Text(String),
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Detail::Transfer(range, outcome) => write!(f, "{range:?}{outcome}"),
            Detail::Copy(src, dst, outcome) => write!(f, "{src:?} -> {dst:?}{outcome}"),
            Detail::Launch(launch, invocations) => {
                write!(f, "{} x{invocations}", launch.kernel.name)
            }
            Detail::Marker(id) => write!(f, "marker {id}"),
            Detail::Text(text) => f.write_str(text),
        }
    }
}

impl Detail {
    /// Feeds this detail's text (its [`Display`](fmt::Display)) to `hash`, written straight
    /// into it: formatting it through `write!` was 1% of the explorer's instructions.
    fn hash_into(&self, hash: &mut Fnv1a) {
        match self {
            Detail::Transfer(range, outcome) => {
                hash_range(hash, range);
                hash.write_bytes(outcome.as_bytes());
            }
            Detail::Copy(src, dst, outcome) => {
                hash_range(hash, src);
                hash.write_bytes(b" -> ");
                hash_range(hash, dst);
                hash.write_bytes(outcome.as_bytes());
            }
            Detail::Launch(launch, invocations) => {
                hash.write_bytes(launch.kernel.name.as_bytes());
                hash.write_bytes(b" x");
                hash_decimal(hash, *invocations);
            }
            Detail::Marker(id) => {
                hash.write_bytes(b"marker ");
                hash_decimal(hash, *id);
            }
            Detail::Text(text) => hash.write_bytes(text.as_bytes()),
        }
    }
}

/// Feeds `range`'s `Debug` text (`Range { buffer: 1, offset: 0, len: 4 }`) to `hash`.
fn hash_range(hash: &mut Fnv1a, range: &Range) {
    hash.write_bytes(b"Range { buffer: ");
    hash_decimal(hash, range.buffer);
    hash.write_bytes(b", offset: ");
    hash_decimal(hash, range.offset);
    hash.write_bytes(b", len: ");
    hash_decimal(hash, range.len);
    hash.write_bytes(b" }");
}

/// Feeds `value` in decimal, as `Display` writes it, to `hash`.
fn hash_decimal(hash: &mut Fnv1a, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    hash.write_bytes(&digits[at..]);
}

/// An executed operation, as [`Trace::push`] takes it: a [`TraceEntry`] whose detail is not
/// formatted yet and whose reports are still in the observations.
pub(crate) struct Executed {
    pub start_ns: u64,
    pub duration_ns: u64,
    pub stream: u32,
    pub op: &'static str,
    pub detail: Detail,
    pub marker: Option<u64>,
    pub bytes_live: u64,
}

#[derive(Debug)]
pub(crate) struct Trace {
    hash: Fnv1a,
    record: bool,
}

impl Trace {
    pub fn new(record: bool) -> Self {
        Self {
            hash: Fnv1a::default(),
            record,
        }
    }

    /// Whether every entry is kept.
    pub fn records(&self) -> bool {
        self.record
    }

    /// Adds an executed operation and its `content`.
    /// `reports_from` is where the operation's reports start in `obs.reports`, when the trace
    /// is recorded (see [`records`](Self::records)).
    pub fn push(
        &mut self,
        obs: &mut Observations,
        op: Executed,
        reports_from: Option<usize>,
        content: Content,
    ) {
        self.hash.write_u64(op.start_ns);
        self.hash.write_u64(op.stream as u64);
        self.hash.write_bytes(op.op.as_bytes());
        op.detail.hash_into(&mut self.hash);
        self.hash.write_u64(content.len);
        self.hash.write_u64(content.digest);
        obs.trace_hash = self.hash.0;
        obs.ops_executed += 1;
        obs.virtual_time_ns = op.start_ns + op.duration_ns;
        if self.record {
            let reports = obs.reports[reports_from.unwrap_or(obs.reports.len())..]
                .iter()
                .map(|r| r.to_string())
                .collect();
            obs.entries.push(TraceEntry {
                start_ns: op.start_ns,
                duration_ns: op.duration_ns,
                stream: op.stream,
                op: op.op,
                detail: op.detail.to_string(),
                marker: op.marker,
                bytes_live: op.bytes_live,
                reports,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;
    use std::sync::Arc;

    use lockstep::kernel::{CompileOptions, KernelBuilder};

    use super::*;
    use crate::ops::Count;

    #[test]
    fn a_detail_hashes_as_its_text() {
        let kernel = KernelBuilder::new("explore_0", [8, 1, 1]).build().unwrap();
        let launch = LaunchOp {
            kernel: Arc::new(kernel.def().clone()),
            options: CompileOptions::checked(0),
            count: Count::Static([1, 1, 1]),
            bindings: Vec::new(),
            params: Vec::new(),
        };
        let range = |buffer, offset, len| Range {
            buffer,
            offset,
            len,
        };
        for detail in [
            Detail::Transfer(range(0, 0, 4), ""),
            Detail::Transfer(range(7, 4096, 262_144), " (failed)"),
            Detail::Copy(range(1, 8, 16), range(u64::MAX, 10, 1), ""),
            Detail::Launch(Arc::new(launch), 65_536),
            Detail::Marker(1_000_000_007),
            Detail::Text("all_reduce #3".to_owned()),
        ] {
            let (mut direct, mut formatted) = (Fnv1a::default(), Fnv1a::default());
            detail.hash_into(&mut direct);
            write!(formatted, "{detail}").unwrap();
            assert_eq!(direct.0, formatted.0, "{detail}");
        }
    }
}
