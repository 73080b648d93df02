//! Random multi-stream programs over the client API, and their execution against a pure
//! reference model of device memory.
//!
//! The model executes steps in submission order. That is exactly what the runtime promises:
//! work on one stream runs in order, and work on different streams that touches the same buffer
//! is ordered by the server's event waits, so every read must see the model's bytes.

use std::collections::BTreeSet;

use lockstep::kernel::Scalar;
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, Handle, IoError, KernelArguments, ServerError,
    StreamId,
};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::audit::{Blocking, FaultAudit, WindowId};
use crate::factory::Observer;
use lockstep_kernels::elementwise::{KernelKind, overrun};

/// Buffer slots a program can refer to.
pub const SLOTS: usize = 4;
/// Most elements a created buffer holds.
pub const MAX_ELEMS: usize = 48;
/// Most failing syncs a stream may return at the end of an audited program before one
/// succeeds (bounded by the faults a plan injects).
const MAX_FINAL_SYNCS: usize = 64;

/// One operation of a conformance [`Program`]; slots are indices below [`SLOTS`], and an operation
/// on an empty slot does nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Creates a buffer holding `data` in `slot`, dropping the slot's previous handle.
    Create {
        /// The slot the handle goes to.
        slot: usize,
        /// The buffer's `u32` elements (at most [`MAX_ELEMS`]).
        data: Vec<u32>,
    },
    /// Writes `data` at element `offset` (both clipped to the buffer).
    Write {
        /// The slot written.
        slot: usize,
        /// Element offset, taken modulo the buffer's length.
        offset: usize,
        /// The elements written, cut to what fits from `offset`.
        data: Vec<u32>,
    },
    /// Launches `kernel` on the buffers in `dst` and `src` (skipped when a slot it needs is empty);
    /// a launch whose writable `dst` aliases `src` must be refused.
    Launch {
        /// The kernel.
        kernel: KernelKind,
        /// The slot bound read-write.
        dst: usize,
        /// The slot bound read-only (unused by kernels without a `src`).
        src: usize,
        /// The kernel's scalar parameter (unused by `AtomicSum`).
        k: u32,
    },
    /// Reads the slot's buffer, compared with the model (or the stream's pending failure).
    Read {
        /// The slot read.
        slot: usize,
    },
    /// Drops the slot's handle; its memory must outlive the work already submitted with it.
    Release {
        /// The slot emptied.
        slot: usize,
    },
    /// Syncs the operation's stream: its pending failure, or `Ok`.
    Sync,
    /// Flushes the operation's stream: its pending failure so far, or `Ok`.
    Flush,
    /// Launches a kernel that stores out of range: a `KernelFault` for this stream.
    Fault {
        /// The slot whose buffer the kernel overruns.
        slot: usize,
        /// Elements past the end the kernel stores to.
        past_end: u32,
    },
}

/// An operation and the stream it is issued on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    /// The program's stream, below [`Program::streams`].
    pub stream: usize,
    /// What it does.
    pub step: Step,
}

/// A program: operations in submission order, each on one of `streams` streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Number of streams the operations use, at least 1.
    pub streams: usize,
    /// The operations, in submission order.
    pub ops: Vec<Op>,
    /// Seeds the simulated device the program runs on (ignored by real devices).
    pub sim_seed: u64,
}

fn data(max: usize) -> impl Strategy<Value = Vec<u32>> {
    vec(any::<u32>(), 1..=max)
}

fn step(with_faults: bool) -> BoxedStrategy<Step> {
    let slot = || 0..SLOTS;
    let kernel = prop_oneof![
        Just(KernelKind::AddConst),
        Just(KernelKind::MulAdd),
        Just(KernelKind::AtomicSum)
    ];
    let fault_weight = if with_faults { 1 } else { 0 };
    prop_oneof![
        3 => (slot(), data(MAX_ELEMS)).prop_map(|(slot, data)| Step::Create { slot, data }),
        2 => (slot(), 0..MAX_ELEMS, data(16))
            .prop_map(|(slot, offset, data)| Step::Write { slot, offset, data }),
        5 => (kernel, slot(), slot(), 0u32..5)
            .prop_map(|(kernel, dst, src, k)| Step::Launch { kernel, dst, src, k }),
        3 => slot().prop_map(|slot| Step::Read { slot }),
        3 => slot().prop_map(|slot| Step::Release { slot }),
        1 => Just(Step::Sync),
        1 => Just(Step::Flush),
        fault_weight => (slot(), 0u32..8).prop_map(|(slot, past_end)| Step::Fault { slot, past_end }),
    ]
    .boxed()
}

