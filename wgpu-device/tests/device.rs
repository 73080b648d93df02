//! The `Device` trait on the wgpu adapter here, below the runtime: what the conformance suite
//! cannot reach through `ComputeClient` (unaligned copies, capture and replay, timestamps,
//! limits) and the reference semantics of the lowering. Skipped, visibly, without an adapter
//! (failed under `LOCKSTEP_REQUIRE_GPU=1` or `LOCKSTEP_REQUIRE_WGPU=1`).

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{
    Access, Axis, BinOp, BitFn, CmpOp, CompileOptions, ElemType, FaultRecord, KernelBuilder,
    KernelChecks, KernelDef, Scalar, Value, semantics,
};
use lockstep::{Device, DeviceError};
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

/// The adapter's device, or `None` (after [`cannot_run`] said why) without one.
fn device(test: &str) -> Option<WgpuDevice> {
    match WgpuOptions::from_env().and_then(WgpuDevice::new) {
        Ok(device) => Some(device),
        Err(err) => {
            cannot_run(Need::WgpuAdapter, test, &err.to_string());
            None
        }
    }
}

fn read(
    dev: &mut WgpuDevice,
    s: lockstep_wgpu::WgpuStream,
    b: &lockstep_wgpu::WgpuBuffer,
    off: u64,
    len: u64,
) -> Vec<u8> {
    let pending = dev.read(s, b, off, len).unwrap();
    dev.wait_read(pending).unwrap().into_vec()
}

/// A small deterministic generator (tests must not depend on a crate for this).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
fn unaligned_writes_reads_and_copies_match_a_host_model() {
    let Some(mut dev) = device("unaligned_writes_reads_and_copies_match_a_host_model") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let size = 301u64;
    let a = dev.allocate(size).unwrap();
    let b = dev.allocate(size).unwrap();
    let mut model_a: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut model_b = vec![0xAAu8; size as usize];
    dev.write(s, &a, 0, &model_a).unwrap();
    dev.write(s, &b, 0, &model_b).unwrap();
    let mut rng = Lcg(3);
    for round in 0..200 {
        let off = rng.next() % size;
        let len = rng.next() % (size - off + 1);
        match round % 3 {
            0 => {
                let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                dev.write(s, &a, off, &data).unwrap();
                model_a[off as usize..(off + len) as usize].copy_from_slice(&data);
            }
            1 => {
                let dst = rng.next() % (size - len + 1);
                let src = BufferSlice {
                    buffer: &a,
                    offset: off,
                    len,
                };
                dev.copy(s, src, &b, dst).unwrap();
                let bytes = model_a[off as usize..(off + len) as usize].to_vec();
                model_b[dst as usize..(dst + len) as usize].copy_from_slice(&bytes);
            }
            _ => {
                // Within one buffer, overlapping ranges included.
                let dst = rng.next() % (size - len + 1);
                let src = BufferSlice {
                    buffer: &b,
                    offset: off,
                    len,
                };
                dev.copy(s, src, &b, dst).unwrap();
                let bytes = model_b[off as usize..(off + len) as usize].to_vec();
                model_b[dst as usize..(dst + len) as usize].copy_from_slice(&bytes);
            }
        }
        if round % 25 == 0 {
            let (o, l) = (rng.next() % size, 0);
            assert_eq!(read(&mut dev, s, &a, o, l), Vec::<u8>::new());
            let o = rng.next() % size;
            let l = rng.next() % (size - o + 1);
            assert_eq!(
                read(&mut dev, s, &a, o, l),
                model_a[o as usize..(o + l) as usize],
                "round {round}"
            );
        }
    }
    assert_eq!(read(&mut dev, s, &a, 0, size), model_a);
    assert_eq!(read(&mut dev, s, &b, 0, size), model_b);
    dev.synchronize(s).unwrap();
    assert_eq!(dev.take_errors(s), vec![]);
}

/// Compile options without the runtime's guards, for the kernels of this file, which guard
/// their own accesses.
fn self_guarded() -> CompileOptions {
    CompileOptions {
        // SAFETY: every kernel this file compiles with these options guards each access with
        // `i < len` (`add_one`, and the binary-operation kernels of
        // `operations_match_the_reference_semantics`), so no launch reaches out of range.
        checks: unsafe { KernelChecks::unchecked() },
        kernel_id: 0,
    }
}

