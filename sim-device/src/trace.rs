//! The record of what a simulated device executed: a running hash that identifies the run, and
//! optionally every entry, for export.

use lockstep::kernel::Fnv1a;

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

/// A digest of an operation's content (e.g. every byte a write stored) for the trace hash:
/// FNV-1a's multiply-xor over little-endian 8-byte words in four independent lanes, folded.
/// Hashing byte by byte was a fifth of the explorer's time; this is as deterministic.
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

    /// Adds an executed operation; `content` is hashed too (e.g. the bytes a write stored).
    pub fn push(&mut self, obs: &mut Observations, entry: TraceEntry, content: &[u8]) {
        self.hash.write_u64(entry.start_ns);
        self.hash.write_u64(entry.stream as u64);
        self.hash.write_bytes(entry.op.as_bytes());
        self.hash.write_bytes(entry.detail.as_bytes());
        self.hash.write_u64(content.len() as u64);
        self.hash.write_u64(digest(content));
        obs.trace_hash = self.hash.0;
        obs.ops_executed += 1;
        obs.virtual_time_ns = entry.start_ns + entry.duration_ns;
        if self.record {
            obs.entries.push(entry);
        }
    }
}