/// Programs over 1 to `max_streams` streams. Every slot is created first (on random streams),
/// so that most later steps have something to act on.
pub fn program(max_streams: usize, max_ops: usize, with_faults: bool) -> BoxedStrategy<Program> {
    (1..=max_streams)
        .prop_flat_map(move |streams| {
            let init = vec((0..streams, data(MAX_ELEMS)), SLOTS);
            let ops = vec((0..streams, step(with_faults)), 1..=max_ops);
            (Just(streams), init, ops, any::<u64>())
        })
        .prop_map(|(streams, init, ops, sim_seed)| {
            let mut all: Vec<Op> = init
                .into_iter()
                .enumerate()
                .map(|(slot, (stream, data))| Op {
                    stream,
                    step: Step::Create { slot, data },
                })
                .collect();
            all.extend(ops.into_iter().map(|(stream, step)| Op { stream, step }));
            Program {
                streams,
                ops: all,
                sim_seed,
            }
        })
        .boxed()
}

/// A live buffer and what the model says it holds.
struct Slot {
    handle: Handle,
    model: Vec<u32>,
    /// With injected faults: the windows whose failure could make the buffer differ from
    /// `model` (see [`FaultAudit`]).
    taint: BTreeSet<WindowId>,
}

/// Runs programs against a client and the reference model, step by step.
pub struct Executor<'a, D: Device> {
    clients: Vec<ComputeClient<D>>,
    slots: Vec<Option<Slot>>,
    /// Per stream: the fault its next blocking call must return (the first since the last one).
    pending_fault: Vec<Option<ServerError>>,
    /// On a device that injects faults, what judges errors and reads instead of
    /// `pending_fault` and exact comparison.
    pub audit: Option<FaultAudit<'a>>,
    /// Reads compared with the model and found equal.
    pub reads_checked: usize,
    /// Failures returned where the model expected them.
    pub faults_surfaced: usize,
}

impl<'a, D: Device> Executor<'a, D> {
    /// With `pin`, stream `i` of the program is `StreamId(i)`; without, the program must have one
    /// stream and runs on the calling thread's own stream.
    pub fn new(client: &ComputeClient<D>, streams: usize, pin: bool) -> Self {
        let clients = (0..streams)
            .map(|i| {
                let mut c = client.clone();
                if pin {
                    c.set_stream(StreamId(i as u64));
                }
                c
            })
            .collect();
        Self {
            clients,
            slots: (0..SLOTS).map(|_| None).collect(),
            pending_fault: vec![None; streams],
            audit: None,
            reads_checked: 0,
            faults_surfaced: 0,
        }
    }

    /// An executor on pinned streams of a device that injects faults, which `observer` lists;
    /// the program must contain no [`Step::Fault`]. Flushes every stream once, in order, so that
    /// program stream `i` is the device's stream `i` ([`FaultAudit`]'s invariant).
    pub fn with_faults(
        client: &ComputeClient<D>,
        streams: usize,
        observer: &'a dyn Observer,
    ) -> Result<Self, String> {
        let mut executor = Self::new(client, streams, true);
        for (i, c) in executor.clients.iter().enumerate() {
            c.flush()
                .map_err(|e| format!("first flush of stream {i} failed: {e}"))?;
        }
        executor.audit = Some(FaultAudit::new(observer, streams));
        Ok(executor)
    }

