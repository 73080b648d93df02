//! The recording's events: what one frame's payload decodes to (the module doc of `record`
//! has the framing and the compatibility promise). Plain data, no behaviour.

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::kernel::{KernelDef, Scalar};

/// The first bytes of every recording.
pub const MAGIC: [u8; 8] = *b"LKSTPREC";

/// The format version this build writes and reads.
pub const VERSION: u16 = 3;

/// Bytes of the header: the magic, the version and two reserved zero bytes.
pub const HEADER_BYTES: usize = MAGIC.len() + 4;

/// One frame's payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// First in every file: the recording process and the recorder's settings.
    Process {
        /// The recording process's id.
        pid: u32,
        /// Data of a create or write up to this many bytes is kept; past it, its hash.
        data_bytes_max: u64,
    },
    /// A client was started: calls name its device by `device`.
    Device(DeviceRecord),
    /// A kernel's IR, once per content hash, before the first call that names it.
    Kernel {
        /// [`KernelDef::content_hash`]: how calls name it.
        hash: u64,
        /// The kernel as validated when it was first launched or compiled.
        def: KernelDef,
    },
    /// A call, when it was issued.
    Call {
        /// Process-wide issue number: unique, increasing along each thread.
        call: u64,
        /// The [`DeviceRecord::device`] of the client called.
        device: u32,
        /// The calling thread, numbered from 0 in order of first call.
        thread: u32,
        /// The stream the call went to ([`StreamId`](crate::StreamId)'s number).
        stream: u64,
        /// What was called, with its arguments.
        op: Op,
        /// When it was issued: nanoseconds since the recorder opened (a monotonic clock of the
        /// recording process; what `lockstep recording --perfetto` draws the run by).
        at_ns: u64,
    },
    /// What a waiting call returned, once it returned.
    Outcome {
        /// The [`Event::Call`] it answers.
        call: u64,
        /// Its result.
        outcome: Outcome,
        /// When it returned, on the clock of [`Event::Call`]'s `at_ns`.
        at_ns: u64,
    },
}

/// A recorded device: one per client started (clones share it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// Numbered from 0 within the recording.
    pub device: u32,
    /// The device's name ([`DeviceProperties::name`](crate::DeviceProperties::name)).
    pub name: String,
    /// Its backend ([`Device::TYPE_ID`](crate::Device::TYPE_ID)).
    pub backend: u16,
    /// Its index within the backend, for a client registered by
    /// [`init`](crate::ComputeClient::init); `None` for one started without an index.
    pub index: Option<u32>,
}

/// A client call and its arguments. Buffers are named by the server's buffer number, which
/// the process never reuses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// `create`/`empty` (and the tensor forms): a new buffer of `bytes`, filled by `data`.
    Create {
        /// The new buffer.
        buffer: u64,
        /// Its size.
        bytes: u64,
        /// What it was filled with; `None` for `empty`.
        data: Option<Data>,
    },
    /// A host-to-device copy into `range` (each run of a `write_tensor` is one).
    Write {
        /// Where the bytes went.
        range: Range,
        /// The bytes.
        data: Data,
    },
    /// A kernel launch.
    Launch {
        /// The kernel's content hash (its [`Event::Kernel`] came before).
        kernel: u64,
        /// The workgroup count.
        count: Count,
        /// One range per binding, in order.
        bindings: Bindings,
        /// The scalar parameters.
        params: Params,
        /// Issued inside [`dry_run`](crate::dry_run()): validated, not executed.
        dry_run: bool,
    },
    /// A read of these ranges (whole handles, or a tensor's extent); its [`Outcome`] holds the
    /// bytes' hashes as they left the device.
    Read {
        /// The ranges read, in order.
        ranges: Vec<Range>,
    },
    /// `compile` of a kernel.
    Compile {
        /// The kernel's content hash.
        kernel: u64,
    },
    /// `graph_prepare`.
    GraphPrepare,
    /// `start_capture`.
    StartCapture,
    /// `stop_capture`: its call number names the graph it returns.
    StopCapture,
    /// [`Graph::replay`](crate::Graph::replay) of the graph `stop_capture` call `graph` made.
    GraphReplay {
        /// The `stop_capture` call that made it.
        graph: u64,
    },
    /// The graph's last clone was dropped.
    GraphRelease {
        /// The `stop_capture` call that made it.
        graph: u64,
    },
    /// `flush`.
    Flush,
    /// `sync`.
    Sync,
    /// `sync_all`.
    SyncAll,
    /// The last handle of `buffer` was dropped.
    Release {
        /// The buffer released.
        buffer: u64,
    },
    /// A call refused at the call, which changed nothing.
    Refused {
        /// The method called.
        name: String,
        /// The error it returned.
        error: String,
    },
    /// A call recorded by name only (collectives, peer copies, memory settings):
    /// replays skip it and say so.
    Other {
        /// The method called.
        name: String,
        /// The ranges of this device it may have written, whose contents a replay then cannot
        /// know.
        writes: Vec<Range>,
    },
}

