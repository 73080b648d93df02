//! Each workload operation as the client calls the driver makes for it, with the model's
//! expectations as assertions (`driver.rs`'s `act`, operation by operation).

use lockstep::{ReduceOperation, StreamId};

use super::{
    FIRST_OWN_STREAM, Group, Printer, Slot, Unprintable, bytes, error_code, kernel_code,
    model_refuses, refusal_code, vec_of,
};
use crate::coverage::Method;
use crate::driver::{
    InCapture, OversizedRequest, TensorsRefusal, clipped, in_capture, refusal, tensor_elems,
    tensors_refusal, write_range,
};
use crate::workload::{
    Action, Inside, LaunchCount, LaunchSpec, Launched, MAX_LEN, MAX_WORKGROUPS, On, Step, data,
    tensor_strategy, view_target,
};

/// A launch's call expression, whether it binds one handle twice (refused at the call), and
/// its destination and source model buffers.
struct LaunchCall {
    call: String,
    refused: bool,
    /// How many of the destination's first elements the kernel computes, if it runs.
    covers: Option<usize>,
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
                InCapture::AsUsual | InCapture::OwnRules => {}
                in_window @ (InCapture::Recorded(_)
                | InCapture::WrittenInWindow { .. }
                | InCapture::Refused(_)
                | InCapture::Skipped) => {
                    self.in_capture(&c, s, in_window);
                    return Ok(());
                }
            }
        }
        match &step.action {
            &Action::Create { slot, len, fill } => self.create(&c, s, (slot, len, fill), false),
            &Action::EmptyThenFill { slot, len, fill } => {
                self.create(&c, s, (slot, len, fill), true)
            }
            &Action::Write {
                slot,
                offset,
                len,
                fill,
                clip,
            } => self.write(&c, s, slot, (offset, len), fill, clip),
            Action::Launch(spec) => {
                self.launch(&c, s, spec, true);
            }
            &Action::Read { slot } => self.read_one(&c, s, slot)?,
            &Action::ReadPair { a, b } => self.read_pair(&c, s, a, b)?,
            Action::CreateTensors { slot, shapes, fill } => {
                self.create_tensors(&c, s, *slot, shapes, *fill)
            }
            Action::ReadTensors { slot, view } => self.read_tensors(&c, s, *slot, view.as_ref())?,
            &Action::ReadLazy { slot } => self.read_lazy(&c, s, slot),
            Action::Materialize => self.materialize()?,
            Action::Profile(spec) => self.profile(&c, s, spec),
            Action::DryRun(spec) => self.dry_run(&c, spec),
            &Action::Release { slot } => {
                if let Some(Slot { var, .. }) = self.slots[slot].take() {
                    self.code.line(format!("drop({var});"));
                }
            }
            &Action::ReleaseTensors { slot } => {
                if let Some(Group { var, .. }) = self.tensors[slot].take() {
                    self.code.line(format!("drop({var});"));
                }
            }
            Action::Flush => {
                self.code.line(format!("{c}.flush().unwrap();"));
                self.blocking(s, Method::Flush, false)?;
            }
            Action::Sync => {
                let expected = self.expected(s)?;
                self.code
                    .line(format!("assert_eq!({c}.sync(), {expected});"));
                self.blocking(s, Method::Sync, true)?;
            }
            Action::SyncAll => self.sync_all(&c, s)?,
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
            &Action::Exclusive { slot, inside } => self.exclusive(&c, s, slot, inside),
            Action::Replay => self.replay(),
            Action::DropGraph => {
                if !self.graphs.is_empty() {
                    let oldest = self.graphs.remove(0);
                    self.code.line(format!("drop({});", oldest.var));
                }
            }
            Action::AllReduce { slot, op, fill } => self.all_reduce(&c, s, *slot, *op, *fill)?,
            &Action::ToPeer { slot, peer } => {
                if let Some(source) = self.in_slot(slot) {
                    self.copy_to_peer(&c, s, source, peer)?;
                }
            }
            &Action::ViewToPeer { group, index, peer } => {
                if let Some(source) = self.view(group, index) {
                    self.copy_to_peer(&c, s, source, peer)?;
                }
            }
            &Action::FromPeer {
                slot,
                peer,
                len,
                fill,
            } => self.copy_from_peer(&c, s, slot, peer, (len, fill)),
            Action::Install => self.install(&c, s),
            Action::Cleanup => self.code.line(format!("{c}.memory_cleanup();")),
            Action::Usage => self.code.line(format!("{c}.memory_usage().unwrap();")),
        }
        Ok(())
    }

    /// `create` of `len` elements of `fill` into `slot`, or (`then_fill`) `empty` of as many
    /// and then a `write` of them (`driver`'s `create`); an `empty` past [`MAX_LEN`] is
    /// refused as out of memory.
    fn create(
        &mut self,
        c: &str,
        s: StreamId,
        (slot, len, fill): (usize, usize, u64),
        then_fill: bool,
    ) {
        if len > MAX_LEN {
            self.code.uses("lockstep", &["ServerError"]);
            self.code.line(format!(
                "assert!(matches!({c}.empty({}), Err(ServerError::OutOfMemory(_))));",
                size_code(len * 4)
            ));
            return;
        }
        let values = data(fill, len);
        let var = self.var("h");
        let data = bytes(&mut self.code, &values);
        if then_fill {
            self.code
                .line(format!("let {var} = {c}.empty({}).unwrap();", len * 4));
            self.code
                .line(format!("{c}.write(&{var}, {data}).unwrap();"));
        } else {
            self.code
                .line(format!("let {var} = {c}.create({data}).unwrap();"));
        }
        let buf = self.model.create(s, values);
        self.fill_slot(slot, Slot { var, buf });
    }

    /// `write_at` of `len` elements of `fill` at element `offset` of the buffer in `slot`, if
    /// any: both clipped to the buffer if `clip`, else as drawn, refused past its end.
    fn write(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        (offset, len): (usize, usize),
        fill: u64,
        clip: bool,
    ) {
        let Some((var, buf)) = self.in_slot(slot) else {
            return;
        };
        let n = self.model.len(buf);
        let (offset, len) = if clip {
            clipped(offset, len, n)
        } else {
            (offset, len)
        };
        let values = data(fill, len);
        let data = bytes(&mut self.code, &values);
        let call = format!("{c}.write_at(&{var}, {}, {data})", offset as u64 * 4);
        match write_range(offset, len, n) {
            Ok(_) => {
                self.code.line(format!("{call}.unwrap();"));
                if !values.is_empty() {
                    self.model.write(s, buf, offset, &values);
                }
            }
            Err(refused) => {
                self.code.uses("lockstep", &["IoError"]);
                self.code
                    .line(format!("assert_eq!({call}, Err(IoError::{refused:?}));"));
            }
        }
    }

    /// `exclusive` doing `inside` with `slot`'s buffer, as the driver's `exclusive` judges it.
    fn exclusive(&mut self, c: &str, s: StreamId, slot: usize, inside: Inside) {
        let refused = "Err(ServerError::TaskPanicked { .. })";
        match inside {
            Inside::Returns => self
                .code
                .line(format!("assert_eq!({c}.exclusive(|| {slot}), Ok({slot}));")),
            Inside::Syncs => {
                self.code.uses("lockstep", &["ServerError"]);
                self.code.line(format!(
                    "assert!(matches!({c}.exclusive(|| {c}.sync()), {refused}));"
                ));
            }
            Inside::Writes { fill } => {
                let Some((var, buf)) = self.in_slot(slot) else {
                    return;
                };
                let n = self.model.len(buf);
                let values = data(fill, 1);
                let data = bytes(&mut self.code, &values);
                let call = format!("{c}.exclusive(|| {c}.write_at(&{var}, 0, {data}))");
                match (self.world.actor, write_range(0, 1, n)) {
                    (true, Ok(_)) => {
                        self.code.line(format!("{call}.unwrap().unwrap();"));
                        self.model.write(s, buf, 0, &values);
                    }
                    (true, Err(refused)) => {
                        self.code.uses("lockstep", &["IoError"]);
                        self.code.line(format!(
                            "assert_eq!({call}, Ok(Err(IoError::{refused:?})));"
                        ));
                    }
                    // Inline, a buffer of no elements is skipped, as the driver skips it.
                    (false, Err(_)) => {}
                    (false, Ok(_)) => {
                        self.code.uses("lockstep", &["ServerError"]);
                        self.code
                            .line(format!("assert!(matches!({call}, {refused}));"));
                    }
                }
            }
        }
    }

    /// A launch of `spec` inside `lockstep::dry_run`.
    fn dry_run(&mut self, c: &str, spec: &LaunchSpec) {
        if let Some(LaunchCall { call, refused, .. }) = self.launch_call(c, spec) {
            let call = format!("lockstep::dry_run(|| {call})");
            self.launch_statement(&call, refused);
        }
    }

    /// A replay of the newest live graph, if any, and its launches on the model.
    fn replay(&mut self) {
        let Some(graph) = self.graphs.last() else {
            return;
        };
        self.code.line(format!("{}.replay();", graph.var));
        for &(kernel, dst, src, k) in &graph.launches {
            let formula = &self.world.kernels[kernel];
            self.model
                .launch(graph.stream, dst, src, |d, s| formula.apply(d, s, k));
        }
    }

    /// `to_client` of the buffer in `slot`, if any, into `peer`, and a read there of the copy.
    fn copy_to_peer(
        &mut self,
        c: &str,
        s: StreamId,
        (var, buf): (String, u64),
        peer: usize,
    ) -> Result<(), Unprintable> {
        self.code.uses("lockstep::kernel", &["ElemType"]);
        let call = format!("{c}.to_client({var}.clone(), &peer{peer}, ElemType::U32)");
        // A copy of no bytes reads on the stream: its pending failure, if any, is returned.
        if self.model.len(buf) == 0 {
            if let Some(fault) = self.model.expected_fault(s).cloned() {
                let fault = error_code(&mut self.code, &fault)?;
                self.code
                    .line(format!("assert_eq!({call}.err(), Some({fault}));"));
                return self.blocking(s, Method::ToClient, true);
            }
            self.blocking(s, Method::ToClient, true)?;
        }
        let copy = self.var("copy");
        self.code.line(format!("let {copy} = {call}.unwrap();"));
        let expected = vec_of(self.model.values(buf));
        self.code.line(format!(
            "assert_eq!(peer{peer}.read_one({copy}).unwrap().to_elems::<u32>(), {expected});"
        ));
        Ok(())
    }

    /// A buffer of `len` elements of `fill` created on `peer` and copied by `to_client` into
    /// `slot`.
    fn copy_from_peer(
        &mut self,
        c: &str,
        s: StreamId,
        slot: usize,
        peer: usize,
        (len, fill): (usize, u64),
    ) {
        let values = data(fill, len);
        let (src, var) = (self.var("part"), self.var("h"));
        self.code.uses("lockstep::kernel", &["ElemType"]);
        let data = bytes(&mut self.code, &values);
        self.code
            .line(format!("let {src} = peer{peer}.create({data}).unwrap();"));
        self.code.line(format!(
            "let {var} = peer{peer}.to_client({src}, &{c}, ElemType::U32).unwrap();"
        ));
        let buf = self.model.create(s, values);
        self.fill_slot(slot, Slot { var, buf });
    }

    /// `install_memory_pools` of the default preset: installed, or refused while pools are in
    /// use (or, where the stream may have failed, as unavailable).
    fn install(&mut self, c: &str, s: StreamId) {
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

    /// `sync_all` on client `c` of stream `s`: refused while a capture is open, else the
    /// expected fault of the first stream, in id order, that has one.
    fn sync_all(&mut self, c: &str, s: StreamId) -> Result<(), Unprintable> {
        if let Some(open) = &self.captures.open {
            let expected = refusal_code(&mut self.code, &refusal("sync_all", open.stream));
            self.code
                .line(format!("assert_eq!({c}.sync_all().err(), {expected});"));
            return Ok(());
        }
        let streams = self.model.streams();
        let first = (streams.iter()).find_map(|&t| self.model.expected_fault(t).cloned());
        let expected = match &first {
            Some(fault) => format!("Err({})", error_code(&mut self.code, fault)?),
            None => "Ok(())".to_owned(),
        };
        self.code
            .line(format!("assert_eq!({c}.sync_all(), {expected});"));
        let result = first.as_ref().map_or(Ok(()), Err);
        self.model.sync_all(s, result).map_err(model_refuses)
    }

    /// Tells the model that `call`, a blocking call on `s`, returned what it expected.
    pub(super) fn blocking(
        &mut self,
        s: StreamId,
        call: Method,
        waited: bool,
    ) -> Result<(), Unprintable> {
        let expected = match self.model.expected_fault(s) {
            Some(fault) if waited => Some(fault.clone()),
            _ => None,
        };
        let result = match &expected {
            Some(fault) => Err(fault),
            None => Ok(()),
        };
        self.model
            .blocking(s, call, result, waited)
            .map_err(model_refuses)
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
        // The driver never launches on a source of no elements.
        if self.model.len(src.buf) == 0 {
            return None;
        }
        let bufs = (dst.buf, src.buf);
        let (dst, src) = (dst.var.clone(), src.var.clone());
        let dst_len = self.model.len(bufs.0);
        let formula = &self.world.kernels[spec.kernel];
        let launched = spec.count.launched(dst_len, formula, [MAX_WORKGROUPS; 3]);
        let count = self.count_code(c, spec.count, spec.count.workgroups(dst_len, formula));
        Some(LaunchCall {
            call: self.launch_code(c, (spec.kernel, spec.k), &count, &dst, &src),
            refused: spec.dst == spec.src || launched == Launched::Refused,
            covers: match launched {
                Launched::Covers(n) => Some(n),
                Launched::Nothing | Launched::Refused => None,
            },
            bufs,
        })
    }

    /// The `CubeCount` expression of `workgroups`, counted as `count` says: a dynamic one in a
    /// buffer created on client `c` within the expression.
    fn count_code(&mut self, c: &str, count: LaunchCount, [x, y, z]: [u32; 3]) -> String {
        self.code.uses("lockstep", &["CubeCount"]);
        match count {
            LaunchCount::Dynamic(_) => {
                self.code.uses("lockstep", &["Bytes"]);
                format!(
                    "CubeCount::Dynamic({c}.create(Bytes::from_elems::<u32>(&[{x}, {y}, {z}])).unwrap())"
                )
            }
            LaunchCount::Covering | LaunchCount::Static(_) => {
                format!("CubeCount::Static({x}, {y}, {z})")
            }
        }
    }

    /// The call launching the world's kernel `kernel` with parameter `k` on client `c` over
    /// the `count` expression, on the handle expressions `dst` and `src`.
    fn launch_code(
        &mut self,
        c: &str,
        (kernel, k): (usize, u32),
        count: &str,
        dst: &str,
        src: &str,
    ) -> String {
        let kernel = self.kernel(kernel);
        self.code
            .uses("lockstep", &["CubeCount", "KernelArguments"]);
        self.code.uses("lockstep::kernel", &["Scalar"]);
        format!(
            "{c}.launch(&{kernel}, {count}, KernelArguments::new().binding(&{dst}).binding(&{src}).param(Scalar::U32({k})))"
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
            covers,
            bufs,
        } = self.launch_call(c, spec)?;
        self.launch_statement(&call, refused);
        let covers = covers.filter(|_| !refused)?;
        if model {
            self.model_launch(s, (spec.kernel, spec.k), bufs, covers);
        }
        Some(bufs)
    }

    /// The world's kernel `kernel` with parameter `k`, run on model buffers `dst` and `src`
    /// over the first `covers` elements of `dst`.
    fn model_launch(
        &mut self,
        s: StreamId,
        (kernel, k): (usize, u32),
        (dst, src): (u64, u64),
        covers: usize,
    ) {
        let formula = &self.world.kernels[kernel];
        self.model
            .launch(s, dst, src, |d, s| formula.apply(&mut d[..covers], s, k));
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
                covers,
                bufs,
            }) => {
                let launched = self.var("launched");
                self.code.line(format!(
                    "let ({launched}, {duration}) = {c}.profile(|| {call}, \"explore\").unwrap();"
                ));
                self.launch_statement(&launched, refused);
                if let Some(covers) = covers.filter(|_| !refused) {
                    self.model_launch(s, (spec.kernel, spec.k), bufs, covers);
                }
            }
        }
        self.code
            .line(format!("{duration}.resolve_blocking().unwrap();"));
    }

    /// The checked overrun kernel on `slot`: the stream's next blocking call owes its fault.
    fn overrun(&mut self, c: &str, s: StreamId, slot: usize, past_end: u32) {
        let Some((var, buf)) = self.in_slot(slot) else {
            return;
        };
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
    /// layouts; refused as [`tensors_refusal`] says (a shape too large is given no data).
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
        let refusal = tensors_refusal(shapes);
        let var = self.var("tensors");
        self.code
            .line(format!("let {var} = {c}.create_tensors(vec!["));
        let mut bufs = Vec::with_capacity(shapes.len());
        for (i, shape) in shapes.iter().enumerate() {
            let values = data(
                fill.wrapping_add(i as u64),
                tensor_elems(shape).unwrap_or(0),
            );
            let strategy = tensor_strategy(i);
            let data = bytes(&mut self.code, &values);
            self.code.line(format!(
                "    (MemoryLayoutDescriptor::new(MemoryLayoutStrategy::{strategy:?}, vec!{shape:?}, 4), {data}),"
            ));
            if refusal.is_none() {
                bufs.push(self.model.create(s, values));
            }
        }
        match refusal {
            Some(TensorsRefusal::Layout) => {
                self.code.uses("lockstep", &["IoError", "ServerError"]);
                self.code.line("]);");
                self.code.line(format!(
                    "assert!(matches!({var}, Err(ServerError::Io(IoError::InvalidLayout {{ .. }}))));"
                ));
                return;
            }
            Some(TensorsRefusal::Size { expected }) => {
                self.code.uses("lockstep", &["IoError", "ServerError"]);
                self.code.line("]);");
                self.code.line(format!(
                    "assert_eq!({var}.err(), Some(ServerError::Io(IoError::SizeMismatch {{ what: \"tensor data\", expected: {expected}, actual: 0 }})));"
                ));
                return;
            }
            None => self.code.line("]).unwrap();"),
        }
        let group = Group {
            var,
            shapes: shapes.to_vec(),
            bufs,
        };
        if let Some(old) = self.tensors[slot].replace(group) {
            self.code.line(format!("drop({});", old.var));
        }
    }

    /// The handle expression and model buffer of the dense tensor of `group` that `index`
    /// names ([`view_target`]), if the group is live and has one.
    pub(super) fn view(&self, group: usize, index: usize) -> Option<(String, u64)> {
        let group = self.tensors[group].as_ref()?;
        let dims: Vec<usize> = group.shapes.iter().map(Vec::len).collect();
        let i = view_target(&dims, index)?;
        Some((format!("{}[{i}].memory", group.var), group.bufs[i]))
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
        let (Some((dst, dst_buf)), Some(src)) = (self.view(group, index), &self.slots[src]) else {
            return;
        };
        if self.model.len(src.buf) == 0 {
            return;
        }
        let bufs = (dst_buf, src.buf);
        let src = src.var.clone();
        let dst_len = self.model.len(bufs.0);
        let workgroups = self.world.kernels[launch.0].workgroups(dst_len);
        let count = format!("CubeCount::Static({workgroups}, 1, 1)");
        let call = self.launch_code(c, launch, &count, &dst, &src);
        self.code.line(format!("{call}.unwrap();"));
        self.model_launch(s, launch, bufs, dst_len);
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
        let Some((var, buf)) = self.in_slot(slot) else {
            return Ok(());
        };
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