    /// Runs every op; the first disagreement with the model is returned as a description.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        for (index, op) in ops.iter().enumerate() {
            self.step(op)
                .map_err(|why| format!("op #{index} {op:?}: {why}"))?;
        }
        Ok(())
    }

    /// Syncs every stream, expecting each pending fault exactly once, then a clean sync.
    pub fn finish(&mut self) -> Result<(), String> {
        if self.audit.is_some() {
            return self.finish_audited();
        }
        for stream in 0..self.clients.len() {
            let first = self.clients[stream].sync();
            self.expect_blocking(stream, first.map(|_| ()))
                .map_err(|why| format!("final sync of stream {stream}: {why}"))?;
            self.clients[stream]
                .sync()
                .map_err(|e| format!("second final sync of stream {stream} failed: {e}"))?;
        }
        Ok(())
    }

    /// Syncs every stream until it returns `Ok` with no injected fault left to surface, each
    /// result judged by the audit, then has the audit judge the whole run.
    fn finish_audited(&mut self) -> Result<(), String> {
        for stream in 0..self.clients.len() {
            let mut syncs = 0;
            loop {
                self.begin_call(stream)?;
                let result = self.clients[stream].sync();
                let ok = result.is_ok();
                self.blocking(stream, Blocking::Sync, result)
                    .map_err(|why| format!("final sync of stream {stream}: {why}"))?;
                // A sync can enqueue work of its own (clearing the fault record), whose
                // failure the next one returns.
                if ok && !self.audit.as_ref().is_some_and(|a| a.pending(stream)) {
                    break;
                }
                syncs += 1;
                if syncs > MAX_FINAL_SYNCS {
                    return Err(format!("stream {stream} still fails after {syncs} syncs"));
                }
            }
        }
        self.audit.as_mut().map_or(Ok(()), FaultAudit::finish)
    }

    /// Drops every handle the program still holds.
    pub fn release_all(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
    }

    /// Judges a blocking call's result: by the audit where faults are injected, else against
    /// the stream's pending fault (which only `sync` and reads report: they read the fault
    /// record).
    fn blocking(
        &mut self,
        stream: usize,
        call: Blocking,
        result: Result<(), ServerError>,
    ) -> Result<(), String> {
        match (&mut self.audit, call) {
            (Some(audit), _) => audit.blocking(stream, call, result),
            (None, Blocking::Flush) => result.map_err(|e| format!("flush failed: {e}")),
            (None, _) => self.expect_blocking(stream, result),
        }
    }

    /// Marks the start of a blocking call on `stream` for the audit, if there is one.
    fn begin_call(&mut self, stream: usize) -> Result<(), String> {
        if let Some(audit) = &mut self.audit {
            // A round trip through the actor, so that every earlier call reached the device.
            self.clients[stream]
                .memory_usage()
                .map_err(|e| format!("memory_usage failed: {e}"))?;
            audit.begin_call();
        }
        Ok(())
    }

    /// The window an operation of `stream` belongs to, where faults are injected.
    fn taint_of(&self, stream: usize) -> BTreeSet<WindowId> {
        self.audit.iter().map(|a| a.window(stream)).collect()
    }

    /// Checks a blocking call's result against the stream's pending fault, consuming it.
    fn expect_blocking(
        &mut self,
        stream: usize,
        result: Result<(), ServerError>,
    ) -> Result<(), String> {
        match (self.pending_fault[stream].take(), result) {
            (None, Ok(())) => Ok(()),
            (Some(expected), Err(actual)) if expected == actual => {
                self.faults_surfaced += 1;
                Ok(())
            }
            (expected, actual) => Err(format!("expected {expected:?}, got {actual:?}")),
        }
    }

    fn step(&mut self, op: &Op) -> Result<(), String> {
        match &op.step {
            Step::Create { slot, data } => self.create(op.stream, *slot, data)?,
            Step::Write { slot, offset, data } => self.write(op.stream, *slot, *offset, data)?,
            Step::Launch {
                kernel,
                dst,
                src,
                k,
            } => self.launch(op.stream, *kernel, *dst, *src, *k)?,
            Step::Read { slot } => self.read(op, *slot)?,
            Step::Release { slot } => self.slots[*slot] = None,
            Step::Sync => {
                self.begin_call(op.stream)?;
                let result = self.clients[op.stream].sync();
                self.blocking(op.stream, Blocking::Sync, result)?;
            }
            Step::Flush => {
                self.begin_call(op.stream)?;
                let result = self.clients[op.stream].flush();
                self.blocking(op.stream, Blocking::Flush, result)?;
            }
            Step::Fault { slot, past_end } => self.overrun(op.stream, *slot, *past_end)?,
        }
        Ok(())
    }

    /// Creates `slot` holding `data`, unless the audit expected the allocation to fail.
    fn create(&mut self, stream: usize, slot: usize, data: &[u32]) -> Result<(), String> {
        let result = self.clients[stream].create(Bytes::from_elems(data));
        if let Some(audit) = &mut self.audit
            && !audit.allocation(&result)?
        {
            return Ok(());
        }
        let handle = result.map_err(|e| format!("create failed: {e}"))?;
        self.slots[slot] = Some(Slot {
            handle,
            model: data.to_vec(),
            taint: self.taint_of(stream),
        });
        Ok(())
    }

    /// Writes `data` into a live `slot` at `offset` (both wrapped to fit) and into its model.
    fn write(
        &mut self,
        stream: usize,
        slot: usize,
        offset: usize,
        data: &[u32],
    ) -> Result<(), String> {
        let taint = self.taint_of(stream);
        let Some(s) = &mut self.slots[slot] else {
            return Ok(());
        };
        let offset = offset % s.model.len();
        let len = data.len().min(s.model.len() - offset);
        let patch = &data[..len];
        self.clients[stream]
            .write_at(&s.handle, (offset * 4) as u64, Bytes::from_elems(patch))
            .map_err(|e| format!("write failed: {e}"))?;
        s.model[offset..offset + len].copy_from_slice(patch);
        s.taint.extend(taint);
        Ok(())
    }

    /// Reads a live `slot` and checks it against its model; a mismatch is a failure, or under
    /// an audit one that the faults injected into the slot's windows must explain.
    fn read(&mut self, op: &Op, slot: usize) -> Result<(), String> {
        let Some(s) = &self.slots[slot] else {
            return Ok(());
        };
        let handle = s.handle.clone();
        self.begin_call(op.stream)?;
        let result = self.clients[op.stream].read_one(handle);
        let s = self.slots[slot].as_ref().expect("matched above");
        let (expected, taint) = (s.model.clone(), s.taint.clone());
        match result {
            Ok(bytes) => {
                self.blocking(op.stream, Blocking::Read, Ok(()))?;
                let actual = bytes.to_elems::<u32>();
                if actual == expected {
                    self.reads_checked += 1;
                    return Ok(());
                }
                let what = format!("read {actual:?}, model holds {expected:?}");
                match &mut self.audit {
                    Some(audit) => audit.mismatch(format!("{op:?}: {what}"), &taint),
                    None => Err(what),
                }
            }
            Err(err) => self.blocking(op.stream, Blocking::Read, Err(err)),
        }
    }

    /// Launches `overrun` on a live `slot`, `past_end` elements past it, and expects the
    /// stream's next blocking call to report that fault.
    fn overrun(&mut self, stream: usize, slot: usize, past_end: u32) -> Result<(), String> {
        let Some(s) = &self.slots[slot] else {
            return Ok(());
        };
        let client = &self.clients[stream];
        let args = KernelArguments::new()
            .binding(&s.handle)
            .param(Scalar::U32(past_end));
        client
            .launch(&overrun(), CubeCount::Static(1, 1, 1), args)
            .map_err(|e| format!("launch of overrun refused: {e}"))?;
        let index = s.model.len() as u32 + past_end;
        self.pending_fault[stream].get_or_insert(ServerError::KernelFault {
            kernel: "overrun".to_owned(),
            binding: 0,
            index,
            stream: client.stream_id(),
        });
        Ok(())
    }

    fn launch(
        &mut self,
        stream: usize,
        kind: KernelKind,
        dst: usize,
        src: usize,
        k: u32,
    ) -> Result<(), String> {
        let client = &self.clients[stream];
        let (Some(d), true) = (
            &self.slots[dst],
            !kind.has_src() || self.slots[src].is_some(),
        ) else {
            return Ok(());
        };
        let mut args = KernelArguments::new().binding(&d.handle);
        if kind.has_src() {
            args = args.binding(&self.slots[src].as_ref().expect("checked above").handle);
        }
        if kind != KernelKind::AtomicSum {
            args = args.param(Scalar::U32(k));
        }
        let src_len = self.slots[src].as_ref().map_or(0, |s| s.model.len());
        let count = CubeCount::Static(kind.workgroups(d.model.len(), src_len), 1, 1);
        let result = client.launch(&kind.kernel(), count, args);
        if kind.has_src() && dst == src {
            // A writable binding aliasing another one is refused at the call.
            return match result {
                Err(IoError::InvalidLaunch { .. }) => Ok(()),
                other => Err(format!("aliased launch should be refused, got {other:?}")),
            };
        }
        result.map_err(|e| format!("launch refused: {e}"))?;
        let src_model = if kind.has_src() {
            self.slots[src]
                .as_ref()
                .expect("checked above")
                .model
                .clone()
        } else {
            Vec::new()
        };
        let mut taint = self.taint_of(stream);
        if kind.has_src() {
            taint.extend(&self.slots[src].as_ref().expect("checked above").taint);
        }
        let d = self.slots[dst].as_mut().expect("checked above");
        kind.reference(&mut d.model, &src_model, k);
        d.taint.extend(taint);
        Ok(())
    }
}
