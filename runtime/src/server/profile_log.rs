//! What the server keeps for profiling: the per-launch profiles waiting for their stream's
//! `sync`, the summary by label, and the device's measured throughputs. The operations that
//! fill it are in `profiling.rs`.
//!
//! **Invariant:** a pending launch profile's marks were recorded on its stream around that one
//! launch; it is resolved (and leaves `pending`) at that stream's next `sync`, or dropped if the
//! device is lost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::device::Device;
use crate::ids::{BufferRange, CountArg};
use crate::kernel::Kernel;
use crate::profiling::ProfileLevel;
use crate::stream::StreamId;
use crate::throughput::{ThroughputKey, ThroughputValue};

/// One end of a profiled span: a device timestamp, or the host clock after a synchronisation.
#[derive(Debug)]
pub(crate) enum Mark<T> {
    Device(T),
    Host(Instant),
}

pub(super) struct PendingLaunch<D: Device> {
    pub(super) label: String,
    pub(super) stream: StreamId,
    pub(super) start: Mark<D::Timestamp>,
    pub(super) end: Mark<D::Timestamp>,
}

/// Per-launch profiling state, and the device's measured throughputs.
pub(crate) struct ProfileLog<D: Device> {
    pub(super) level: Option<ProfileLevel>,
    pub(super) pending: Vec<PendingLaunch<D>>,
    /// Per label: launches and their summed duration (`None` when untimed).
    pub(super) groups: BTreeMap<String, (u64, Option<Duration>)>,
    /// A launch was registered since the summary was last logged.
    pub(super) changed: bool,
    /// Measured once per key for this device's life (few keys: a list).
    pub(super) throughput: Vec<(ThroughputKey, ThroughputValue)>,
}

impl<D: Device> ProfileLog<D> {
    pub fn new(level: Option<ProfileLevel>) -> Self {
        Self {
            level,
            pending: Vec::new(),
            groups: BTreeMap::new(),
            changed: false,
            throughput: Vec::new(),
        }
    }

    pub(super) fn register(&mut self, label: String, duration: Option<Duration>) {
        let (launches, total) = self
            .groups
            .entry(label)
            .or_insert((0, duration.map(|_| Duration::ZERO)));
        *launches += 1;
        *total = total.zip(duration).map(|(t, d)| t + d);
        self.changed = true;
    }
}

/// What a launch is grouped under at `level`.
pub(super) fn label(level: ProfileLevel, kernel: &Kernel, count: &CountArg<BufferRange>) -> String {
    let count = || match count {
        CountArg::Static([x, y, z]) => format!("[{x}, {y}, {z}]"),
        CountArg::Dynamic(_) => "indirect".to_owned(),
    };
    match level {
        ProfileLevel::Basic | ProfileLevel::ExecutionOnly => kernel.name().to_owned(),
        ProfileLevel::Medium => format!("{} {}", kernel.name(), count()),
        ProfileLevel::Full => format!(
            "{} #{:016x} {}",
            kernel.name(),
            kernel.content_hash(),
            count()
        ),
    }
}
