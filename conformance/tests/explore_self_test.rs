//! Self-test of the explorer: a device that misbehaves on purpose, in one way at a time, must be
//! caught by `lockstep explore` within a bounded number of seeds. The honest wrapper passes the
//! same seeds, so what is caught is the misbehaviour, not the wrapper.
//!
//! Run with `--nocapture` to see the seeds-to-detection of each misbehaviour.

use std::sync::Arc;

use lockstep::collective::CommunicatorId;
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{CompileOptions, ElemType, KernelDef, Scalar};
use lockstep::{Device, DeviceError, DeviceProperties, ReduceOperation, ServerOptions};
use lockstep_conformance::explore::failure::{At, Check, Stage};
use lockstep_conformance::explore::{ExploreFailure, Opener, run_seed};
use lockstep_sim::SimDevice;

/// Seeds each misbehaviour gets; every one is caught well inside it (see the printed counts).
const BUDGET: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Misbehaviour {
    /// `wait_event` returns without making the stream wait.
    DropEventWait,
    /// A write is held back and enqueued after the stream's next operation.
    ReorderOps,
    /// A write is acknowledged and never performed.
    LoseWrite,
    /// `event_complete` says yes before the work is done, so memory is freed and reused early.
    FreeEarly,
    /// `take_errors` drops the failures it should return.
    SwallowError,
    /// `synchronize` reports the explored device (ordinal 0; its peers behave) lost, though no
    /// loss was injected (as the runtime does when one of its invariants breaks).
    LoseDevice,
}

/// Every `PERIOD`-th trigger of the misbehaviour misbehaves; the rest behave.
const PERIOD: u64 = 3;

/// A held-back write: its stream, target, offset and bytes.
type HeldWrite<D> = (
    <D as Device>::Stream,
    Arc<<D as Device>::Buffer>,
    u64,
    Vec<u8>,
);

#[derive(Debug)]
struct Misbehaving<D: Device> {
    inner: D,
    kind: Option<Misbehaviour>,
    triggers: u64,
    held: Option<HeldWrite<D>>,
}

impl<D: Device> Misbehaving<D> {
    /// Counts a trigger of `kind`; true when this one misbehaves.
    fn misbehaves(&mut self, kind: Misbehaviour) -> bool {
        if self.kind != Some(kind) {
            return false;
        }
        self.triggers += 1;
        self.triggers.is_multiple_of(PERIOD)
    }

    /// Enqueues the held-back write if it belongs to `stream` (after the operation that
    /// overtook it).
    fn release_held(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        match self.held.take() {
            Some((s, buffer, offset, data)) if s == stream => {
                self.inner.write(s, &buffer, offset, &data)
            }
            other => {
                self.held = other;
                Ok(())
            }
        }
    }

    /// Runs `op` on `stream`, then lets a held-back write follow it.
    fn then_release<T>(
        &mut self,
        stream: D::Stream,
        op: impl FnOnce(&mut D) -> Result<T, DeviceError>,
    ) -> Result<T, DeviceError> {
        let out = op(&mut self.inner)?;
        self.release_held(stream)?;
        Ok(out)
    }
}

fn unwrap_slices<'a, B>(slices: &[BufferSlice<'a, Arc<B>>]) -> Vec<BufferSlice<'a, B>> {
    slices
        .iter()
        .map(|s| BufferSlice {
            buffer: &**s.buffer,
            offset: s.offset,
            len: s.len,
        })
        .collect()
}

impl<D: Device<Buffer: Sync>> Device for Misbehaving<D> {
    type Buffer = Arc<D::Buffer>;
    type Stream = D::Stream;
    type Event = D::Event;
    type Kernel = D::Kernel;
    type PendingRead = D::PendingRead;
    type Graph = D::Graph;
    type Timestamp = D::Timestamp;
    const TYPE_ID: u16 = D::TYPE_ID;