impl Op {
    /// The call's kind, as summaries count it.
    pub fn kind(&self) -> &str {
        match self {
            Op::Create { data: Some(_), .. } => "create",
            Op::Create { data: None, .. } => "empty",
            Op::Write { .. } => "write",
            Op::Launch { .. } => "launch",
            Op::Read { .. } => "read",
            Op::Compile { .. } => "compile",
            Op::GraphPrepare => "graph_prepare",
            Op::StartCapture => "start_capture",
            Op::StopCapture => "stop_capture",
            Op::GraphReplay { .. } => "graph_replay",
            Op::GraphRelease { .. } => "graph_release",
            Op::Flush => "flush",
            Op::Sync => "sync",
            Op::SyncAll => "sync_all",
            Op::Release { .. } => "release",
            Op::Refused { .. } => "refused",
            Op::Other { name, .. } => name,
        }
    }
}

/// A launch's binding ranges: up to four inline, so that recording a launch allocates
/// nothing (a heap allocation freed by the writer thread slowed the H200's launch rate).
/// Encoded as a sequence, as a `Vec` is.
pub type Bindings = SmallVec<[Range; 4]>;

/// A launch's scalar parameters, inline up to four (as [`Bindings`]).
pub type Params = SmallVec<[Scalar; 4]>;

/// A byte range of a recorded buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    /// The buffer's number.
    pub buffer: u64,
    /// First byte, from the buffer's start.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A launch's workgroup count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Count {
    /// Workgroups along x, y and z.
    Static([u32; 3]),
    /// Read from this range when the launch runs.
    Dynamic(Range),
}

/// Data carried by a create or a write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Data {
    /// The bytes themselves.
    Bytes(Vec<u8>),
    /// Past the recorder's `data_bytes_max`: their length and xxh3-64 hash.
    Hash {
        /// Length in bytes.
        len: u64,
        /// xxh3-64 of the bytes.
        xxh3: u64,
    },
}

impl Data {
    /// Length in bytes of the data recorded.
    pub fn len(&self) -> u64 {
        match self {
            Data::Bytes(bytes) => bytes.len() as u64,
            Data::Hash { len, .. } => *len,
        }
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a waiting call returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// `Ok`, for a call that returns no data.
    Ok,
    /// A read's bytes, one entry per range read.
    Read(Vec<ReadData>),
    /// The error returned, as its message.
    Err(String),
}

/// What one range read returned: always its hashes; its bytes too when there were no more
/// than the recorder's `data_bytes_max`, so that a replay can name the first value that differs
/// and compare floats a kernel computed within a tolerance (devices round transcendental
/// functions differently).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadData {
    /// The bytes' chunk hashes.
    pub hashes: ReadHashes,
    /// The bytes themselves, if kept.
    pub bytes: Option<Vec<u8>>,
}

/// The bytes of one range read, hashed per [`CHUNK_BYTES`](super::CHUNK_BYTES) chunk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadHashes {
    /// Bytes read.
    pub len: u64,
    /// xxh3-64 of each chunk, in order; the last may be short.
    pub chunks: Vec<u64>,
}