fn add_one() -> KernelDef {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| k.store(data, i, data.load(i) + 1u32));
    k.build().unwrap().def().clone()
}

#[test]
fn a_captured_graph_replays_its_launches_and_events_complete() {
    let Some(mut dev) = device("a_captured_graph_replays_its_launches_and_events_complete") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let kernel = dev.compile(&add_one(), self_guarded()).unwrap();
    let buf = dev.allocate(40).unwrap();
    dev.write(s, &buf, 0, &[0u8; 40]).unwrap();
    dev.begin_capture(s).unwrap();
    for _ in 0..3 {
        let binding = [BufferSlice {
            buffer: &buf,
            offset: 0,
            len: 40,
        }];
        dev.launch(s, &kernel, LaunchCount::Static([3, 1, 1]), &binding, &[])
            .unwrap();
    }
    assert!(matches!(
        dev.write(s, &buf, 0, &[1]),
        Err(DeviceError::Capture { .. })
    ));
    let graph = dev.end_capture(s).unwrap();
    assert_eq!(
        words(read(&mut dev, s, &buf, 0, 40)),
        vec![0; 10],
        "capture executes nothing"
    );
    dev.replay(s, &graph).unwrap();
    dev.replay(s, &graph).unwrap();
    let event = dev.record_event(s).unwrap();
    assert!(!dev.event_complete(&event), "nothing was submitted yet");
    dev.synchronize(s).unwrap();
    assert!(dev.event_complete(&event));
    assert_eq!(words(read(&mut dev, s, &buf, 0, 40)), vec![6; 10]);
    dev.destroy_graph(graph);
}

