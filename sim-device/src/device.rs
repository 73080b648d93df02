//! `SimDevice`: the deterministic mock hardware. Streams are queues; a seeded scheduler picks
//! which ready stream advances next; time is virtual.
//!
//! **Architecture Invariant:** nothing here reads the wall clock, OS randomness or the order of
//! an unseeded hash map. Every decision comes from `SimConfig::seed` and from the order of the
//! calls the runtime makes, so equal seeds and equal programs give equal traces.

mod collective;

pub use collective::{COLLECTIVE_TIMEOUT_NS, SimCluster, SimWorldDevices};

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use lockstep::collective::CommunicatorId;
use lockstep::device::contract::{self, CheckedBuffer, Owner};
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::host_pool::{HeapAllocator, HostPool, HostPoolStats};
use lockstep::kernel::{CompileOptions, ElemType, KernelDef, Scalar};
use lockstep::{
    Bytes, ContractViolation, Device, DeviceError, DeviceProperties, Features, GraphSupport,
    PinnedMemory, ReduceOperation, StreamId,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::SimConfig;
use crate::fault::{FaultInjector, FaultKind, InjectedFault};
use crate::interpreter::{self, BindingData};
use crate::memory::{SanitizerReport, SimMemory};
use crate::ops::{CollectiveKind, Count, LaunchOp, Op, Phase, Range};
use crate::sanitizer::{Access, Clock, Sanitizer};
use crate::trace::{Content, Detail, Executed, Observations, Trace};

/// A simulated allocation.
#[derive(Debug)]
pub struct SimBuffer {
    id: u64,
    size: u64,
    owner: Owner,
}

impl CheckedBuffer for SimBuffer {
    fn owner(&self) -> Owner {
        self.owner
    }

    fn len_bytes(&self) -> u64 {
        self.size
    }
}

/// A simulated stream: an index into the device's streams, in creation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimStream(u32);

/// An event: a marker that completes when the stream reaches it.
#[derive(Debug)]
pub struct SimEvent(u64);

/// A timestamp: a marker that records the virtual time at which the stream reached it.
#[derive(Debug)]
pub struct SimTimestamp(u64);

/// A read in flight.
#[derive(Debug)]
pub struct SimRead(u64);

/// A "compiled" kernel: the IR itself, interpreted at launch.
#[derive(Debug)]
pub struct SimKernel {
    def: Arc<KernelDef>,
    options: CompileOptions,
}

/// A captured graph: the launches recorded between `begin_capture` and `end_capture`.
#[derive(Debug)]
pub struct SimGraph {
    launches: Vec<Arc<LaunchOp>>,
    captured_on: Owner,
}

#[derive(Debug, Default)]
struct StreamState {
    /// Operations in order, each with the host's clock when it was enqueued and its device-wide
    /// enqueue number.
    queue: VecDeque<(Op, Clock, u64)>,
    /// Asynchronous failures not yet taken by the runtime.
    errors: Vec<DeviceError>,
    /// Launches recorded while capturing.
    capture: Option<Vec<Arc<LaunchOp>>>,
    /// The runtime's id of this stream ([`Device::label_stream`]), for messages and for
    /// faults aimed at it.
    label: Option<StreamId>,
}

/// Handle to what a [`SimDevice`] has observed, readable while the runtime owns the device.
#[derive(Clone, Debug)]
pub struct SimProbe(Arc<Mutex<Observations>>);

impl SimProbe {
    /// What the device has observed so far (a lock held while the guard lives: drop it before the
    /// next device call).
    pub fn observations(&self) -> MutexGuard<'_, Observations> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The deterministic simulated device. See the crate documentation.
#[derive(Debug)]
pub struct SimDevice {
    config: SimConfig,
    /// Tells this device's buffers and graphs from other devices' (`contract`).
    owner: Owner,
    properties: DeviceProperties,
    rng: ChaCha8Rng,
    faults: FaultInjector,
    memory: SimMemory,
    streams: Vec<StreamState>,
    /// Completion time of each marker (events and timestamps), by id; `None` until reached.
    markers: Vec<Option<u64>>,
    /// Finished reads waiting for `wait_read`, by id; `None` while in flight.
    reads: BTreeMap<u64, Option<Result<Bytes, DeviceError>>>,
    next_read: u64,
    clock_ns: u64,
    sanitizer: Sanitizer,
    /// The sanitizer clock each finished read executed at, until `wait_read` takes it.
    read_clocks: BTreeMap<u64, Clock>,
    trace: Trace,
    observations: Arc<Mutex<Observations>>,
    lost: Option<String>,
    /// The cluster this device belongs to (alone unless built by [`SimCluster`]).
    cluster: collective::ClusterMember,
    /// Inside a call that waits for the device (`run_until`): only then may a collective wait
    /// for its peers (see `ops::Phase`).
    host_waits: bool,
    /// The enqueue number of the operation executing now, if one is.
    executing: Option<u64>,
    /// The heap blocks reads are returned in.
    host_pool: Arc<HostPool<HeapAllocator>>,
}

/// Most bytes of returned host blocks a simulator keeps for reuse.
pub const HOST_POOL_CAP_BYTES: usize = 64 << 20;

/// Per-byte cost of transfers in virtual time: 32 bytes per nanosecond.
const BYTES_PER_NS: u64 = 32;
const TRANSFER_LATENCY_NS: u64 = 500;
const LAUNCH_LATENCY_NS: u64 = 2_000;

impl SimDevice {
    /// A device built from `config`, alone (for a device with peers, see
    /// [`SimCluster`](crate::SimCluster)).
    pub fn new(config: SimConfig) -> Self {
        let properties = DeviceProperties {
            name: "lockstep simulator".to_owned(),
            backend: format!("sim (seed {})", config.seed),
            memory_bytes: config.memory_bytes,
            max_allocation_bytes: config.max_allocation_bytes,
            alignment_bytes: 256,
            max_load_width_bytes: 16,
            max_workgroups: [65_535; 3],
            // WebGPU's guaranteed minimum (maxComputeWorkgroupStorageSize), so a kernel that
            // fits the simulator fits every device.
            max_shared_memory_bytes: 16 << 10,
            features: Features {
                graphs: GraphSupport::Software,
                timestamps: config.timestamps,
                concurrent_streams: true,
                // The half floats' arithmetic is `half`'s exact rounding of `f32` results.
                f16: config.half_floats,
                bf16: config.half_floats,
            },
        };
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        let fault_rng = ChaCha8Rng::seed_from_u64(config.seed ^ 0x9e37_79b9_7f4a_7c15);
        Self {
            faults: FaultInjector::new(config.faults.clone(), fault_rng),
            trace: Trace::new(config.record_trace),
            config,
            owner: Owner::fresh(),
            properties,
            rng,
            memory: SimMemory::default(),
            streams: Vec::new(),
            markers: Vec::new(),
            reads: BTreeMap::new(),
            next_read: 0,
            clock_ns: 0,
            sanitizer: Sanitizer::default(),
            read_clocks: BTreeMap::new(),
            observations: Arc::new(Mutex::new(Observations::default())),
            lost: None,
            cluster: collective::ClusterMember::alone(),
            host_waits: false,
            executing: None,
            host_pool: HostPool::new(HeapAllocator, HOST_POOL_CAP_BYTES),
        }
    }

    /// A handle to read the trace hash and sanitizer reports while the runtime owns the device.
    pub fn probe(&self) -> SimProbe {
        SimProbe(self.observations.clone())
    }

    /// The config the device was built from.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    fn observe(&self) -> MutexGuard<'_, Observations> {
        self.observations.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn report(&self, report: SanitizerReport) {
        self.observe().reports.push(report);
    }

    /// Passes a contract check's outcome on, reporting a refusal to the sanitizer as well: the
    /// runtime validates before it calls, so under it a refusal is a runtime bug the suite must
    /// fail on, while a caller driving the device directly gets the typed error.
    fn checked<T>(&self, outcome: Result<T, DeviceError>) -> Result<T, DeviceError> {
        if let Err(err) = &outcome {
            self.report(SanitizerReport::ContractViolation(err.clone()));
        }
        outcome
    }

    /// Counts one trigger of `kind` on `stream`; when it faults, records the fault and returns
    /// the tag its error message must carry.
    fn inject(&mut self, kind: FaultKind, stream: Option<u32>) -> Option<String> {
        let stream_id = stream.and_then(|s| self.label_of(s));
        if !self.faults.fires(kind, stream_id) {
            return None;
        }
        let mut obs = self.observe();
        let fault = InjectedFault {
            id: obs.faults.len() as u64,
            kind,
            stream,
            stream_id,
            op: self.executing,
        };
        obs.faults.push(fault);
        Some(fault.tag())
    }

    /// The runtime's id of device stream `stream`.
    ///
    /// # Panics
    /// If a scripted fault is aimed at a stream and the runtime never named this one: the
    /// fault could never fire, and the test would pass without injecting it. A device that
    /// wraps this one must forward [`Device::label_stream`].
    fn label_of(&self, stream: u32) -> Option<StreamId> {
        let label = self.streams[stream as usize].label;
        assert!(
            label.is_some() || !self.faults.aims_at_streams(),
            "a scripted fault is aimed at a stream, but device stream {stream} has no StreamId: \
             the runtime names its streams through Device::label_stream, which a device wrapping \
             SimDevice must forward"
        );
        label
    }

    /// How messages name device stream `stream`: the runtime's id (`stream-3`,
    /// `thread-stream-0`), or the device's index where the runtime named none.
    fn stream_name(&self, stream: u32) -> String {
        match self.streams[stream as usize].label {
            Some(id) => id.to_string(),
            None => format!("device stream {stream}"),
        }
    }

    fn check_alive(&self) -> Result<(), DeviceError> {
        match &self.lost {
            Some(reason) => Err(DeviceError::Lost {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The state of `stream`, which `operation` names; a typed refusal for a stream this
    /// device did not create.
    fn stream_mut(
        &mut self,
        operation: &str,
        stream: SimStream,
    ) -> Result<&mut StreamState, DeviceError> {
        let index = self.checked(contract::stream(operation, stream.0, self.streams.len()))?;
        Ok(&mut self.streams[index])
    }

    /// Queues `op` on `stream`, refusing anything but launches while the stream captures.
    fn enqueue(&mut self, stream: SimStream, op: Op) -> Result<(), DeviceError> {
        let index = self.checked(contract::stream(op.name(), stream.0, self.streams.len()))?;
        self.check_alive()?;
        if let Some(capture) = &mut self.streams[index].capture {
            return match op {
                Op::Launch(launch) => {
                    capture.push(launch);
                    Ok(())
                }
                other => Err(DeviceError::Capture {
                    reason: format!("`{}` cannot be recorded into a graph", other.name()),
                }),
            };
        }
        let enqueued = self.sanitizer.host_clock();
        let number = {
            let mut obs = self.observe();
            obs.ops_enqueued += 1;
            obs.ops_enqueued - 1
        };
        self.streams[index].queue.push_back((op, enqueued, number));
        self.background();
        Ok(())
    }

    /// Enqueues a write of `data` to `dst` at `offset`, once the call is checked.
    fn enqueue_write(
        &mut self,
        stream: SimStream,
        dst: &SimBuffer,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<(), DeviceError> {
        self.checked(contract::range(
            self.owner,
            "write",
            dst,
            offset,
            data.len() as u64,
        ))?;
        let dst = Range {
            buffer: dst.id,
            offset,
            len: data.len() as u64,
        };
        self.enqueue(stream, Op::Write { dst, data })
    }

    /// A read of `len` bytes in a block of the device's host pool, as CUDA lends its pinned
    /// blocks (heap memory here, so the pooled path is what the suite and the explorer drive):
    /// `fill` stores every byte of the block it is given, straight from device memory.
    fn lend(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Bytes {
        if len == 0 {
            return Bytes::default();
        }
        let mut block = (self.host_pool.lend(len)).expect("heap blocks are always allocated");
        fill(block.as_mut_slice());
        block.into_bytes()
    }

    fn new_marker(&mut self) -> u64 {
        self.markers.push(None);
        self.markers.len() as u64 - 1
    }

    // ---- scheduling ----------------------------------------------------------------------

    /// Runs a seeded number of operations, as a GPU progresses while the host works.
    fn background(&mut self) {
        let steps = self.rng.random_range(0..=self.config.max_background_steps);
        for _ in 0..steps {
            if !self.step() {
                break;
            }
        }
    }

    fn ready(&self, state: &StreamState) -> bool {
        match state.queue.front() {
            None => false,
            Some((Op::Wait(marker), ..)) => self.markers[*marker as usize].is_some(),
            Some((Op::Collective(c), ..)) if c.phase == Phase::Complete => self.host_waits,
            Some(_) => true,
        }
    }

    /// Executes the next operation of a randomly chosen ready stream. Returns false when no
    /// stream can advance.
    fn step(&mut self) -> bool {
        if self.lost.is_some() {
            return false;
        }
        let ready: Vec<usize> = (0..self.streams.len())
            .filter(|&i| self.ready(&self.streams[i]))
            .collect();
        if ready.is_empty() {
            return false;
        }
        let index = ready[self.rng.random_range(0..ready.len())];
        let (op, enqueued, number) = self.streams[index]
            .queue
            .pop_front()
            .expect("a ready stream has an operation");
        self.executing = Some(number);
        self.execute(index as u32, op, &enqueued);
        self.executing = None;
        true
    }

    /// Steps until `done` holds.
    ///
    /// # Panics
    /// If no stream can advance before that: the runtime waits on something that can never
    /// happen (an event recorded after the wait that needs it), a contract violation.
    fn run_until(&mut self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        self.host_waits = true;
        self.run_until_inner(what, &mut done);
        self.host_waits = false;
    }

    /// `run_until`'s loop; the caller sets and clears `host_waits` around it.
    fn run_until_inner(&mut self, what: &str, done: &mut impl FnMut(&Self) -> bool) {
        while !done(self) {
            if self.lost.is_some() {
                return;
            }
            if !self.step() {
                panic!(
                    "simulator deadlock while waiting for {what}: no stream can advance \
                     (seed {}); an event is waited on before it was recorded",
                    self.config.seed
                );
            }
        }
    }

    // ---- execution -----------------------------------------------------------------------

    /// The memory `op` touches, for the sanitizer.
    fn accesses(op: &Op) -> Vec<(Range, bool)> {
        match op {
            Op::Write { dst, .. } => vec![(*dst, true)],
            Op::Read { src, .. } => vec![(*src, false)],
            Op::Copy { src, dst } => vec![(*src, false), (*dst, true)],
            Op::Launch(launch) => {
                let declared = &launch.kernel.bindings;
                let mut all: Vec<(Range, bool)> = launch
                    .bindings
                    .iter()
                    .enumerate()
                    .map(|(i, range)| {
                        // Past the declared bindings comes the fault record, written.
                        let write = declared
                            .get(i)
                            .is_none_or(|d| d.access == lockstep::kernel::Access::ReadWrite);
                        (*range, write)
                    })
                    .collect();
                if let Count::Dynamic(range) = &launch.count {
                    all.push((*range, false));
                }
                all
            }
            Op::Marker(_) | Op::Wait(_) => Vec::new(),
            Op::Collective(collective) => collective.accesses(),
        }
    }

    /// Ticks the sanitizer's clock for `op` on `stream` and checks its accesses.
    fn sanitize(&mut self, stream: u32, op: &Op, enqueued: &Clock) -> Clock {
        let clock = self.sanitizer.begin(stream, enqueued);
        let operation = match op {
            Op::Launch(launch) => format!("launch of `{}`", launch.kernel.name),
            other => other.name().to_owned(),
        };
        for (range, write) in Self::accesses(op) {
            let access = Access {
                buffer: range.buffer,
                offset: range.offset,
                len: range.len,
                write,
            };
            for report in self.sanitizer.access(stream, &clock, access, &operation) {
                self.report(report);
            }
        }
        match op {
            Op::Marker(id) => self.sanitizer.marker(*id, clock.clone()),
            Op::Wait(id) => self.sanitizer.wait(stream, *id),
            _ => {}
        }
        clock
    }

    fn execute(&mut self, stream: u32, op: Op, enqueued: &Clock) {
        if self.lost_before(stream, &op) {
            return;
        }
        // Reports this operation raises go with its trace entry when the trace is kept.
        let reports_from = self.trace.records().then(|| self.observe().reports.len());
        let sanitizer_clock = self.sanitize(stream, &op, enqueued);
        let marker = match op {
            Op::Marker(id) | Op::Wait(id) => Some(id),
            _ => None,
        };
        let start_ns = self.clock_ns;
        let name = op.name();
        let (duration_ns, detail, content) = self.perform(stream, op, sanitizer_clock);
        self.clock_ns += duration_ns;
        let executed = Executed {
            start_ns,
            duration_ns,
            stream,
            op: name,
            detail,
            marker,
            bytes_live: self.memory.bytes_live,
        };
        let mut obs = self.observations.lock().unwrap_or_else(|p| p.into_inner());
        self.trace.push(&mut obs, executed, reports_from, content);
    }

    /// Loses the device before `op` runs, for an injected loss (drawn first) or once virtual
    /// time passed the watchdog; returns whether it did.
    fn lost_before(&mut self, stream: u32, op: &Op) -> bool {
        if let Some(tag) = self.inject(FaultKind::DeviceLoss, Some(stream)) {
            self.lose(format!(
                "injected device loss before `{}` on {} {tag} (seed {})",
                op.name(),
                self.stream_name(stream),
                self.config.seed
            ));
            return true;
        }
        if self.clock_ns > self.config.watchdog_ns {
            self.observe().watchdog_fired = true;
            self.lose(format!(
                "watchdog: virtual time passed {} ns before `{}` on {} (seed {})",
                self.config.watchdog_ns,
                op.name(),
                self.stream_name(stream),
                self.config.seed
            ));
            return true;
        }
        false
    }

    /// Carries `op` out at the current virtual time: its duration, what the trace records of
    /// it, and the content it moved. `sanitizer_clock` is the operation's vector clock, kept
    /// with a read for the host's later accesses.
    fn perform(&mut self, stream: u32, op: Op, sanitizer_clock: Clock) -> (u64, Detail, Content) {
        match op {
            Op::Write { dst, data } => {
                let result = self.execute_write(stream, dst, &data);
                let content = Content::of(&data);
                (transfer_ns(dst.len), Detail::Transfer(dst, result), content)
            }
            Op::Read { src, read } => self.perform_read(stream, src, read, sanitizer_clock),
            Op::Copy { src, dst } => {
                let (result, outcome) = self.execute_read(stream, src);
                let outcome = match result {
                    Ok(()) => {
                        let bytes = (self.memory.live(src.buffer))
                            .read(src.offset as usize, src.len as usize);
                        self.execute_write(stream, dst, &bytes)
                    }
                    Err(err) => {
                        self.streams[stream as usize].errors.push(err);
                        outcome
                    }
                };
                (
                    transfer_ns(src.len),
                    Detail::Copy(src, dst, outcome),
                    Content::none(),
                )
            }
            Op::Launch(launch) => {
                let invocations = self.execute_launch(stream, &launch);
                (
                    LAUNCH_LATENCY_NS + invocations,
                    Detail::Launch(launch, invocations),
                    Content::none(),
                )
            }
            Op::Marker(id) => {
                self.markers[id as usize] = Some(self.clock_ns);
                (0, Detail::Marker(id), Content::none())
            }
            Op::Wait(id) => (0, Detail::Marker(id), Content::none()),
            Op::Collective(collective) => {
                let (duration_ns, detail, content) = self.execute_collective(stream, collective);
                (duration_ns, Detail::Text(detail), Content::of(&content))
            }
        }
    }

    /// A read completes into pending read `read`: the bytes lent from the host pool, or the
    /// injected failure.
    fn perform_read(
        &mut self,
        stream: u32,
        src: Range,
        read: u64,
        sanitizer_clock: Clock,
    ) -> (u64, Detail, Content) {
        let (result, outcome) = self.execute_read(stream, src);
        let lent = result.map(|()| {
            let alloc = self.memory.live(src.buffer);
            let start = src.offset as usize;
            self.lend(src.len as usize, |out| alloc.read_into(start, out))
        });
        let content = Content::of(lent.as_deref().unwrap_or_default());
        self.reads.insert(read, Some(lent));
        self.read_clocks.insert(read, sanitizer_clock);
        (
            transfer_ns(src.len),
            Detail::Transfer(src, outcome),
            content,
        )
    }

    fn lose(&mut self, reason: String) {
        for state in &mut self.streams {
            state.queue.clear();
        }
        for read in self.reads.values_mut() {
            if read.is_none() {
                *read = Some(Err(DeviceError::Lost {
                    reason: reason.clone(),
                }));
            }
        }
        self.lost = Some(reason);
        self.cluster.leave();
    }

    /// Writes `data`; returns a suffix for the trace describing a failure, if any.
    fn execute_write(&mut self, stream: u32, dst: Range, data: &[u8]) -> &'static str {
        if let Some(tag) = self.inject(FaultKind::TransferFailure, Some(stream)) {
            let reason = format!(
                "injected failure writing {} bytes to buffer {} on {} {tag} (seed {})",
                dst.len,
                dst.buffer,
                self.stream_name(stream),
                self.config.seed
            );
            self.streams[stream as usize]
                .errors
                .push(DeviceError::TransferFailed { reason });
            return " failed";
        }
        match self.memory.get_mut(dst.buffer, "write") {
            Ok(alloc) => {
                let (start, len) = (dst.offset as usize, dst.len as usize);
                debug_assert_eq!(len, data.len(), "a write carries its range's bytes");
                alloc.write(start, data);
                ""
            }
            Err(report) => {
                self.fault_use_after_free(stream, "write", report);
                " use-after-free"
            }
        }
    }

    /// Checks a read of `src` (a transfer failure injected, memory freed, bytes never written);
    /// returns a suffix for the trace describing a failure, if any. Once it is `Ok`, `src` is
    /// live, to be read.
    fn execute_read(&mut self, stream: u32, src: Range) -> (Result<(), DeviceError>, &'static str) {
        if let Some(tag) = self.inject(FaultKind::TransferFailure, Some(stream)) {
            let err = DeviceError::TransferFailed {
                reason: format!(
                    "injected failure reading {} bytes of buffer {} on {} {tag} (seed {})",
                    src.len,
                    src.buffer,
                    self.stream_name(stream),
                    self.config.seed
                ),
            };
            return (Err(err), " failed");
        }
        match self.memory.get_mut(src.buffer, "read") {
            Ok(alloc) => {
                let (start, len) = (src.offset as usize, src.len as usize);
                if !alloc.all_written(start, len) {
                    self.report(SanitizerReport::UninitializedRead {
                        operation: "read".to_owned(),
                        buffer: src.buffer,
                        offset: src.offset,
                        len: src.len,
                    });
                }
                (Ok(()), "")
            }
            Err(report) => {
                self.report(report);
                (
                    Err(DeviceError::ExecutionFault {
                        operation: "read".to_owned(),
                        reason: format!("buffer {} was already freed", src.buffer),
                    }),
                    " use-after-free",
                )
            }
        }
    }

    fn fault_use_after_free(&mut self, stream: u32, operation: &str, report: SanitizerReport) {
        let reason = report.to_string();
        self.report(report);
        self.streams[stream as usize]
            .errors
            .push(DeviceError::ExecutionFault {
                operation: operation.to_owned(),
                reason,
            });
    }

    /// Runs a launch; returns the number of invocations (its cost in virtual nanoseconds).
    fn execute_launch(&mut self, stream: u32, launch: &LaunchOp) -> u64 {
        let operation = format!("launch of `{}`", launch.kernel.name);
        if let Some(tag) = self.inject(FaultKind::KernelFault, Some(stream)) {
            let reason = format!(
                "injected kernel fault on {} {tag} (seed {})",
                self.stream_name(stream),
                self.config.seed
            );
            self.streams[stream as usize]
                .errors
                .push(DeviceError::ExecutionFault { operation, reason });
            return 0;
        }
        let Some(count) = self.launch_count(stream, launch, &operation) else {
            return 0;
        };
        // A dynamic count above the device's maximum makes the launch do nothing, as WebGPU
        // has it for an indirect dispatch (a static one is refused at the call).
        let maximum = self.properties.max_workgroups;
        let above = count.iter().zip(maximum).any(|(&c, max)| c > max);
        if above && self.config.bound_dynamic_counts {
            return 0;
        }
        let Some(mut data) = self.launch_bindings(stream, launch, &operation) else {
            return 0;
        };
        let invocations = count.iter().map(|&c| c as u64).product::<u64>()
            * launch.kernel.workgroup_invocations();
        match interpreter::run(
            &launch.kernel,
            launch.options.into(),
            count,
            &mut data,
            &launch.params,
            &mut self.rng,
        ) {
            Ok(outcome) => self.complete_launch(launch, &operation, count, &outcome, &data),
            Err(trap) => {
                self.streams[stream as usize]
                    .errors
                    .push(DeviceError::ExecutionFault {
                        operation,
                        reason: trap.to_string(),
                    });
            }
        }
        invocations
    }

    /// A launch's workgroup count, a dynamic one read from memory. `None`, after faulting the
    /// stream, when that memory was freed.
    fn launch_count(
        &mut self,
        stream: u32,
        launch: &LaunchOp,
        operation: &str,
    ) -> Option<[u32; 3]> {
        match &launch.count {
            Count::Static(dims) => Some(*dims),
            Count::Dynamic(range) => match self.memory.get_mut(range.buffer, operation) {
                Ok(alloc) => {
                    let at = range.offset as usize;
                    Some([0, 1, 2].map(|i| alloc.read_word(at + 4 * i)))
                }
                Err(report) => {
                    self.fault_use_after_free(stream, operation, report);
                    None
                }
            },
        }
    }

    /// Each binding's elements, as a launch reads them before it runs. `None`, after faulting
    /// the stream, when any of that memory was freed.
    fn launch_bindings(
        &mut self,
        stream: u32,
        launch: &LaunchOp,
        operation: &str,
    ) -> Option<Vec<BindingData>> {
        let mut data = Vec::with_capacity(launch.bindings.len());
        for (index, range) in launch.bindings.iter().enumerate() {
            let elem_bytes = binding_elem_bytes(&launch.kernel, index);
            match self.memory.get_mut(range.buffer, operation) {
                Ok(alloc) => data.push(binding_data(alloc, *range, elem_bytes)),
                Err(report) => {
                    self.fault_use_after_free(stream, operation, report);
                    return None;
                }
            }
        }
        Some(data)
    }

    /// A launch ran to its end: reports what the sanitizer found (uninitialised loads, the
    /// interpreter's findings) and writes each binding's elements back to memory.
    fn complete_launch(
        &mut self,
        launch: &LaunchOp,
        operation: &str,
        count: [u32; 3],
        outcome: &interpreter::LaunchOutcome,
        data: &[BindingData],
    ) {
        for binding in &outcome.uninitialized_loads {
            let range = launch.bindings[binding.0 as usize];
            self.report(SanitizerReport::UninitializedRead {
                operation: format!("{operation} (binding {})", binding.0),
                buffer: range.buffer,
                offset: range.offset,
                len: range.len,
            });
        }
        for finding in interpreter::describe(&launch.kernel, count, outcome) {
            self.report(SanitizerReport::Kernel {
                operation: operation.to_owned(),
                finding: finding.kind,
                detail: finding.detail,
                op: self
                    .executing
                    .expect("a launch completes while it executes"),
            });
        }
        for (index, (range, binding)) in launch.bindings.iter().zip(data).enumerate() {
            let alloc = self
                .memory
                .get_mut(range.buffer, operation)
                .expect("checked live above; nothing frees during a launch");
            let elem_bytes = binding_elem_bytes(&launch.kernel, index);
            write_back(alloc, *range, binding, elem_bytes);
        }
    }
}

fn transfer_ns(len: u64) -> u64 {
    TRANSFER_LATENCY_NS + len / BYTES_PER_NS
}

/// A binding's elements, of `elem_bytes` (4, or 2 for the half floats) each, one per word.
fn binding_data(alloc: &crate::memory::Allocation, range: Range, elem_bytes: usize) -> BindingData {
    let start = range.offset as usize;
    if elem_bytes == 4 {
        let words = (range.len / 4) as usize;
        return BindingData::new(
            alloc.read_words(start, words),
            alloc.words_written(start, words),
        );
    }
    let elements = range.len as usize / elem_bytes;
    let bytes = alloc.read(start, elements * elem_bytes);
    let written = (0..elements)
        .map(|i| alloc.all_written(start + i * elem_bytes, elem_bytes))
        .collect();
    BindingData::new(crate::memory::elements_of(&bytes, elem_bytes), written)
}

/// Stores the elements a launch wrote back into device memory, a run of consecutive elements
/// at a time; elements it did not store keep their bytes (and their written-bits).
fn write_back(
    alloc: &mut crate::memory::Allocation,
    range: Range,
    data: &BindingData,
    elem_bytes: usize,
) {
    let (start, dirty) = (range.offset as usize, &data.dirty[..]);
    let mut i = 0;
    loop {
        let from = i + leading(&dirty[i..], false);
        if from == dirty.len() {
            return;
        }
        let end = from + leading(&dirty[from..], true);
        alloc.write_elements(
            start + elem_bytes * from,
            &data.words[from..end],
            elem_bytes,
        );
        i = end;
    }
}

/// How many of `flags`, from the first, are `value`. Blocks of 64 are compared whole: a launch
/// writes back bindings of up to 64 Ki elements, mostly all stored or none, and testing them a
/// flag at a time was 3% of the explorer's instructions.
fn leading(flags: &[bool], value: bool) -> usize {
    const BLOCK: usize = 64;
    let whole = BLOCK
        * (flags.chunks_exact(BLOCK))
            .take_while(|block| **block == [value; BLOCK])
            .count();
    let rest = &flags[whole..];
    whole + rest.iter().position(|&f| f != value).unwrap_or(rest.len())
}

/// Bytes per element of a launch's binding `index` (the fault record after the declared ones
/// holds `u32`s).
fn binding_elem_bytes(kernel: &KernelDef, index: usize) -> usize {
    kernel
        .bindings
        .get(index)
        .map_or(4, |decl| decl.elem.size_bytes())
}

fn range_of(slice: &BufferSlice<'_, SimBuffer>) -> Range {
    Range {
        buffer: slice.buffer.id,
        offset: slice.offset,
        len: slice.len,
    }
}

impl Device for SimDevice {
    type Buffer = SimBuffer;
    type Stream = SimStream;
    type Event = SimEvent;
    type Kernel = SimKernel;
    type PendingRead = SimRead;
    type Graph = SimGraph;
    type Timestamp = SimTimestamp;

    const TYPE_ID: u16 = 0;
    const SIMULATED: bool = true;

    fn host_pool_stats(&self) -> Option<HostPoolStats> {
        Some(self.host_pool.stats())
    }

    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn create_stream(&mut self) -> Result<SimStream, DeviceError> {
        self.check_alive()?;
        self.streams.push(StreamState::default());
        Ok(SimStream(self.streams.len() as u32 - 1))
    }

    fn label_stream(&mut self, stream: SimStream, id: StreamId) {
        // A label has no error to return: a refusal reaches the sanitizer only.
        let Ok(state) = self.stream_mut("label_stream", stream) else {
            return;
        };
        if state.label.is_none() {
            state.label = Some(id);
            return;
        }
        self.report(SanitizerReport::ContractViolation(DeviceError::Contract {
            operation: "label_stream".to_owned(),
            violation: ContractViolation::StreamLabelledTwice { index: stream.0 },
        }));
    }

    fn allocate(&mut self, bytes: u64) -> Result<SimBuffer, DeviceError> {
        self.checked(contract::allocation(bytes))?;
        self.check_alive()?;
        if bytes > self.config.max_allocation_bytes {
            return Err(DeviceError::AllocationTooLarge {
                requested_bytes: bytes,
                max_bytes: self.config.max_allocation_bytes,
            });
        }
        let available_bytes = self.config.memory_bytes - self.memory.bytes_live;
        if bytes > available_bytes {
            return Err(DeviceError::OutOfMemory {
                requested_bytes: bytes,
                available_bytes,
            });
        }
        if self.inject(FaultKind::AllocationFailure, None).is_some() {
            // `OutOfMemory` has no message to carry the tag: the fault is matched by count.
            return Err(DeviceError::OutOfMemory {
                requested_bytes: bytes,
                available_bytes,
            });
        }
        let id = self.memory.allocate(bytes);
        Ok(SimBuffer {
            id,
            size: bytes,
            owner: self.owner,
        })
    }

    fn free(&mut self, buffer: SimBuffer) {
        if !contract::owns(self.owner, &buffer) {
            self.report(SanitizerReport::ContractViolation(DeviceError::Contract {
                operation: "free".to_owned(),
                violation: ContractViolation::ForeignBuffer,
            }));
            return;
        }
        if self
            .streams
            .iter()
            .any(|s| s.queue.iter().any(|(op, ..)| op.touches(buffer.id)))
        {
            self.report(SanitizerReport::FreeWhileInUse { buffer: buffer.id });
        }
        self.sanitizer.forget(buffer.id);
        self.memory.free(buffer.id);
    }

    fn write(
        &mut self,
        stream: SimStream,
        dst: &SimBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        self.enqueue_write(stream, dst, offset, data.to_vec())
    }

    /// Keeps heap bytes as they are (a copy of every written byte cost 3% of the explorer's
    /// instructions); pinned ones are copied, and a deferred read is performed now, at the
    /// call, as [`write`](Device::write) would.
    fn write_bytes(
        &mut self,
        stream: SimStream,
        dst: &SimBuffer,
        offset: u64,
        data: Bytes,
    ) -> Result<(), DeviceError> {
        self.enqueue_write(stream, dst, offset, data.into_vec())
    }

    fn read(
        &mut self,
        stream: SimStream,
        src: &SimBuffer,
        offset: u64,
        len: u64,
    ) -> Result<SimRead, DeviceError> {
        self.checked(contract::range(self.owner, "read", src, offset, len))?;
        let read = self.next_read;
        self.next_read += 1;
        let src = Range {
            buffer: src.id,
            offset,
            len,
        };
        // Registered before enqueueing: the read may execute in the background right away.
        self.reads.insert(read, None);
        if let Err(err) = self.enqueue(stream, Op::Read { src, read }) {
            self.reads.remove(&read);
            return Err(err);
        }
        Ok(SimRead(read))
    }

    fn wait_read(&mut self, read: SimRead) -> Result<Bytes, DeviceError> {
        self.run_until("a read", |dev| {
            dev.reads.get(&read.0).is_some_and(|r| r.is_some())
        });
        if let Some(clock) = self.read_clocks.remove(&read.0) {
            self.sanitizer.host_observed(&clock);
        }
        match self.reads.remove(&read.0).flatten() {
            Some(result) => result,
            None => Err(self
                .check_alive()
                .expect_err("only a lost device abandons a read")),
        }
    }

    fn copy(
        &mut self,
        stream: SimStream,
        src: BufferSlice<'_, SimBuffer>,
        dst: &SimBuffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        self.checked(contract::copy(self.owner, &src, dst, dst_offset))?;
        let src = range_of(&src);
        let dst = Range {
            buffer: dst.id,
            offset: dst_offset,
            len: src.len,
        };
        self.enqueue(stream, Op::Copy { src, dst })
    }

    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<SimKernel, DeviceError> {
        self.check_alive()?;
        contract::compile(kernel, &self.properties)?;
        Ok(SimKernel {
            def: Arc::new(kernel.clone()),
            options,
        })
    }

    fn launch(
        &mut self,
        stream: SimStream,
        kernel: &SimKernel,
        count: LaunchCount<'_, SimBuffer>,
        bindings: &[BufferSlice<'_, SimBuffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        let checked = kernel.options.checks.is_checked();
        self.checked(contract::launch(
            self.owner,
            &kernel.def,
            checked,
            &count,
            bindings,
            params,
        ))?;
        let count = match count {
            LaunchCount::Static(dims) => Count::Static(dims),
            LaunchCount::Dynamic(slice) => Count::Dynamic(range_of(&slice)),
        };
        let launch = LaunchOp {
            kernel: kernel.def.clone(),
            options: kernel.options,
            count,
            bindings: bindings.iter().map(range_of).collect(),
            params: params.to_vec(),
        };
        self.enqueue(stream, Op::Launch(Arc::new(launch)))
    }

    fn record_event(&mut self, stream: SimStream) -> Result<SimEvent, DeviceError> {
        let marker = self.new_marker();
        self.enqueue(stream, Op::Marker(marker))?;
        Ok(SimEvent(marker))
    }

    fn wait_event(&mut self, stream: SimStream, event: &SimEvent) -> Result<(), DeviceError> {
        self.enqueue(stream, Op::Wait(event.0))
    }

    fn event_complete(&mut self, event: &SimEvent) -> bool {
        self.background();
        let complete = self.markers[event.0 as usize].is_some();
        if complete {
            self.sanitizer.host_observed_marker(event.0);
        }
        self.lost.is_some() || complete
    }

    fn flush(&mut self, stream: SimStream) -> Result<(), DeviceError> {
        self.checked(contract::stream("flush", stream.0, self.streams.len()))?;
        self.check_alive()?;
        self.background();
        Ok(())
    }

    fn synchronize(&mut self, stream: SimStream) -> Result<(), DeviceError> {
        let index = self.checked(contract::stream(
            "synchronize",
            stream.0,
            self.streams.len(),
        ))?;
        self.check_alive()?;
        self.run_until("a stream to drain", |dev| {
            dev.streams[index].queue.is_empty()
        });
        self.sanitizer.host_observed_stream(stream.0);
        self.check_alive()
    }

    fn take_errors(&mut self, stream: SimStream) -> Vec<DeviceError> {
        // A stream this device did not create has no errors to take.
        match self.stream_mut("take_errors", stream) {
            Ok(state) => std::mem::take(&mut state.errors),
            Err(_) => Vec::new(),
        }
    }

    fn record_timestamp(&mut self, stream: SimStream) -> Result<SimTimestamp, DeviceError> {
        if !self.config.timestamps {
            // No timestamp exists to reach `elapsed_ns` either.
            return Err(DeviceError::Unsupported {
                operation: "record_timestamp (the simulated device has no timestamps)".to_owned(),
            });
        }
        let marker = self.new_marker();
        self.enqueue(stream, Op::Marker(marker))?;
        Ok(SimTimestamp(marker))
    }

    fn elapsed_ns(&mut self, start: &SimTimestamp, end: &SimTimestamp) -> Result<u64, DeviceError> {
        self.check_alive()?;
        match (self.markers[start.0 as usize], self.markers[end.0 as usize]) {
            (Some(s), Some(e)) => Ok(e.saturating_sub(s)),
            _ => Err(DeviceError::Unsupported {
                operation: "elapsed_ns of a timestamp that has not completed".to_owned(),
            }),
        }
    }

    fn begin_capture(&mut self, stream: SimStream) -> Result<(), DeviceError> {
        self.check_alive()?;
        let state = self.stream_mut("begin_capture", stream)?;
        if state.capture.is_some() {
            return Err(DeviceError::Capture {
                reason: "the stream is already capturing".to_owned(),
            });
        }
        state.capture = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&mut self, stream: SimStream) -> Result<SimGraph, DeviceError> {
        self.check_alive()?;
        let captured_on = self.owner;
        match self.stream_mut("end_capture", stream)?.capture.take() {
            Some(launches) => Ok(SimGraph {
                launches,
                captured_on,
            }),
            None => Err(DeviceError::Capture {
                reason: "the stream is not capturing".to_owned(),
            }),
        }
    }

    fn replay(&mut self, stream: SimStream, graph: &SimGraph) -> Result<(), DeviceError> {
        self.checked(contract::replay(self.owner, graph.captured_on, || {
            graph
                .launches
                .iter()
                .flat_map(|launch| launch.ranges())
                .all(|range| self.memory.is_live(range.buffer))
        }))?;
        for launch in &graph.launches {
            self.enqueue(stream, Op::Launch(launch.clone()))?;
        }
        Ok(())
    }

    fn destroy_graph(&mut self, graph: SimGraph) {
        drop(graph);
    }

    fn ordinal(&self) -> u32 {
        self.cluster_ordinal()
    }

    fn device_count(&self) -> u32 {
        self.cluster_size()
    }

    fn peer_group(&self) -> u64 {
        self.cluster_group()
    }

    fn supports_collectives(&self) -> bool {
        true
    }

    fn abandon(&mut self, reason: &str) {
        if self.lost.is_none() {
            self.lose(format!("abandoned by the runtime: {reason}"));
        }
    }

    fn create_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        self.create_sim_communicator(id, peers)
    }

    fn all_reduce(
        &mut self,
        stream: SimStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, SimBuffer>,
        dst: BufferSlice<'_, SimBuffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        self.checked(contract::all_reduce(self.owner, &src, &dst, elem))?;
        let (src, dst) = (range_of(&src), range_of(&dst));
        let kind = CollectiveKind::AllReduce { src, dst, elem, op };
        self.enqueue_collective(stream, comm, kind)
    }

    fn send(
        &mut self,
        stream: SimStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, SimBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        self.checked(contract::slice(self.owner, "send", &src))?;
        let kind = CollectiveKind::Send {
            src: range_of(&src),
            to: peer,
        };
        self.enqueue_collective(stream, comm, kind)
    }

    fn recv(
        &mut self,
        stream: SimStream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, SimBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        self.checked(contract::slice(self.owner, "recv", &dst))?;
        let kind = CollectiveKind::Recv {
            dst: range_of(&dst),
            from: peer,
        };
        self.enqueue_collective(stream, comm, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::leading;

    #[test]
    fn leading_counts_the_flags_before_the_first_other_one() {
        for len in [0, 1, 63, 64, 65, 200] {
            for cut in 0..=len {
                let flags: Vec<bool> = (0..len).map(|i| i >= cut).collect();
                assert_eq!(leading(&flags, false), cut, "{len} flags, cut at {cut}");
                assert_eq!(leading(&flags, true), (cut == 0) as usize * len);
            }
        }
    }
}
