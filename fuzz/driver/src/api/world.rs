//! The simulated world an input runs in, and what the oracle knows of it: each device's
//! streams (pending failures, capture state), the buffers in the input's slots with a model of
//! their bytes, the kernels built so far and the graphs captured.

use std::cell::{Cell, OnceCell};

use arbitrary::Arbitrary;
use lockstep::{CaptureError, Graph, Handle, ServerError, ServerOptions, StreamId};
use lockstep_sim::{SanitizerReport, SimCluster, SimConfig, SimDevice, SimProbe};

use super::kernel::Built;
use super::{Client, Regression};
use crate::model::Known;

/// Streams each client is pinned to, one clone per stream.
pub(super) const STREAMS: usize = 2;
/// Buffer slots of an input.
pub(super) const SLOTS: usize = 6;
/// Kernel slots of an input.
pub(super) const KERNELS: usize = 3;
/// Graph slots of an input.
pub(super) const GRAPHS: usize = 2;

/// The drawn shape of a world.
#[derive(Arbitrary, Debug)]
pub(super) struct WorldSpec {
    /// The simulators' seed.
    seed: u8,
    /// Devices of the first cluster: `1 + first % 3`.
    first: u8,
    /// Devices of a second cluster: `second % 4`, none for 0.
    second: u8,
    /// Per device (bit `2k`, `2k + 1`): without half floats, without timestamps.
    plain: u16,
}

/// One device: a client per stream, and what the oracle knows of each stream.
pub(super) struct DeviceState {
    /// The device until its first use, when its client starts: an input pays for the servers
    /// it uses only (the cluster's hub holds every device from the start).
    idle: Cell<Option<SimDevice>>,
    options: ServerOptions,
    /// Clients of the device, pinned to `StreamId(0)`, `StreamId(1)`, ...
    clients: OnceCell<Vec<Client>>,
    pub streams: Vec<StreamState>,
    pub probe: SimProbe,
    /// The cluster it belongs to (an index into [`World::clusters`]).
    pub cluster: usize,
    pub half_floats: bool,
    pub timestamps: bool,
    /// A budget or pools were installed: an allocation may be refused as out of memory.
    pub limited: bool,
}

/// What the oracle knows of one stream.
#[derive(Default)]
pub(super) struct StreamState {
    /// Work that may fail (a drawn kernel, a replay, a refused part) ran since the stream's
    /// last successful `sync`: its blocking calls may return that failure.
    pub dirty: bool,
    pub capture: Capture,
}

/// A stream's capture state, as `server/capture.rs` moves it.
#[derive(Default)]
pub(super) enum Capture {
    #[default]
    Idle,
    Prepared,
    Capturing {
        /// Whether the window held a write, which fails `stop_capture`.
        wrote: Wrote,
        /// The buffers (slot ids) the captured launches may write.
        writes: Vec<u64>,
    },
}

/// Whether a capture window held a write.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Wrote {
    No,
    /// A call that may write on the stream (a create's initial data): either outcome.
    Maybe,
    Yes,
}

impl StreamState {
    pub fn capturing(&self) -> bool {
        matches!(self.capture, Capture::Capturing { .. })
    }

    /// Notes a write on the stream: inside a capture window it fails `stop_capture`.
    pub fn note_write(&mut self, certain: bool) {
        if let Capture::Capturing { wrote, .. } = &mut self.capture {
            *wrote = match (certain, *wrote) {
                (true, _) | (false, Wrote::Yes) => Wrote::Yes,
                (false, _) => Wrote::Maybe,
            };
        }
    }

    /// Whether a blocking call on this stream may return `err` instead of its result: a capture
    /// refusal while the stream captures, or an earlier failure while it is dirty. A panic
    /// the runtime caught is never allowed.
    pub fn excuses(&self, err: &ServerError) -> bool {
        match err {
            ServerError::Capture(CaptureError::Refused { .. }) if self.capturing() => true,
            ServerError::KernelFault { .. }
            | ServerError::Device { .. }
            | ServerError::Collective { .. }
            | ServerError::Capture(_) => self.dirty,
            _ => false,
        }
    }

    /// Checks the error of a blocking call that reads or syncs the stream: refused while
    /// capturing, else excused by a pending failure.
    pub fn check_blocking(&self, what: &str, err: &ServerError) -> Result<(), String> {
        if self.excuses(err) {
            Ok(())
        } else {
            Err(format!("{what}: unexpected {err:?}"))
        }
    }
}

/// A buffer of the input, on one device, and what the model knows of its bytes.
pub(super) struct Slot {
    /// Unique in the input: graphs name the buffers their launches write by it.
    pub id: u64,
    pub device: usize,
    pub handle: Handle,
    pub bytes: Known,
}

/// A captured graph and what its replays write.
pub(super) struct GraphSlot {
    pub graph: Graph<SimDevice>,
    pub device: usize,
    pub stream: usize,
    pub writes: Vec<u64>,
}

/// Everything an input's operations act on.
pub(super) struct World {
    pub devices: Vec<DeviceState>,
    /// Each cluster's devices (indices into `devices`), in ordinal order.
    pub clusters: Vec<Vec<usize>>,
    pub slots: Vec<Option<Slot>>,
    pub kernels: Vec<Option<Built>>,
    pub graphs: Vec<Option<GraphSlot>>,
    next_id: u64,
}

