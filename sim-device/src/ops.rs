//! Operations queued on simulated streams.

use std::sync::Arc;

use lockstep::ReduceOperation;
use lockstep::kernel::{CompileOptions, ElemType, KernelDef, Scalar};

/// A byte range of a simulated allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub buffer: u64,
    pub offset: u64,
    pub len: u64,
}

#[derive(Clone, Debug)]
pub(crate) enum Count {
    Static([u32; 3]),
    Dynamic(Range),
}

/// Everything a launch needs to execute; shared between a graph and its replays.
#[derive(Debug)]
pub(crate) struct LaunchOp {
    pub kernel: Arc<KernelDef>,
    pub options: CompileOptions,
    pub count: Count,
    pub bindings: Vec<Range>,
    pub params: Vec<Scalar>,
}

#[derive(Debug)]
pub(crate) enum Op {
    Write {
        dst: Range,
        data: Vec<u8>,
    },
    Read {
        src: Range,
        read: u64,
    },
    Copy {
        src: Range,
        dst: Range,
    },
    Launch(Arc<LaunchOp>),
    /// Completes marker `id` (an event or a timestamp) at the current virtual time.
    Marker(u64),
    /// Blocks the stream until marker `id` completes.
    Wait(u64),
    Collective(CollectiveOp),
}

impl LaunchOp {
    /// The memory the launch touches: its bindings, then its indirect counts.
    pub fn ranges(&self) -> impl Iterator<Item = &Range> {
        let count = match &self.count {
            Count::Dynamic(range) => Some(range),
            Count::Static(_) => None,
        };
        self.bindings.iter().chain(count)
    }
}

/// This device's part in a collective of a simulated cluster.
#[derive(Clone, Debug)]
pub(crate) struct CollectiveOp {
    /// Numbers the device's collectives from 0, in enqueue order.
    pub id: u64,
    /// The communicator's devices (ordinals) in rank order.
    pub peers: Arc<[u32]>,
    pub rank: u32,
    /// Which collective of its kind (and peer, for point-to-point) on the communicator this
    /// is, counted in enqueue order: how the devices' parts are matched.
    pub sequence: u64,
    pub kind: CollectiveKind,
    pub phase: Phase,
}

/// The two halves of a collective on its stream. An all-reduce is an `Arrive` then a
/// `Complete`; a send only arrives, a receive only completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reads the source and leaves this device's part at the hub. Never waits.
    Arrive,
    /// Waits at the hub for the peers' parts and writes the destination. Only a device call
    /// that waits for the device runs it, never background progress, so a device never blocks
    /// on its peers before its host asked to wait.
    Complete,
}

#[derive(Clone, Debug)]
pub(crate) enum CollectiveKind {
    AllReduce {
        src: Range,
        dst: Range,
        elem: ElemType,
        op: ReduceOperation,
    },
    Send {
        src: Range,
        to: u32,
    },
    Recv {
        dst: Range,
        from: u32,
    },
}

impl CollectiveOp {
    /// The memory it reads (false) and writes (true): arriving reads the source, completing
    /// writes the destination.
    pub fn accesses(&self) -> Vec<(Range, bool)> {
        match (&self.kind, self.phase) {
            (CollectiveKind::AllReduce { src, .. }, Phase::Arrive)
            | (CollectiveKind::Send { src, .. }, _) => vec![(*src, false)],
            (CollectiveKind::AllReduce { dst, .. }, Phase::Complete)
            | (CollectiveKind::Recv { dst, .. }, _) => vec![(*dst, true)],
        }
    }

    pub fn name(&self) -> &'static str {
        self.kind.name()
    }
}

impl CollectiveKind {
    pub fn name(&self) -> &'static str {
        match self {
            CollectiveKind::AllReduce { .. } => "all_reduce",
            CollectiveKind::Send { .. } => "send",
            CollectiveKind::Recv { .. } => "recv",
        }
    }
}

impl Op {
    /// Whether the operation reads or writes `buffer`.
    pub fn touches(&self, buffer: u64) -> bool {
        match self {
            Op::Write { dst, .. } => dst.buffer == buffer,
            Op::Read { src, .. } => src.buffer == buffer,
            Op::Copy { src, dst } => src.buffer == buffer || dst.buffer == buffer,
            Op::Launch(launch) => launch.ranges().any(|r| r.buffer == buffer),
            Op::Marker(_) | Op::Wait(_) => false,
            Op::Collective(collective) => collective
                .accesses()
                .iter()
                .any(|(range, _)| range.buffer == buffer),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Op::Write { .. } => "write",
            Op::Read { .. } => "read",
            Op::Copy { .. } => "copy",
            Op::Launch(_) => "launch",
            Op::Marker(_) => "marker",
            Op::Wait(_) => "wait",
            Op::Collective(collective) => collective.name(),
        }
    }
}