/// The words of little-endian `bytes`.
fn words(bytes: Vec<u8>) -> Vec<u32> {
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Writes go to the queue when the open batch is empty and into the batch otherwise, and
/// dispatches that repeat the last one skip binding: neither may change what runs, or when.
#[test]
fn writes_and_repeated_dispatches_keep_stream_order() {
    let Some(mut dev) = device("writes_and_repeated_dispatches_keep_stream_order") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let options = self_guarded();
    let kernel = dev.compile(&add_one(), options).unwrap();
    let buf = dev.allocate(32).unwrap();
    let add_one_to = |dev: &mut WgpuDevice, offset: u64| {
        let binding = [BufferSlice {
            buffer: &buf,
            offset,
            len: 16,
        }];
        dev.launch(s, &kernel, LaunchCount::Static([1, 1, 1]), &binding, &[])
            .unwrap();
    };
    // Into an empty batch: a queue write, which an event recorded after it covers.
    dev.write(s, &buf, 0, &bytes(&[1, 2, 3, 4, 5, 6, 7, 8]))
        .unwrap();
    let event = dev.record_event(s).unwrap();
    assert!(!dev.event_complete(&event), "the write waits for its batch");
    add_one_to(&mut dev, 0);
    // After a dispatch: encoded in the batch, between the two dispatches.
    dev.write(s, &buf, 4, &bytes(&[10])).unwrap();
    // The same slice twice (the second binds nothing), the other slice, then the first again.
    add_one_to(&mut dev, 0);
    add_one_to(&mut dev, 0);
    add_one_to(&mut dev, 16);
    add_one_to(&mut dev, 0);
    assert_eq!(
        words(read(&mut dev, s, &buf, 0, 32)),
        [5, 13, 7, 8, 6, 7, 8, 9]
    );
    dev.synchronize(s).unwrap();
    assert!(dev.event_complete(&event));
    // The read submitted the batch: this write is a queue write again, after everything.
    dev.write(s, &buf, 8, &bytes(&[70])).unwrap();
    add_one_to(&mut dev, 16);
    assert_eq!(
        words(read(&mut dev, s, &buf, 0, 32)),
        [5, 13, 70, 8, 7, 8, 9, 10]
    );
    assert_eq!(dev.take_errors(s), vec![]);
}

#[test]
fn timestamps_measure_and_limits_are_typed_errors() {
    let Some(mut dev) = device("timestamps_measure_and_limits_are_typed_errors") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let max = dev.properties().max_allocation_bytes;
    assert!(matches!(
        dev.allocate(max + 4),
        Err(DeviceError::AllocationTooLarge { .. })
    ));
    if !dev.properties().features.timestamps {
        assert!(matches!(
            dev.record_timestamp(s),
            Err(DeviceError::Unsupported { .. })
        ));
        return;
    }
    let start = dev.record_timestamp(s).unwrap();
    let buf = dev.allocate(1 << 16).unwrap();
    dev.write(s, &buf, 0, &vec![7u8; 1 << 16]).unwrap();
    let end = dev.record_timestamp(s).unwrap();
    let elapsed = dev.elapsed_ns(&start, &end).unwrap();
    assert!(elapsed < 60_000_000_000, "{elapsed} ns");
}

#[test]
fn a_checked_fault_fills_the_record_once_and_skips_the_store() {
    let Some(mut dev) = device("a_checked_fault_fills_the_record_once_and_skips_the_store") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let mut k = KernelBuilder::new("overrun", [8, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.store(data, data.len() + i, 9u32);
    let kernel = dev
        .compile(k.build().unwrap().def(), CompileOptions::checked(5))
        .unwrap();
    let buf = dev.allocate(16).unwrap();
    let record = dev.allocate(FaultRecord::BYTES as u64).unwrap();
    dev.write(s, &buf, 0, &[0u8; 16]).unwrap();
    dev.write(s, &record, 0, &[0u8; FaultRecord::BYTES])
        .unwrap();
    // The binding is the middle 8 bytes of the buffer: stores past its 2 words are skipped.
    let bindings = [
        BufferSlice {
            buffer: &buf,
            offset: 4,
            len: 8,
        },
        BufferSlice {
            buffer: &record,
            offset: 0,
            len: FaultRecord::BYTES as u64,
        },
    ];
    dev.launch(s, &kernel, LaunchCount::Static([1, 1, 1]), &bindings, &[])
        .unwrap();
    assert_eq!(read(&mut dev, s, &buf, 0, 16), vec![0u8; 16]);
    let bytes = read(&mut dev, s, &record, 0, FaultRecord::BYTES as u64);
    let mut words = [0u32; FaultRecord::WORDS];
    for (w, c) in words.iter_mut().zip(bytes.chunks(4)) {
        *w = u32::from_le_bytes(c.try_into().unwrap());
    }
    let fault = FaultRecord::decode(&words).expect("a fault was recorded");
    assert_eq!((fault.kernel_id, fault.binding), (5, 0));
    assert!((2..10).contains(&fault.index), "{fault:?}");
}

/// Every binary operation, comparison and cast on edge values, on the device and with
/// `lockstep::kernel::semantics`, bit for bit (f32 `/` and `%` are exempt: WGSL allows 2.5 ULP
/// for division, and the interpreter uses the host's exact results).
#[test]
fn operations_match_the_reference_semantics() {
    let Some(mut dev) = device("operations_match_the_reference_semantics") else {
        return;
    };
    let s = dev.create_stream().unwrap();
    let u: Vec<u32> = vec![
        0,
        1,
        2,
        3,
        31,
        32,
        33,
        7,
        0x8000_0000,
        u32::MAX,
        12345,
        0xdead_beef,
    ];
    let i: Vec<i32> = vec![0, 1, -1, 2, -2, 31, 33, i32::MIN, i32::MAX, -7, 100, -100];
    let f: Vec<f32> = vec![
        0.0,
        -0.0,
        1.5,
        -2.25,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e20,
        -1e20,
        3.0e9,
        7.0,
        0.1,
    ];
    let n = u.len();
    let pairs = |len: usize| (0..len * len).map(move |k| (k / len, k % len));
    let cases: Vec<(ElemType, Vec<Scalar>)> = vec![
        (ElemType::U32, u.iter().map(|&v| Scalar::U32(v)).collect()),
        (ElemType::I32, i.iter().map(|&v| Scalar::I32(v)).collect()),
        (ElemType::F32, f.iter().map(|&v| Scalar::F32(v)).collect()),
    ];
    let ops = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Min,
        BinOp::Max,
        BinOp::BitAnd,
        BinOp::BitOr,
        BinOp::BitXor,
        BinOp::Shl,
        BinOp::Shr,
    ];
    let cmps = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];
    for (elem, values) in &cases {
        let lhs: Vec<u32> = pairs(n).map(|(a, _)| values[a].to_bits()).collect();
        let rhs: Vec<u32> = pairs(n).map(|(_, b)| values[b].to_bits()).collect();
        let a_buf = dev.allocate(lhs.len() as u64 * 4).unwrap();
        let b_buf = dev.allocate(rhs.len() as u64 * 4).unwrap();
        let out = dev.allocate(lhs.len() as u64 * 4).unwrap();
        dev.write(s, &a_buf, 0, &bytes(&lhs)).unwrap();
        dev.write(s, &b_buf, 0, &bytes(&rhs)).unwrap();
        let mut exprs: Vec<Case> = Vec::new();
        for op in ops {
            let integer_only = matches!(
                op,
                BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
            );
            if *elem == ElemType::F32 && (integer_only || matches!(op, BinOp::Div | BinOp::Rem)) {
                continue;
            }
            exprs.push((
                format!("{op:?}"),
                Box::new(move |l, r| l.binary(op, r)),
                *elem,
                Box::new(move |l, r| semantics::binary(op, l, r)),
            ));
        }
        for op in cmps {
            exprs.push((
                format!("{op:?}"),
                Box::new(move |l, r| l.compare(op, r).select(1u32, 0u32)),
                ElemType::U32,
                Box::new(move |l, r| Scalar::U32(semantics::compare(op, l, r) as u32)),
            ));
        }
        if *elem != ElemType::F32 {
            for op in BitFn::ALL {
                exprs.push((
                    op.name().to_owned(),
                    Box::new(move |l, _| l.bits(op)),
                    *elem,
                    Box::new(move |l, _| semantics::bits(op, l)),
                ));
            }
        }
        for to in [ElemType::U32, ElemType::I32, ElemType::F32] {
            exprs.push((
                format!("cast to {to}"),
                Box::new(move |l, _| l.cast(to)),
                to,
                Box::new(move |l, _| semantics::cast(l, to)),
            ));
            exprs.push((
                format!("bitcast to {to}"),
                Box::new(move |l, _| l.bitcast(to)),
                to,
                Box::new(move |l, _| semantics::bitcast(l, to)),
            ));
        }
        for (name, build, out_elem, reference) in exprs {
            let mut k = KernelBuilder::new(format!("{elem} {name}"), [16, 1, 1]);
            let a = k.binding(*elem, Access::Read);
            let b = k.binding(*elem, Access::Read);
            let o = k.binding(out_elem, Access::ReadWrite);
            let x = k.global_id(Axis::X);
            k.if_(x.lt(o.len()), |k| {
                k.store(o, x, build(a.load(x), b.load(x)))
            });
            let kernel = dev
                .compile(k.build().unwrap().def(), self_guarded())
                .unwrap();
            let len = lhs.len() as u64 * 4;
            let bindings = [
                BufferSlice {
                    buffer: &a_buf,
                    offset: 0,
                    len,
                },
                BufferSlice {
                    buffer: &b_buf,
                    offset: 0,
                    len,
                },
                BufferSlice {
                    buffer: &out,
                    offset: 0,
                    len,
                },
            ];
            let groups = (lhs.len() as u32).div_ceil(16);
            dev.launch(
                s,
                &kernel,
                LaunchCount::Static([groups, 1, 1]),
                &bindings,
                &[],
            )
            .unwrap();
            let got = read(&mut dev, s, &out, 0, len);
            for (k, (&l, &r)) in lhs.iter().zip(&rhs).enumerate() {
                let want = reference(Scalar::from_bits(*elem, l), Scalar::from_bits(*elem, r));
                let got = u32::from_le_bytes(got[4 * k..4 * k + 4].try_into().unwrap());
                let same = got == want.to_bits()
                    || (out_elem == ElemType::F32
                        && f32::from_bits(got).is_nan()
                        && f32::from_bits(want.to_bits()).is_nan());
                assert!(
                    same,
                    "{elem} {name}({:?}, {:?}): device {got:#x}, reference {want:?}",
                    Scalar::from_bits(*elem, l),
                    Scalar::from_bits(*elem, r)
                );
            }
        }
    }
    assert_eq!(dev.take_errors(s), vec![]);
}

/// One operation under test: its name, how to build it, its result type, its reference.
type Case = (
    String,
    Box<dyn Fn(Value, Value) -> Value>,
    ElemType,
    Box<dyn Fn(Scalar, Scalar) -> Scalar>,
);

fn bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn every_broken_precondition_is_refused_with_its_typed_error() {
    let Some(mut dev) = device("every_broken_precondition_is_refused_with_its_typed_error") else {
        return;
    };
    let mut other = WgpuDevice::with_context(dev.context().clone()).unwrap();
    let report = lockstep_harness::contract::run(&mut dev, &mut other).unwrap();
    report.assert_conforms();
}

#[test]
fn an_adapter_name_matching_nothing_is_unavailable_and_lists_the_adapters_found() {
    let test = "an_adapter_name_matching_nothing_is_unavailable_and_lists_the_adapters_found";
    let Some(dev) = device(test) else {
        return;
    };
    let options = WgpuOptions {
        adapter: Some("No-Such-Adapter".to_owned()),
        ..WgpuOptions::from_env().unwrap()
    };
    match WgpuDevice::new(options) {
        Err(DeviceError::Unavailable { reason }) => {
            assert!(
                reason.starts_with("no adapter name contains \"No-Such-Adapter\"; found: "),
                "{reason}"
            );
            assert!(reason.contains(dev.context().adapter_name()), "{reason}");
        }
        Ok(_) => panic!("an adapter matched \"No-Such-Adapter\""),
        Err(other) => panic!("expected Unavailable, got {other}"),
    }
}

/// Runs `def` (unchecked: no fault record) over `groups` workgroups with `words` as its one
/// binding, and returns the binding afterwards.
fn run_words(dev: &mut WgpuDevice, def: &KernelDef, groups: u32, words: &[u32]) -> Vec<u32> {
    let s = dev.create_stream().unwrap();
    let kernel = dev.compile(def, self_guarded()).unwrap();
    let len = words.len() as u64 * 4;
    let buf = dev.allocate(len).unwrap();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    dev.write(s, &buf, 0, &bytes).unwrap();
    let bindings = [BufferSlice {
        buffer: &buf,
        offset: 0,
        len,
    }];
    dev.launch(
        s,
        &kernel,
        LaunchCount::Static([groups, 1, 1]),
        &bindings,
        &[],
    )
    .unwrap();
    read(dev, s, &buf, 0, len)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The IR's rule for `return`, on the adapter: an invocation that returned counts as arrived at
/// the barriers the others reach (lowered in uniform control flow, `lower/mirror.rs`).
#[test]
fn early_returns_pass_later_barriers() {
    let Some(mut dev) = device("early_returns_pass_later_barriers") else {
        return;
    };
    // A tree reduction whose idle lanes return at each level (the simulator's semantics).
    let mut k = KernelBuilder::new("tree", [64, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let tree = k.shared(ElemType::U32, 64);
    let lid = k.local_id(Axis::X);
    let base = k.workgroup_id(Axis::X) * 64u32;
    k.store(tree, lid, data.load(base + lid));
    k.workgroup_barrier();
    let stride = k.var(ElemType::U32, 32u32);
    k.while_(stride.get().gt(0u32), |k| {
        k.if_(lid.ge(stride.get() * 2u32), |k| k.return_());
        k.if_(lid.lt(stride.get()), |k| {
            k.store(tree, lid, tree.load(lid) + tree.load(lid + stride.get()));
        });
        k.workgroup_barrier();
        k.assign(stride, stride.get() >> 1u32);
    });
    k.store(data, base + lid, tree.load(lid) + 1000u32);
    let def = k.build().unwrap().def().clone();
    let words: Vec<u32> = (0..128).collect();
    let out = run_words(&mut dev, &def, 2, &words);
    for w in 0..2u32 {
        let at = (w * 64) as usize;
        let sum: u32 = (w * 64..w * 64 + 64).sum();
        // Lane 1 holds the odd lanes' sum (it adds lane 3's at the level of stride 2).
        let odd: u32 = (w * 64..w * 64 + 64).filter(|i| i % 2 == 1).sum();
        assert_eq!(out[at..at + 2], [sum + 1000, odd + 1000], "workgroup {w}");
        assert_eq!(
            out[at + 2..at + 64],
            words[at + 2..at + 64],
            "returned lanes store nothing"
        );
    }
}
