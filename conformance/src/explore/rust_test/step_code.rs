//! Each workload operation as the client calls the driver makes for it, with the model's
//! expectations as assertions (`driver.rs`'s `act`, operation by operation).

use lockstep::{ReduceOperation, StreamId};

use super::{
    FIRST_OWN_STREAM, Group, HOST_STREAM, Lazy, Printer, Slot, Unprintable, bytes, error_code,
    kernel_code, model_refuses, refusal_code, vec_of,
};
use crate::explore::driver::{InCapture, OversizedRequest, READ, in_capture, refusal};
use crate::explore::formula::Formula;
use crate::explore::workload::{Action, LaunchSpec, On, Step, data, tensor_strategy, view_target};

/// A launch's call expression, whether it binds one handle twice (refused at the call), and
/// its destination and source model buffers.
struct LaunchCall {
    call: String,
    refused: bool,
    bufs: (u64, u64),
}

impl Printer<'_> {
    /// The client variable of `on` for `thread`, defined at first use, and its stream.
    fn client(&mut self, thread: usize, on: On) -> (String, StreamId) {
        let (name, s) = match on {
            On::Pinned(i) => (format!("s{i}"), StreamId(i as u64)),
            On::Thread => {
                let s = self.thread_streams[&thread];
                (format!("t{}", s.0 - FIRST_OWN_STREAM), s)
            }
        };
        if !self.clients.contains_key(&s) {
            self.code.line(format!("let mut {name} = client.clone();"));
            self.code
                .line(format!("{name}.set_stream(StreamId({}));", s.0));
            self.clients.insert(s, name.clone());
        }
        (name, s)
    }

    /// Prints operation `step` of `thread`.
    pub(super) fn step(&mut self, thread: usize, step: &Step) -> Result<(), Unprintable> {
        let (c, s) = self.client(thread, step.on);
        if self.captures.records(s) {
            match in_capture(&step.action) {
                InCapture::AsUsual => {}
                in_window => {
                    self.in_capture(&c, s, in_window);
                    return Ok(());
                }
            }
        }
        match &step.action {
            Action::Create { slot, len, fill } => {
                let values = data(*fill, *len);
                let var = self.var("h");
                let data = bytes(&mut self.code, &values);
                self.code
                    .line(format!("let {var} = {c}.create({data}).unwrap();"));
                let buf = self.model.create(s, values);
                self.fill_slot(*slot, Slot { var, buf });
            }
            Action::EmptyThenFill { slot, len, fill } => {
                let values = data(*fill, *len);
                let var = self.var("h");
                let data = bytes(&mut self.code, &values);
                self.code
                    .line(format!("let {var} = {c}.empty({}).unwrap();", len * 4));
                self.code
                    .line(format!("{c}.write(&{var}, {data}).unwrap();"));
                let buf = self.model.create(s, values);
                self.fill_slot(*slot, Slot { var, buf });
            }
            Action::Write {
                slot,
                offset,
                len,
                fill,
            } => {
                let Some(Slot { var, buf }) = &self.slots[*slot] else {
                    return Ok(());
                };
                let (var, buf) = (var.clone(), *buf);
                let n = self.model.len(buf);
                let offset = offset % n;
                let values = data(*fill, (*len).min(n - offset));
                let data = bytes(&mut self.code, &values);
                self.code.line(format!(
                    "{c}.write_at(&{var}, {}, {data}).unwrap();",
                    offset * 4
                ));
                self.model.write(s, buf, offset, &values);
            }
            Action::Launch(spec) => {
                self.launch(&c, s, spec, true);
            }
            Action::Read { slot } => {
                let Some(Slot { var, buf }) = &self.slots[*slot] else {
                    return Ok(());
                };
                let (call, buf) = (format!("{c}.read_one({var}.clone())"), *buf);
                self.read(s, &call, false, &[buf])?;
            }
            Action::ReadPair { a, b } => {
                let (Some(a), Some(b)) = (&self.slots[*a], &self.slots[*b]) else {
                    return Ok(());
                };
                self.code.uses("lockstep", &["block_on"]);
                let call = format!(
                    "block_on({c}.read_async(vec![{}.clone(), {}.clone()]))",
                    a.var, b.var
                );
                let bufs = [a.buf, b.buf];
                self.read(s, &call, true, &bufs)?;
            }
            Action::CreateTensors { slot, shapes, fill } => {
                self.create_tensors(&c, s, *slot, shapes, *fill)
            }
            Action::ReadTensors { slot } => {
                let Some(group) = &self.tensors[*slot] else {
                    return Ok(());
                };
                let descriptors = descriptors(group);
                self.code.uses("lockstep", &["CopyDescriptor", "block_on"]);
                let call = format!(
                    "block_on({c}.read_tensor_async(vec![{}]))",
                    descriptors.join(", ")
                );
                let bufs = group.bufs.clone();
                self.read(s, &call, true, &bufs)?;
            }
            Action::ReadLazy { slot } => {
                let Some(Slot { var, buf }) = &self.slots[*slot] else {
                    return Ok(());
                };
                let (handle, buf) = (var.clone(), *buf);
                let len = self.model.len(buf);
                let var = self.var("lazy");
                self.code.uses("lockstep", &["CopyDescriptor"]);
                self.code.line(format!(
                    "let {var} = {c}.read_lazy(CopyDescriptor::new({handle}.clone(), vec![{len}], vec![1], 4));"
                ));
                self.lazies.push_back(Lazy {
                    var,
                    buf,
                    stream: s,
                });
            }
            Action::Materialize => {
                let Some(lazy) = self.lazies.pop_front() else {
                    return Ok(());
                };
                self.code.uses("lockstep", &["Bytes"]);
                let call = format!(
                    "{}.materialize().map(|b| Bytes::from(b.to_vec()))",
                    lazy.var
                );
                if self.captures.records(lazy.stream) {
                    let expected = refusal_code(&mut self.code, &refusal(READ, lazy.stream));
                    self.code
                        .line(format!("assert_eq!({call}.err(), {expected});"));
                } else {
                    self.read(lazy.stream, &call, false, &[lazy.buf])?;
                }
                self.code.line(format!("drop({});", lazy.var));
            }
            Action::Profile(spec) => self.profile(&c, s, spec),
            Action::DryRun(spec) => {
                if let Some(LaunchCall { call, refused, .. }) = self.launch_call(&c, spec) {
                    let call = format!("lockstep::dry_run(|| {call})");
                    self.launch_statement(&call, refused);
                }
            }
            Action::Release { slot } => {
                if let Some(Slot { var, .. }) = self.slots[*slot].take() {
                    self.code.line(format!("drop({var});"));
                }
            }
            Action::ReleaseTensors { slot } => {
                if let Some(Group { var, .. }) = self.tensors[*slot].take() {
                    self.code.line(format!("drop({var});"));
                }
            }
            Action::Flush => {
                self.code.line(format!("{c}.flush().unwrap();"));
                self.blocking(s, false)?;
            }
            Action::Sync => {
                let expected = self.expected(s)?;
                self.code
                    .line(format!("assert_eq!({c}.sync(), {expected});"));
                self.blocking(s, true)?;
            }
            Action::Overrun { slot, past_end } => self.overrun(&c, s, *slot, *past_end),
            Action::BeginCapture { launches } => self.begin_capture(&c, s, launches),
            Action::EndCapture => self.end_capture(),
            Action::CaptureOutOfOrder { prepare } => self.capture_out_of_order(&c, s, *prepare),
            Action::Oversized { tensors, below } => self.oversized(&c, *tensors, *below),
            Action::LaunchView {
                kernel,
                group,
                index,
                src,
                k,
            } => self.launch_view(&c, s, (*kernel, *k), (*group, *index), *src),
            Action::Prepare => {
                self.code.line(format!("{c}.graph_prepare().unwrap();"));
                self.captures.prepared.insert(s);
            }
            Action::Edge(call) => self.edge(&c, s, call)?,
            Action::Replay => {
                if let Some(graph) = &self.graph {
                    self.code.line(format!("{}.replay();", graph.var));
                    for &(kernel, dst, src, k) in &graph.launches {
                        let formula = &self.world.kernels[kernel];
                        self.model
                            .launch(graph.stream, dst, src, |d, s| formula.apply(d, s, k));
                    }
                }
            }
            Action::DropGraph => {
                if let Some(graph) = self.graph.take() {
                    self.code.line(format!("drop({});", graph.var));
                }
            }
            Action::AllReduce { slot, op, fill } => self.all_reduce(&c, s, *slot, *op, *fill)?,
            Action::ToPeer { slot, peer } => {
                let Some(Slot { var, buf }) = &self.slots[*slot] else {
                    return Ok(());
                };
                let (var, buf) = (var.clone(), *buf);
                self.code.uses("lockstep::kernel", &["ElemType"]);
                let copy = self.var("copy");
                self.code.line(format!(
                    "let {copy} = {c}.to_client({var}.clone(), &peer{peer}, ElemType::U32).unwrap();"
                ));
                let expected = vec_of(self.model.values(buf));
                self.code.line(format!(
                    "assert_eq!(peer{peer}.read_one({copy}).unwrap().to_elems::<u32>(), {expected});"
                ));
            }
            Action::FromPeer {
                slot,
                peer,
                len,
                fill,
            } => {
                let values = data(*fill, *len);
                let (src, var) = (self.var("part"), self.var("h"));
                self.code.uses("lockstep::kernel", &["ElemType"]);
                let data = bytes(&mut self.code, &values);
                self.code
                    .line(format!("let {src} = peer{peer}.create({data}).unwrap();"));
                self.code.line(format!(
                    "let {var} = peer{peer}.to_client({src}, &{c}, ElemType::U32).unwrap();"
                ));
                let buf = self.model.create(s, values);
                self.fill_slot(*slot, Slot { var, buf });
            }
            Action::Install => {
                self.code.uses(
                    "lockstep",
                    &["InstallMemoryPoolsError", "MemoryPoolsConfig", "PoolPreset"],
                );
                let unavailable = if self.model.may_have_failed(s, false) {
                    " | Err(InstallMemoryPoolsError::StreamUnavailable)"
                } else {
                    ""
                };
                self.code.line(format!(
                    "assert!(matches!({c}.install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::Default)), Ok(()) | Err(InstallMemoryPoolsError::PoolsInUse {{ .. }}){unavailable}));"
                ));
            }
            Action::Cleanup => self.code.line(format!("{c}.memory_cleanup();")),
            Action::Usage => self.code.line(format!("{c}.memory_usage().unwrap();")),
        }
        Ok(())
    }

    /// Puts a new buffer in `slot`; the handle it replaces drops after the new one exists.
    fn fill_slot(&mut self, slot: usize, new: Slot) {
        if let Some(old) = self.slots[slot].replace(new) {
            self.code.line(format!("drop({});", old.var));
        }
    }

    /// `Ok(())` or the kernel fault the next blocking call on `s` must return.
    fn expected(&mut self, s: StreamId) -> Result<String, Unprintable> {
        match self.model.expected_fault(s).cloned() {
            Some(fault) => Ok(format!("Err({})", error_code(&mut self.code, &fault)?)),
            None => Ok("Ok(())".to_owned()),
        }
    }

    /// Tells the model that a blocking call on `s` returned what it expected.
    pub(super) fn blocking(&mut self, s: StreamId, waited: bool) -> Result<(), Unprintable> {
        let expected = match self.model.expected_fault(s) {
            Some(fault) if waited => Some(fault.clone()),
            _ => None,
        };
        let result = match &expected {
            Some(fault) => Err(fault),
            None => Ok(()),
        };
        self.model
            .blocking(s, result, waited)
            .map_err(model_refuses)
    }

    /// A read on `s` by `call`, of `bufs`: the stream's owed fault, or every buffer's values
    /// (`many`: the call returns a `Vec` of them).
    fn read(
        &mut self,
        s: StreamId,
        call: &str,
        many: bool,
        bufs: &[u64],
    ) -> Result<(), Unprintable> {
        if let Some(fault) = self.model.expected_fault(s).cloned() {
            let expected = error_code(&mut self.code, &fault)?;
            self.code
                .line(format!("assert_eq!({call}.err(), Some({expected}));"));
            return self.blocking(s, true);
        }
        self.blocking(s, true)?;
        if !many {
            let expected = vec_of(self.model.values(bufs[0]));
            self.code.line(format!(
                "assert_eq!({call}.unwrap().to_elems::<u32>(), {expected});"
            ));
            return Ok(());
        }
        let read = self.var("read");
        self.code.line(format!("let {read} = {call}.unwrap();"));
        for (i, &buf) in bufs.iter().enumerate() {
            let expected = vec_of(self.model.values(buf));
            self.code.line(format!(
                "assert_eq!({read}[{i}].to_elems::<u32>(), {expected});"
            ));
        }
        Ok(())
    }

    /// The driver's read-back of everything live after its drain (`driver`'s `last_read`):
    /// one `read_async` of every slot's handle, then one `read_tensor_async` of every group's
    /// tensors, each skipped when there is nothing to read.
    pub(super) fn read_back_everything(&mut self) -> Result<(), Unprintable> {
        let s = StreamId(HOST_STREAM);
        let slots: Vec<&Slot> = self.slots.iter().flatten().collect();
        if !slots.is_empty() {
            self.code.uses("lockstep", &["block_on"]);
            let handles: Vec<String> = slots.iter().map(|s| format!("{}.clone()", s.var)).collect();
            let call = format!("block_on(client.read_async(vec![{}]))", handles.join(", "));
            let bufs: Vec<u64> = slots.iter().map(|s| s.buf).collect();
            self.read(s, &call, true, &bufs)?;
        }
        let groups: Vec<&Group> = self.tensors.iter().flatten().collect();
        if groups.is_empty() {
            return Ok(());
        }
        let descriptors: Vec<String> = groups.iter().flat_map(|g| descriptors(g)).collect();
        let bufs: Vec<u64> = groups.iter().flat_map(|g| g.bufs.iter().copied()).collect();
        self.code.uses("lockstep", &["CopyDescriptor", "block_on"]);
        let call = format!(
            "block_on(client.read_tensor_async(vec![{}]))",
            descriptors.join(", ")
        );
        self.read(s, &call, true, &bufs)
    }

    /// The kernel variable of the world's kernel `index`, defined at first use.
    pub(super) fn kernel(&mut self, index: usize) -> String {
        let var = self.world.kernels[index].name.clone();
        if self.kernels.insert(index) {
            kernel_code::formula(&mut self.code, &var, &self.world.kernels[index]);
        }
        var
    }

    /// The call launching `spec` on client `c`; `None` when a slot is empty (the driver skips
    /// the launch).
    fn launch_call(&mut self, c: &str, spec: &LaunchSpec) -> Option<LaunchCall> {
        let (Some(dst), Some(src)) = (&self.slots[spec.dst], &self.slots[spec.src]) else {
            return None;
        };
        let bufs = (dst.buf, src.buf);
        let (dst, src) = (dst.var.clone(), src.var.clone());
        Some(LaunchCall {
            call: self.launch_code(c, (spec.kernel, spec.k), (&dst, bufs.0), &src),
            refused: spec.dst == spec.src,
            bufs,
        })
    }

    /// The call launching the world's kernel `kernel` with parameter `k` on client `c`, on the
    /// handle expression `dst` (of model buffer `dst_buf`) and `src`.
    fn launch_code(
        &mut self,
        c: &str,
        (kernel, k): (usize, u32),
        (dst, dst_buf): (&str, u64),
        src: &str,
    ) -> String {
        let groups = Formula::workgroups(self.model.len(dst_buf));
        let kernel = self.kernel(kernel);
        self.code
            .uses("lockstep", &["CubeCount", "KernelArguments"]);
        self.code.uses("lockstep::kernel", &["Scalar"]);
        format!(
            "{c}.launch(&{kernel}, CubeCount::Static({groups}, 1, 1), KernelArguments::new().binding(&{dst}).binding(&{src}).param(Scalar::U32({k})))"
        )
    }

    /// `call;` that must succeed, or be refused when it binds one handle twice.
    fn launch_statement(&mut self, call: &str, refused: bool) {
        if refused {
            self.code.uses("lockstep", &["IoError"]);
            self.code.line(format!(
                "assert!(matches!({call}, Err(IoError::InvalidLaunch {{ .. }})));"
            ));
        } else {
            self.code.line(format!("{call}.unwrap();"));
        }
    }

    /// A launch of `spec` on `s`; with `model`, applied to the model (without, it is captured).
    /// Returns the model buffers it launched on, if it did.
    pub(super) fn launch(
        &mut self,
        c: &str,
        s: StreamId,
        spec: &LaunchSpec,
        model: bool,
    ) -> Option<(u64, u64)> {
        let LaunchCall {
            call,
            refused,
            bufs,
        } = self.launch_call(c, spec)?;
        self.launch_statement(&call, refused);
        if refused {
            return None;
        }
        if model {
            self.model_launch(s, (spec.kernel, spec.k), bufs);
        }
        Some(bufs)
    }

    /// The world's kernel `kernel` with parameter `k`, run on model buffers `dst` and `src`.
    fn model_launch(&mut self, s: StreamId, (kernel, k): (usize, u32), (dst, src): (u64, u64)) {
        let formula = &self.world.kernels[kernel];
        self.model
            .launch(s, dst, src, |d, s| formula.apply(d, s, k));
    }

    /// A launch inside `profile`, whose duration must resolve (the marks are taken even when
    /// the launch is skipped).
    fn profile(&mut self, c: &str, s: StreamId, spec: &LaunchSpec) {
        let duration = self.var("duration");
        match self.launch_call(c, spec) {
            None => self.code.line(format!(
                "let ((), {duration}) = {c}.profile(|| (), \"explore\").unwrap();"
            )),
            Some(LaunchCall {
                call,
                refused,
                bufs,
            }) => {
                let launched = self.var("launched");
                self.code.line(format!(
                    "let ({launched}, {duration}) = {c}.profile(|| {call}, \"explore\").unwrap();"
                ));
                self.launch_statement(&launched, refused);
                if !refused {
                    self.model_launch(s, (spec.kernel, spec.k), bufs);
                }
            }
        }
        self.code
            .line(format!("{duration}.resolve_blocking().unwrap();"));
    }

    /// The checked overrun kernel on `slot`: the stream's next blocking call owes its fault.
    fn overrun(&mut self, c: &str, s: StreamId, slot: usize, past_end: u32) {
        let Some(Slot { var, buf }) = &self.slots[slot] else {
            return;
        };
        let (var, buf) = (var.clone(), *buf);
        if !std::mem::replace(&mut self.overrun, true) {
            kernel_code::overrun(&mut self.code);
        }
        self.code
            .uses("lockstep", &["CubeCount", "KernelArguments"]);
        self.code.uses("lockstep::kernel", &["Scalar"]);
        self.code.line(format!(
            "{c}.launch(&overrun, CubeCount::Static(1, 1, 1), KernelArguments::new().binding(&{var}).param(Scalar::U32({past_end}))).unwrap();"
        ));
        let index = self.model.len(buf) as u32 + past_end;
        self.model.expect_fault(
            s,
            lockstep::ServerError::KernelFault {
                kernel: "overrun".to_owned(),
                binding: 0,
                index,
                stream: s,
            },
        );
    }

    /// `create_tensors` of `shapes` into tensor `slot`, alternating optimized and contiguous
    /// layouts.
    fn create_tensors(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        shapes: &[Vec<usize>],
        fill: u64,
    ) {
        self.code.uses(
            "lockstep",
            &["MemoryLayoutDescriptor", "MemoryLayoutStrategy"],
        );
        let var = self.var("tensors");
        self.code
            .line(format!("let {var} = {c}.create_tensors(vec!["));
        let mut bufs = Vec::with_capacity(shapes.len());
        for (i, shape) in shapes.iter().enumerate() {
            let values = data(fill.wrapping_add(i as u64), shape.iter().product());
            let strategy = tensor_strategy(i);
            let data = bytes(&mut self.code, &values);
            self.code.line(format!(
                "    (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::{strategy:?}, vec!{shape:?}, 4), {data}),"
            ));
            bufs.push(self.model.create(s, values));
        }
        self.code.line("]).unwrap();");
        let group = Group {
            var,
            shapes: shapes.to_vec(),
            bufs,
        };
        if let Some(old) = self.tensors[slot].replace(group) {
            self.code.line(format!("drop({});", old.var));
        }
    }

    /// A launch whose destination is a tensor of group `group` ([`view_target`]), a view at a
    /// non-zero offset of its allocation unless it is the first.
    fn launch_view(
        &mut self,
        c: &str,
        s: StreamId,
        launch: (usize, u32),
        (group, index): (usize, usize),
        src: usize,
    ) {
        let (Some(group), Some(src)) = (&self.tensors[group], &self.slots[src]) else {
            return;
        };
        let dims: Vec<usize> = group.shapes.iter().map(Vec::len).collect();
        let Some(i) = view_target(&dims, index) else {
            return;
        };
        let dst = format!("{}[{i}].memory", group.var);
        let bufs = (group.bufs[i], src.buf);
        let src = src.var.clone();
        let call = self.launch_code(c, launch, (&dst, bufs.0), &src);
        self.code.line(format!("{call}.unwrap();"));
        self.model_launch(s, launch, bufs);
    }

    /// An allocation no device serves ([`OversizedRequest`]), refused as out of memory.
    fn oversized(&mut self, c: &str, tensors: bool, below: usize) {
        self.code.uses("lockstep", &["ServerError"]);
        let call = match OversizedRequest::of(tensors, below) {
            OversizedRequest::Empty(bytes) => format!("{c}.empty({})", size_code(bytes)),
            OversizedRequest::Tensors(sizes) => {
                self.code.uses(
                    "lockstep",
                    &["MemoryLayoutDescriptor", "MemoryLayoutStrategy"],
                );
                let tensors: Vec<String> = sizes
                    .iter()
                    .map(|&bytes| {
                        format!(
                            "MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![{}], 1)",
                            size_code(bytes)
                        )
                    })
                    .collect();
                format!("{c}.empty_tensors(vec![{}])", tensors.join(", "))
            }
        };
        self.code.line(format!(
            "assert!(matches!({call}, Err(ServerError::OutOfMemory(_))));"
        ));
    }

    /// An in-place all-reduce of `slot` with a fresh buffer on every peer; each peer's result
    /// must be the reduction, which the slot then holds.
    fn all_reduce(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        op: ReduceOperation,
        fill: u64,
    ) -> Result<(), Unprintable> {
        let Some(Slot { var, buf }) = &self.slots[slot] else {
            return Ok(());
        };
        let (var, buf) = (var.clone(), *buf);
        self.code.uses("lockstep", &["ReduceOperation"]);
        self.code.uses("lockstep::kernel", &["ElemType"]);
        let devices = self.var("devices");
        let peers: Vec<String> = (0..self.world.peers)
            .map(|p| format!("peer{p}.peer_id()"))
            .collect();
        self.code.line(format!(
            "let {devices} = vec![{c}.peer_id(), {}];",
            peers.join(", ")
        ));
        let reduce = |on: &str, h: &str| {
            format!(
                "{on}.all_reduce({h}.clone(), {h}.clone(), ElemType::U32, {devices}.clone(), ReduceOperation::{op:?}).unwrap();"
            )
        };
        self.code.line(reduce(c, &var));
        let mut expected = self.model.values(buf).to_vec();
        let mut parts = Vec::with_capacity(self.world.peers);
        for k in 0..self.world.peers {
            let values = data(fill.wrapping_add(k as u64), expected.len());
            let part = self.var("part");
            let data = bytes(&mut self.code, &values);
            self.code
                .line(format!("let {part} = peer{k}.create({data}).unwrap();"));
            self.code.line(reduce(&format!("peer{k}"), &part));
            for (e, v) in expected.iter_mut().zip(&values) {
                *e = match op {
                    ReduceOperation::Sum => e.wrapping_add(*v),
                    ReduceOperation::Min => (*e).min(*v),
                    ReduceOperation::Max => (*e).max(*v),
                    other => {
                        return Err(Unprintable::Unsupported(format!(
                            "no reference for an all-reduce by {other:?}"
                        )));
                    }
                };
            }
            parts.push(part);
        }
        for (k, part) in parts.iter().enumerate() {
            self.code.line(format!(
                "assert_eq!(peer{k}.read_one({part}).unwrap().to_elems::<u32>(), {});",
                vec_of(&expected)
            ));
        }
        self.model
            .launch(s, buf, buf, |d, _| d.copy_from_slice(&expected));
        Ok(())
    }
}

/// A size near the top of `usize` as code: `usize::MAX - d`, or `(1 << 63) - d`.
fn size_code(bytes: usize) -> String {
    let top = usize::BITS - 1;
    match (usize::MAX - bytes, (1usize << top).checked_sub(bytes)) {
        (d, _) if d < 1 << 32 => format!("usize::MAX - {d}"),
        (_, Some(0)) => format!("1 << {top}"),
        (_, Some(d)) if d < 1 << 32 => format!("(1 << {top}) - {d}"),
        _ => bytes.to_string(),
    }
}

/// A `CopyDescriptor` expression per tensor of `group`, reading it whole.
fn descriptors(group: &Group) -> Vec<String> {
    group
        .shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            format!(
                "CopyDescriptor::new({v}[{i}].memory.clone(), vec!{shape:?}, {v}[{i}].strides.clone(), 4)",
                v = group.var
            )
        })
        .collect()
}
