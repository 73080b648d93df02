//! The server's side of profiling: timing marks on a stream, per-launch profiling at the level
//! in force (into the `ProfileLog` of `profile_log.rs`, whose invariant it keeps), and dry-run
//! launches.

use std::time::{Duration, Instant};

use super::Server;
use super::profile_log::{Mark, PendingLaunch, ProfileLog, label};
use super::streams::CaptureState;
use crate::device::Device;
use crate::dry_run::LaunchMode;
use crate::error::ServerError;
use crate::ids::BufferRange;
use crate::ids::CountArg;
use crate::kernel::{Kernel, Scalar};
use crate::profiling::{ProfileLevel, ProfileSummary, TimingMethod};
use crate::stream::StreamId;
use crate::throughput::{ThroughputKey, ThroughputValue};

impl<D: Device> Server<D> {
    fn timing_method(&self) -> TimingMethod {
        if self.device.properties().features.timestamps {
            TimingMethod::Device
        } else {
            TimingMethod::System
        }
    }

    /// Marks the current end of `stream`'s work. Refused while the stream captures a graph.
    pub fn profile_mark(
        &mut self,
        stream: StreamId,
        method: TimingMethod,
    ) -> Result<Mark<D::Timestamp>, ServerError> {
        self.check_alive()?;
        self.refuse_in_capture(stream, "profile")?;
        let raw = self.streams[&stream].raw;
        match method {
            TimingMethod::Device => {
                let mark = self.device.record_timestamp(raw);
                Ok(Mark::Device(self.noted_on(stream, mark)?))
            }
            TimingMethod::System => {
                // Failures of the stream's work stay queued for its next blocking call.
                if let Err(err) = self.device.synchronize(raw) {
                    self.push_device_error(stream, err);
                    self.check_alive()?;
                }
                Ok(Mark::Host(Instant::now()))
            }
        }
    }

    /// The time between two marks of `stream`, once the work between them has completed.
    pub fn profile_elapsed(
        &mut self,
        stream: StreamId,
        start: Mark<D::Timestamp>,
        end: Mark<D::Timestamp>,
    ) -> Result<Duration, ServerError> {
        match (start, end) {
            (Mark::Host(start), Mark::Host(end)) => Ok(end.saturating_duration_since(start)),
            (Mark::Device(start), Mark::Device(end)) => {
                self.check_alive()?;
                self.refuse_in_capture(stream, "resolve a profile")?;
                let raw = self.streams[&stream].raw;
                if let Err(err) = self.device.synchronize(raw) {
                    self.push_device_error(stream, err);
                    self.check_alive()?;
                }
                let elapsed = self.device.elapsed_ns(&start, &end);
                Ok(Duration::from_nanos(self.noted_on(stream, elapsed)?))
            }
            (start, end) => {
                unreachable!("one profile's marks use one timing method: {start:?} and {end:?}")
            }
        }
    }

    /// Launches as `mode` says, registering the launch at the profiling level in force.
    pub fn launch_as(
        &mut self,
        stream: StreamId,
        mode: LaunchMode,
        kernel: &Kernel,
        count: CountArg<BufferRange>,
        bindings: &[BufferRange],
        params: &[Scalar],
    ) {
        if mode == LaunchMode::DryRun {
            self.dry_launch(stream, kernel);
            return;
        }
        let capturing = self
            .streams
            .get(&stream)
            .is_some_and(|s| matches!(s.capture, CaptureState::Capturing { .. }));
        let level = self
            .profiling
            .level
            .filter(|_| !capturing && self.lost.is_none());
        let Some(level) = level else {
            self.launch(stream, kernel, count, bindings, params);
            return;
        };
        let label = label(level, kernel, &count);
        if level == ProfileLevel::ExecutionOnly {
            self.launch(stream, kernel, count, bindings, params);
            self.profiling.register(label, None);
            return;
        }
        let method = self.timing_method();
        let start = self.profile_mark(stream, method);
        self.launch(stream, kernel, count, bindings, params);
        let end = self.profile_mark(stream, method);
        match (start, end) {
            (Ok(start), Ok(end)) => self.profiling.pending.push(PendingLaunch {
                label,
                stream,
                start,
                end,
            }),
            (Err(err), _) | (_, Err(err)) => self.push_error(stream, err),
        }
    }

    /// Compiles `kernel` (a failure is queued on the stream, as a launch's would be) and
    /// executes nothing.
    fn dry_launch(&mut self, stream: StreamId, kernel: &Kernel) {
        if let Err(err) = self.compile(stream, kernel) {
            self.push_error(stream, err);
        }
    }

    /// Sets the level and starts a fresh summary; measured throughputs stay.
    pub fn set_profile_level(&mut self, level: Option<ProfileLevel>) {
        let throughput = std::mem::take(&mut self.profiling.throughput);
        self.profiling = ProfileLog::new(level);
        self.profiling.throughput = throughput;
    }

    pub fn cached_throughput(&self, key: ThroughputKey) -> Option<ThroughputValue> {
        self.profiling
            .throughput
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// Caches `value` for `key` unless a measurement got there first; returns the cached one.
    pub fn cache_throughput(
        &mut self,
        key: ThroughputKey,
        value: ThroughputValue,
    ) -> ThroughputValue {
        if let Some(cached) = self.cached_throughput(key) {
            return cached;
        }
        self.profiling.throughput.push((key, value));
        value
    }

    pub fn profile_summary(&self) -> ProfileSummary {
        let method = match self.profiling.level {
            Some(ProfileLevel::ExecutionOnly) | None => None,
            Some(_) => Some(self.timing_method()),
        };
        ProfileSummary::new(method, &self.profiling.groups)
    }

    /// After a sync of `stream`: registers its profiled launches and logs the summary if it
    /// changed.
    pub fn log_profile(&mut self, stream: StreamId) {
        let capturing = self
            .streams
            .get(&stream)
            .is_none_or(|s| matches!(s.capture, CaptureState::Capturing { .. }));
        if self.profiling.level.is_none() || capturing {
            return;
        }
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.profiling.pending)
            .into_iter()
            .partition(|p| p.stream == stream);
        self.profiling.pending = waiting;
        for launch in done {
            if self.lost.is_some() {
                break;
            }
            match self.profile_elapsed(stream, launch.start, launch.end) {
                Ok(duration) => self.profiling.register(launch.label, Some(duration)),
                Err(err) => self.push_error(stream, err),
            }
        }
        if std::mem::take(&mut self.profiling.changed) {
            tracing::info!(target: "lockstep::profile", %stream, "{}", self.profile_summary());
        }
    }
}
