//! What the simulator's kernel sanitizer finds in cubecl's kernels — races, barriers in
//! divergent control flow, reads of unwritten shared memory — tied back to the launch that
//! raised it.
//!
//! The simulator reports a finding with its launch's enqueue number; the server notes the
//! numbers each launch call enqueued ([`Findings::launched`]) and, after every drain, takes
//! the new reports ([`Findings::collect`]). By default a finding is *reported*: written to
//! the launch log (`finding\t<stream>\t<kernel>\t<kind>\t<detail>`, `<stream>` being cubecl's
//! stream id, as for refusals) and, the first time a kernel shows a kind, to stderr; the
//! kernel's results stand, as they would on a GPU. With `LOCKSTEP_CUBECL_FINDINGS=fail` a
//! finding also fails the launch: its outputs carry the finding as their failure, so the
//! test reading them fails naming it.
//!
//! **Invariant:** a noted launch is forgotten only once its stream was drained (every
//! operation it enqueued ran, so every finding about it was reported).

use std::collections::{BTreeMap, BTreeSet};

use cubecl_environment::stream::StreamId;
use lockstep_sim::{KernelFinding, SanitizerReport, SimProbe};

use crate::books::{Region, StreamKey};

/// The variable choosing what a finding does: `report` (the default) or `fail`.
pub const FINDINGS_ENV: &str = "LOCKSTEP_CUBECL_FINDINGS";

/// What a finding does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Logged and printed; the launch's results stand.
    Report,
    /// Also fails the launch's outputs.
    Fail,
}

impl Mode {
    /// `LOCKSTEP_CUBECL_FINDINGS`'s value: unset or empty is `report`.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value.map(str::trim) {
            None | Some("") | Some("report") => Ok(Mode::Report),
            Some("fail") => Ok(Mode::Fail),
            Some(other) => Err(format!(
                "{FINDINGS_ENV}={other:?}: expected `report` (the default) or `fail`"
            )),
        }
    }

    /// The mode the environment asks for.
    ///
    /// # Panics
    /// When `LOCKSTEP_CUBECL_FINDINGS` holds neither `report` nor `fail`.
    pub fn from_env() -> Self {
        let value = std::env::var(FINDINGS_ENV).ok();
        Self::parse(value.as_deref()).unwrap_or_else(|error| panic!("{error}"))
    }
}

/// One launch call: the operations it enqueued and what a finding names.
#[derive(Debug)]
struct Launch {
    /// One past its last enqueue number.
    end: u64,
    key: StreamKey,
    stream: StreamId,
    kernel: String,
    written: Vec<Region>,
}

/// A finding tied to its launch: what the server reports, and fails in `fail` mode.
#[derive(Debug)]
pub struct Found {
    /// cubecl's stream that launched the kernel.
    pub stream: StreamId,
    /// The kernel's name.
    pub kernel: String,
    /// What the sanitizer found.
    pub kind: KernelFinding,
    /// The invocations, location and statements involved.
    pub detail: String,
    /// The launch's outputs.
    pub written: Vec<Region>,
}

/// The findings of one device: empty where the device has no sanitizer.
#[derive(Debug)]
pub struct Findings {
    probe: Option<SimProbe>,
    mode: Mode,
    /// Reports already taken.
    seen: usize,
    /// Launches not yet drained, by their first enqueue number.
    launches: BTreeMap<u64, Launch>,
    /// (kernel, kind) already printed.
    printed: BTreeSet<(String, String)>,
}

impl Findings {
    /// The findings of the device `probe` watches (`None`: a device without a sanitizer).
    pub fn new(probe: Option<SimProbe>, mode: Mode) -> Self {
        Self {
            probe,
            mode,
            seen: 0,
            launches: BTreeMap::new(),
            printed: BTreeSet::new(),
        }
    }

    /// What a finding does on this device.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The device's enqueue count: read before and after a launch call.
    pub fn enqueued(&self) -> Option<u64> {
        Some(self.probe.as_ref()?.observations().ops_enqueued)
    }

    /// A launch call enqueued operations `ops` on Lockstep stream `key`.
    pub fn launched(
        &mut self,
        ops: std::ops::Range<u64>,
        key: StreamKey,
        stream: StreamId,
        kernel: &str,
        written: &[Region],
    ) {
        if ops.is_empty() {
            return;
        }
        let launch = Launch {
            end: ops.end,
            key,
            stream,
            kernel: kernel.to_owned(),
            written: written.to_vec(),
        };
        self.launches.insert(ops.start, launch);
    }

    /// The findings reported since the last call, each tied to its launch; then forgets the
    /// launches of the `drained` streams (their every operation ran).
    pub fn collect(&mut self, drained: &[StreamKey]) -> Vec<Found> {
        let Some(probe) = &self.probe else {
            return Vec::new();
        };
        let reports: Vec<SanitizerReport> = {
            let observations = probe.observations();
            let new = observations.reports.get(self.seen..).unwrap_or_default();
            self.seen = observations.reports.len();
            new.to_vec()
        };
        let found = reports
            .into_iter()
            .filter_map(|report| match report {
                SanitizerReport::Kernel {
                    finding,
                    detail,
                    op,
                    ..
                } => self.tie(op, finding, detail),
                _ => None,
            })
            .collect();
        self.launches
            .retain(|_, launch| !drained.contains(&launch.key));
        found
    }

    /// The finding with its launch, printing it the first time its kernel shows its kind.
    fn tie(&mut self, op: u64, kind: KernelFinding, detail: String) -> Option<Found> {
        let (_, launch) = self.launches.range(..=op).next_back()?;
        if op >= launch.end {
            return None;
        }
        if self
            .printed
            .insert((launch.kernel.clone(), kind.to_string()))
        {
            eprintln!(
                "lockstep-cubecl: the kernel sanitizer found a {kind} in `{}`: {detail}",
                launch.kernel
            );
        }
        Some(Found {
            stream: launch.stream,
            kernel: launch.kernel.clone(),
            kind,
            detail,
            written: launch.written.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