    fn properties(&self) -> &DeviceProperties {
        self.inner.properties()
    }
    fn create_stream(&mut self) -> Result<D::Stream, DeviceError> {
        self.inner.create_stream()
    }
    fn label_stream(&mut self, stream: D::Stream, id: lockstep::StreamId) {
        self.inner.label_stream(stream, id)
    }
    fn allocate(&mut self, bytes: u64) -> Result<Self::Buffer, DeviceError> {
        self.inner.allocate(bytes).map(Arc::new)
    }
    fn free(&mut self, buffer: Self::Buffer) {
        if let Some((s, ..)) = &self.held
            && Arc::strong_count(&buffer) > 1
        {
            let s = *s;
            let _ = self.release_held(s);
        }
        let buffer = Arc::try_unwrap(buffer).expect("only a held write shares a buffer");
        self.inner.free(buffer);
    }
    fn write(
        &mut self,
        stream: D::Stream,
        dst: &Self::Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        if self.misbehaves(Misbehaviour::LoseWrite) {
            return Ok(());
        }
        if self.held.is_none() && self.misbehaves(Misbehaviour::ReorderOps) {
            self.held = Some((stream, dst.clone(), offset, data.to_vec()));
            return Ok(());
        }
        self.then_release(stream, |d| d.write(stream, dst, offset, data))
    }
    fn read(
        &mut self,
        stream: D::Stream,
        src: &Self::Buffer,
        offset: u64,
        len: u64,
    ) -> Result<D::PendingRead, DeviceError> {
        self.then_release(stream, |d| d.read(stream, src, offset, len))
    }
    fn wait_read(&mut self, read: D::PendingRead) -> Result<lockstep::Bytes, DeviceError> {
        self.inner.wait_read(read)
    }
    fn copy(
        &mut self,
        stream: D::Stream,
        src: BufferSlice<'_, Self::Buffer>,
        dst: &Self::Buffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        let src = unwrap_slices(std::slice::from_ref(&src)).remove(0);
        self.then_release(stream, |d| d.copy(stream, src, dst, dst_offset))
    }
    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<D::Kernel, DeviceError> {
        self.inner.compile(kernel, options)
    }
    fn launch(
        &mut self,
        stream: D::Stream,
        kernel: &D::Kernel,
        count: LaunchCount<'_, Self::Buffer>,
        bindings: &[BufferSlice<'_, Self::Buffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        let count = match count {
            LaunchCount::Static(dims) => LaunchCount::Static(dims),
            LaunchCount::Dynamic(s) => LaunchCount::Dynamic(unwrap_slices(&[s]).remove(0)),
        };
        let bindings = unwrap_slices(bindings);
        self.then_release(stream, |d| {
            d.launch(stream, kernel, count, &bindings, params)
        })
    }
    fn record_event(&mut self, stream: D::Stream) -> Result<D::Event, DeviceError> {
        self.then_release(stream, |d| d.record_event(stream))
    }
    fn wait_event(&mut self, stream: D::Stream, event: &D::Event) -> Result<(), DeviceError> {
        if self.misbehaves(Misbehaviour::DropEventWait) {
            return Ok(());
        }
        self.then_release(stream, |d| d.wait_event(stream, event))
    }
    fn event_complete(&mut self, event: &D::Event) -> bool {
        self.misbehaves(Misbehaviour::FreeEarly) || self.inner.event_complete(event)
    }
    fn flush(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        self.release_held(stream)?;
        self.inner.flush(stream)
    }
    fn synchronize(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        if self.inner.ordinal() == 0 && self.misbehaves(Misbehaviour::LoseDevice) {
            return Err(DeviceError::Lost {
                reason: "lost on a whim".to_owned(),
            });
        }
        self.release_held(stream)?;
        self.inner.synchronize(stream)
    }
    fn take_errors(&mut self, stream: D::Stream) -> Vec<DeviceError> {
        let errors = self.inner.take_errors(stream);
        if !errors.is_empty() && self.misbehaves(Misbehaviour::SwallowError) {
            return Vec::new();
        }
        errors
    }
    fn record_timestamp(&mut self, stream: D::Stream) -> Result<D::Timestamp, DeviceError> {
        self.then_release(stream, |d| d.record_timestamp(stream))
    }
    fn elapsed_ns(&mut self, start: &D::Timestamp, end: &D::Timestamp) -> Result<u64, DeviceError> {
        self.inner.elapsed_ns(start, end)
    }
    fn begin_capture(&mut self, stream: D::Stream) -> Result<(), DeviceError> {
        self.release_held(stream)?;
        self.inner.begin_capture(stream)
    }
    fn end_capture(&mut self, stream: D::Stream) -> Result<D::Graph, DeviceError> {
        self.inner.end_capture(stream)
    }
    fn replay(&mut self, stream: D::Stream, graph: &D::Graph) -> Result<(), DeviceError> {
        self.then_release(stream, |d| d.replay(stream, graph))
    }
    fn destroy_graph(&mut self, graph: D::Graph) {
        self.inner.destroy_graph(graph)
    }
    fn ordinal(&self) -> u32 {
        self.inner.ordinal()
    }
    fn device_count(&self) -> u32 {
        self.inner.device_count()
    }
    fn supports_collectives(&self) -> bool {
        self.inner.supports_collectives()
    }
    fn create_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        self.inner.create_communicator(id, peers)
    }
    fn all_reduce(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        dst: BufferSlice<'_, Self::Buffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        let [src, dst]: [_; 2] = unwrap_slices(&[src, dst])
            .try_into()
            .expect("two slices in, two out");
        self.then_release(stream, |d| d.all_reduce(stream, comm, src, dst, elem, op))
    }
    fn send(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        src: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let src = unwrap_slices(&[src]).remove(0);
        self.then_release(stream, |d| d.send(stream, comm, src, peer))
    }
    fn recv(
        &mut self,
        stream: D::Stream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, Self::Buffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let dst = unwrap_slices(&[dst]).remove(0);
        self.then_release(stream, |d| d.recv(stream, comm, dst, peer))
    }
}

/// Opens simulators wrapped to misbehave in one way (or none).
struct MisbehavingSim(Option<Misbehaviour>);