impl World {
    /// Builds the clusters `spec` draws, with `regression`'s knob in every device's options.
    pub fn new(spec: &WorldSpec, regression: Option<Regression>) -> Self {
        let sizes = [1 + spec.first % 3, spec.second % 4];
        let mut options = ServerOptions::default();
        match regression {
            Some(Regression::LaunchAliasingByRange) => options.launch_aliasing_by_range = false,
            Some(Regression::PeerCopiesWithinGroup) => options.peer_copies_within_group = false,
            Some(Regression::LazyReadErrorsReturned) => options.lazy_read_errors_returned = false,
            _ => {}
        }
        let bound = regression != Some(Regression::BoundDynamicCounts);
        let mut devices = Vec::new();
        let mut clusters = Vec::new();
        for (cluster, &size) in sizes.iter().enumerate().filter(|(_, s)| **s > 0) {
            let configs = (0..size)
                .map(|ordinal| {
                    let bits = spec.plain >> (2 * devices.len() + 2 * ordinal as usize);
                    SimConfig {
                        seed: u64::from(spec.seed) * 8 + devices.len() as u64 + ordinal as u64,
                        half_floats: bits & 1 == 0,
                        timestamps: bits & 2 == 0,
                        bound_dynamic_counts: bound,
                        ..SimConfig::new(0)
                    }
                })
                .collect();
            let members = SimCluster::from_configs(configs).into_devices();
            let first = devices.len();
            devices.extend(
                members
                    .into_iter()
                    .map(|d| DeviceState::new(d, cluster, options)),
            );
            clusters.push((first..devices.len()).collect());
        }
        Self {
            devices,
            clusters,
            slots: (0..SLOTS).map(|_| None).collect(),
            kernels: (0..KERNELS).map(|_| None).collect(),
            graphs: (0..GRAPHS).map(|_| None).collect(),
            next_id: 0,
        }
    }

    /// The device `pick` names.
    pub fn device(&self, pick: u8) -> usize {
        pick as usize % self.devices.len()
    }

    /// The client of device `device` pinned to stream `stream`.
    pub fn client(&self, device: usize, stream: usize) -> &Client {
        &self.devices[device].clients()[stream]
    }

    pub fn stream(&self, device: usize, stream: usize) -> &StreamState {
        &self.devices[device].streams[stream]
    }

    pub fn stream_mut(&mut self, device: usize, stream: usize) -> &mut StreamState {
        &mut self.devices[device].streams[stream]
    }

    /// The occupied slot `pick` names, if any.
    pub fn slot(&self, pick: u8) -> Option<&Slot> {
        self.slots[pick as usize % SLOTS].as_ref()
    }

    pub fn slot_mut(&mut self, pick: u8) -> Option<&mut Slot> {
        self.slots[pick as usize % SLOTS].as_mut()
    }

    /// Puts a new buffer into slot `pick`, dropping what it held.
    pub fn fill_slot(&mut self, pick: u8, device: usize, handle: Handle, bytes: Known) {
        self.next_id += 1;
        self.slots[pick as usize % SLOTS] = Some(Slot {
            id: self.next_id,
            device,
            handle,
            bytes,
        });
    }

    /// Forgets the bytes of the slots whose ids are in `ids` (a launch's or a replay's writes).
    pub fn forget(&mut self, ids: &[u64]) {
        for slot in self.slots.iter_mut().flatten() {
            if ids.contains(&slot.id) {
                slot.bytes.forget_all();
            }
        }
    }

    /// Ends the input: closes every capture window, syncs every stream, drops everything, then
    /// checks that no device's sanitizer saw a runtime bug.
    pub fn finish(mut self) -> Result<(), String> {
        self.graphs.iter_mut().for_each(|g| *g = None);
        for device in 0..self.devices.len() {
            if !self.devices[device].started() {
                continue;
            }
            for stream in 0..STREAMS {
                super::graphs::close(&mut self, device, stream)?;
                let result = self.client(device, stream).sync();
                if let Err(err) = result {
                    self.stream(device, stream)
                        .check_blocking("final sync", &err)?;
                }
            }
        }
        let probes: Vec<SimProbe> = self.devices.iter().map(|d| d.probe.clone()).collect();
        drop(self);
        for (device, probe) in probes.iter().enumerate() {
            let observations = probe.observations();
            if let Some(bug) = observations.reports.iter().find(|r| runtime_bug(r)) {
                return Err(format!("device {device}'s sanitizer: {bug}"));
            }
        }
        Ok(())
    }
}

/// Whether the sanitizer's `report` is the runtime's bug rather than the program's: the runtime
/// orders streams, frees only unused memory and keeps the device contract, whatever the
/// program does (reads of unwritten bytes and a kernel's own races are the program's).
fn runtime_bug(report: &SanitizerReport) -> bool {
    matches!(
        report,
        SanitizerReport::Race { .. }
            | SanitizerReport::UseAfterFree { .. }
            | SanitizerReport::FreeWhileInUse { .. }
            | SanitizerReport::ContractViolation(_)
    )
}

impl DeviceState {
    fn new(device: SimDevice, cluster: usize, options: ServerOptions) -> Self {
        let probe = device.probe();
        let (half_floats, timestamps) = (device.config().half_floats, device.config().timestamps);
        Self {
            idle: Cell::new(Some(device)),
            options,
            clients: OnceCell::new(),
            streams: (0..STREAMS).map(|_| StreamState::default()).collect(),
            probe,
            cluster,
            half_floats,
            timestamps,
            limited: false,
        }
    }

    /// The device's clients, one per stream, starting its server at the first call.
    pub fn clients(&self) -> &[Client] {
        self.clients.get_or_init(|| {
            let device = self.idle.take().expect("a device starts once");
            let client = Client::inline(device, self.options);
            (0..STREAMS)
                .map(|stream| {
                    let mut c = client.clone();
                    c.set_stream(StreamId(stream as u64));
                    c
                })
                .collect()
        })
    }

    /// Whether the device's server started.
    pub fn started(&self) -> bool {
        self.clients.get().is_some()
    }
}