impl Opener for MisbehavingSim {
    type Device = Misbehaving<SimDevice>;

    fn open(&self, inner: SimDevice) -> Self::Device {
        Misbehaving {
            inner,
            kind: self.0,
            triggers: 0,
            held: None,
        }
    }
}

/// Explores until the first failure, which it prints (with the seeds it took) and returns.
fn seeds_to_detection(kind: Misbehaviour, faults: bool) -> ExploreFailure {
    let opener = MisbehavingSim(Some(kind));
    for n in 0..BUDGET {
        if let Some(why) = run_seed(&opener, n, faults).failure {
            println!("{kind:?}: caught after {} seeds (seed {n}): {why}", n + 1);
            return why;
        }
    }
    panic!("{kind:?} went unnoticed for {BUDGET} seeds");
}

#[test]
fn the_honest_wrapper_passes_the_seeds_the_others_fail() {
    let opener = MisbehavingSim(None);
    for faults in [false, true] {
        for seed in 0..16 {
            let report = run_seed(&opener, seed, faults);
            assert_eq!(report.failure, None, "seed {seed} (faults {faults})");
        }
    }
}

#[test]
fn a_dropped_event_wait_is_caught() {
    seeds_to_detection(Misbehaviour::DropEventWait, false);
}

#[test]
fn reordered_operations_are_caught() {
    seeds_to_detection(Misbehaviour::ReorderOps, false);
}

#[test]
fn a_lost_write_is_caught() {
    seeds_to_detection(Misbehaviour::LoseWrite, false);
}

#[test]
fn an_early_free_is_caught() {
    seeds_to_detection(Misbehaviour::FreeEarly, false);
}

#[test]
fn a_swallowed_error_is_caught() {
    // Caught as a fault that never surfaced, or as a read the swallowed fault spoiled, which
    // the model then holds against a window that seemed clean.
    seeds_to_detection(Misbehaviour::SwallowError, true);
}

#[test]
fn a_device_lost_without_an_injected_loss_is_caught() {
    let why = seeds_to_detection(Misbehaviour::LoseDevice, false);
    assert_eq!(why.class.at, At::Stage(Stage::Audit), "{why}");
    assert_eq!(why.class.check, Check::LossNotInjected, "{why}");
    assert!(
        why.to_string()
            .ends_with("the device was lost, yet no loss was injected: lost on a whim"),
        "{why}"
    );
}

/// The simulator under a runtime with one of its test-only knobs turned off, which
/// re-introduces a defect the explorer once missed.
struct Knob(ServerOptions);

impl Opener for Knob {
    type Device = SimDevice;

    fn open(&self, device: SimDevice) -> SimDevice {
        device
    }

    fn options(&self) -> ServerOptions {
        self.0
    }
}

/// Seeds the explorer gets to refind a re-introduced runtime defect.
const DEFECT_BUDGET: u64 = 1_000;

/// Explores from seed 0 until the first failure under `options`, and returns its offset.
fn defect_found(defect: &str, options: ServerOptions, faults: bool) -> u64 {
    let opener = Knob(options);
    for n in 0..DEFECT_BUDGET {
        if let Some(why) = run_seed(&opener, n, faults).failure {
            println!("defect {defect}: found at seed offset {n}: {why}");
            return n;
        }
    }
    panic!("defect {defect} went unnoticed for {DEFECT_BUDGET} seeds");
}

#[test]
fn an_overflowing_allocation_size_that_is_served_is_caught() {
    let options = ServerOptions {
        checked_slot_sizes: false,
        ..ServerOptions::default()
    };
    defect_found("served overflowing size", options, false);
}

#[test]
fn a_refused_stop_capture_that_changes_state_is_caught() {
    let options = ServerOptions {
        refused_stop_capture_keeps_state: false,
        ..ServerOptions::default()
    };
    defect_found("refused stop_capture resets the stream", options, false);
}

#[test]
fn an_event_recorded_into_a_capturing_stream_is_caught() {
    let options = ServerOptions {
        capture_aware_events: false,
        ..ServerOptions::default()
    };
    defect_found("event recorded into a capture", options, false);
}

#[test]
fn a_launch_that_ignores_view_offsets_is_caught() {
    let options = ServerOptions {
        launch_view_offsets: false,
        ..ServerOptions::default()
    };
    defect_found("launch ignores view offsets", options, false);
}

/// A short exploration of the plain simulator from `$LOCKSTEP_SEED` (default 0), so `cargo
/// test` explores new worlds when asked and replays exactly when given a seed.
#[test]
fn explores_from_lockstep_seed() {
    let first: u64 = std::env::var("LOCKSTEP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    println!("exploring 24 seeds from {first} (set LOCKSTEP_SEED to change)");
    for seed in first..first + 24 {
        let report = run_seed(&lockstep_conformance::explore::Simulator, seed, true);
        assert_eq!(
            report.failure, None,
            "seed {seed} failed; replay: lockstep replay --seed {seed} --faults"
        );
    }
}
