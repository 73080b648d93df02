//! Tests on a real CUDA GPU: the device directly, the runtime on it, the simulator's answers
//! for the same kernels and device loss. The conformance suite runs on the GPU from
//! `lockstep-conformance`'s `tests/on_cuda.rs`.
//!
//! Every test looks for the GPU at run time. Without one it prints a visible `SKIPPED: ...` line
//! and returns (CI machines have no GPU), or fails under `LOCKSTEP_REQUIRE_GPU=1`
//! ([`lockstep_harness::requirement`]): a skip must never pass silently.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{
    Access, Axis, BinOp, BitFn, CmpOp, CompileOptions, ElemType, FaultRecord, KernelBuilder,
    KernelChecks, Scalar, Value,
};
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, DeviceError, Kernel, KernelArguments, ServerError,
    ServerOptions,
};
use lockstep_cuda::{CudaContext, CudaDevice};
use lockstep_harness::blocking_path::increment_kernel;
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_sim::{SimConfig, SimDevice};

mod child;

/// The GPU's context, opened once for the whole test binary; `None` (after
/// [`cannot_run`] said why) where there is no GPU.
fn gpu(test: &str) -> Option<CudaContext> {
    static CONTEXT: OnceLock<Result<CudaContext, DeviceError>> = OnceLock::new();
    match CONTEXT.get_or_init(|| CudaContext::new(0)) {
        Ok(ctx) => Some(ctx.clone()),
        Err(err) => {
            let reason = match err {
                DeviceError::Unavailable { reason } => reason.clone(),
                other => other.to_string(),
            };
            cannot_run(Need::CudaGpu, test, &reason);
            None
        }
    }
}

fn client(ctx: &CudaContext) -> ComputeClient<CudaDevice> {
    ComputeClient::new(CudaDevice::with_context(ctx))
}

fn kernel(built: Result<Kernel, lockstep::kernel::KernelError>) -> Kernel {
    built.expect("test kernels are valid")
}

#[test]
fn opening_a_device_without_cuda_is_unavailable_not_a_panic() {
    match CudaDevice::new(0) {
        Ok(device) => assert!(!device.properties().name.is_empty()),
        Err(DeviceError::Unavailable { reason }) => {
            assert!(!reason.is_empty());
            let line = format!("no CUDA here, as expected: {reason}\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        Err(other) => panic!("expected a device or Unavailable, got {other}"),
    }
    assert!(matches!(
        CudaDevice::new(u32::MAX),
        Err(DeviceError::Unavailable { .. })
    ));
}

#[test]
fn properties_come_from_the_driver() {
    let Some(ctx) = gpu("properties_come_from_the_driver") else {
        return;
    };
    let device = CudaDevice::with_context(&ctx);
    let props = device.properties();
    let line = format!("GPU: {} — {}\n", props.name, props.backend);
    let _ = std::io::stderr().write_all(line.as_bytes());
    assert!(!props.name.is_empty());
    assert!(props.memory_bytes > 1 << 30);
    assert!(props.backend.contains("sm_"), "{}", props.backend);
    assert!(props.max_workgroups.iter().all(|&d| d >= 65_535));
    assert_eq!(props.alignment_bytes, 256);
}

#[test]
fn bytes_round_trip_at_every_transfer_size() {
    let Some(ctx) = gpu("bytes_round_trip_at_every_transfer_size") else {
        return;
    };
    let c = client(&ctx);
    // Around the direct-write limit (64 KiB), the staging chunk (4 MiB) and several threads.
    for size in [
        0usize,
        1,
        3,
        4,
        4096,
        65_536,
        65_537,
        (4 << 20) + 7,
        (33 << 20) + 5,
    ] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        let handle = c.create(Bytes::from(data.clone())).expect("create");
        assert_eq!(
            c.read_one(handle.clone()).expect("read")[..],
            data[..],
            "{size}"
        );
        if size > 2 {
            let patch = vec![0xA5u8; size / 2];
            c.write_at(&handle, 1, Bytes::from(patch.clone()))
                .expect("write_at");
            let mut expected = data.clone();
            expected[1..1 + patch.len()].copy_from_slice(&patch);
            assert_eq!(
                c.read_one(handle).expect("read")[..],
                expected[..],
                "{size}"
            );
        }
    }
    c.sync().expect("sync");
}

#[test]
fn device_to_device_copy_and_timestamps() {
    let Some(ctx) = gpu("device_to_device_copy_and_timestamps") else {
        return;
    };
    let mut device = CudaDevice::with_context(&ctx);
    let stream = device.create_stream().expect("stream");
    let src = device.allocate(1024).expect("allocate");
    let dst = device.allocate(1024).expect("allocate");
    let data: Vec<u8> = (0..1024u32).map(|i| i as u8).collect();
    device.write(stream, &src, 0, &data).expect("write");
    device.write(stream, &dst, 0, &[0; 1024]).expect("write");
    let start = device.record_timestamp(stream).expect("timestamp");
    let slice = BufferSlice {
        buffer: &src,
        offset: 256,
        len: 512,
    };
    device.copy(stream, slice, &dst, 0).expect("copy");
    let end = device.record_timestamp(stream).expect("timestamp");
    let read = device.read(stream, &dst, 0, 1024).expect("read");
    let bytes = device.wait_read(read).expect("wait_read");
    assert_eq!(bytes[..512], data[256..768]);
    assert!(bytes[512..].iter().all(|&b| b == 0));
    device.synchronize(stream).expect("synchronize");
    let elapsed = device.elapsed_ns(&start, &end).expect("elapsed");
    assert!(elapsed < 1_000_000_000, "{elapsed} ns for a 512-byte copy");
    device.free(src);
    device.free(dst);
}

#[test]
fn events_order_streams() {
    let Some(ctx) = gpu("events_order_streams") else {
        return;
    };
    let mut device = CudaDevice::with_context(&ctx);
    let (a, b) = (
        device.create_stream().expect("stream"),
        device.create_stream().expect("stream"),
    );
    let buffer = device.allocate(32 << 20).expect("allocate");
    let data = vec![7u8; 32 << 20];
    device.write(a, &buffer, 0, &data).expect("write");
    let written = device.record_event(a).expect("event");
    device.wait_event(b, &written).expect("wait");
    let read = device.read(b, &buffer, 0, 32 << 20).expect("read");
    assert!(*device.wait_read(read).expect("wait_read") == *data);
    assert!(device.event_complete(&written));
    drop(written);
    device.free(buffer);
}

/// Values where C and Rust tend to disagree.
const U32S: [u32; 12] = [
    0,
    1,
    2,
    3,
    7,
    31,
    32,
    33,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_fffe,
    0xffff_ffff,
];
const I32S: [i32; 13] = [
    0,
    1,
    -1,
    2,
    -2,
    7,
    -7,
    31,
    32,
    33,
    i32::MAX,
    i32::MIN,
    i32::MIN + 1,
];
const F32S: [f32; 20] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -2.5,
    3.0,
    1e-45,
    1e38,
    -1e38,
    3e9,
    -3e9,
    4_294_967_296.0,
    2_147_483_648.0,
    -2_147_483_904.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    0.1,
    7.0,
];

/// A kernel applying every operation of `elem` to all pairs of `a` and `b`, writing results
/// of each type to its own output. Returns the kernel and its slot count per output.
fn semantics_kernel(elem: ElemType, pairs: u32) -> (Kernel, [u32; 3]) {
    let mut k = KernelBuilder::new(format!("semantics_{elem}"), [64, 1, 1]);
    let a = k.binding(elem, Access::Read);
    let b = k.binding(elem, Access::Read);
    let outs = [
        k.binding(ElemType::U32, Access::ReadWrite),
        k.binding(ElemType::I32, Access::ReadWrite),
        k.binding(ElemType::F32, Access::ReadWrite),
    ];
    let i = k.global_id(Axis::X);
    let mut slots = [0u32; 3];
    let mut results: Vec<(usize, Value)> = Vec::new();
    let (x, y) = (a.load(i), b.load(i));
    let out_of = |t: ElemType| match t {
        ElemType::U32 => 0,
        ElemType::I32 => 1,
        ElemType::F32 => 2,
        ElemType::F16 | ElemType::BF16 => {
            unreachable!("32-bit types only: half floats are checked below")
        }
    };
    let mut ops = vec![BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Rem];
    ops.extend([BinOp::Min, BinOp::Max]);
    if elem != ElemType::F32 {
        ops.extend([
            BinOp::BitAnd,
            BinOp::BitOr,
            BinOp::BitXor,
            BinOp::Shl,
            BinOp::Shr,
        ]);
    }
    for op in ops {
        results.push((out_of(elem), x.binary(op, y)));
    }
    for op in [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ] {
        results.push((0, x.compare(op, y).select(1u32, 0u32)));
    }
    for to in [ElemType::U32, ElemType::I32, ElemType::F32] {
        results.push((out_of(to), x.cast(to)));
        results.push((out_of(to), x.bitcast(to)));
    }
    if elem != ElemType::U32 {
        results.push((out_of(elem), -x));
    }
    if elem != ElemType::F32 {
        for op in BitFn::ALL {
            results.push((out_of(elem), x.bits(op)));
        }
    }
    let body: Vec<(u32, usize, Value)> = results
        .into_iter()
        .map(|(out, value)| {
            slots[out] += 1;
            (slots[out] - 1, out, value)
        })
        .collect();
    k.if_(i.lt(a.len()), |k| {
        for (slot, out, value) in body {
            k.store(outs[out], slot * pairs + i, value);
        }
    });
    (kernel(k.build()), slots)
}

/// Runs the semantics kernel of `elem` and returns the three outputs' bytes.
fn run_semantics<D: Device>(client: &ComputeClient<D>, elem: ElemType) -> [Vec<u8>; 3] {
    let values: Vec<u32> = match elem {
        ElemType::U32 => U32S.to_vec(),
        ElemType::I32 => I32S.iter().map(|&v| v as u32).collect(),
        ElemType::F32 => F32S.iter().map(|v| v.to_bits()).collect(),
        ElemType::F16 | ElemType::BF16 => {
            unreachable!("32-bit types only: half floats are checked below")
        }
    };
    let (a, b): (Vec<u32>, Vec<u32>) = values
        .iter()
        .flat_map(|&x| values.iter().map(move |&y| (x, y)))
        .unzip();
    let pairs = a.len() as u32;
    let (kernel, slots) = semantics_kernel(elem, pairs);
    let a = client.create(Bytes::from_elems(&a)).expect("create");
    let b = client.create(Bytes::from_elems(&b)).expect("create");
    let outs: Vec<_> = slots
        .iter()
        .map(|&s| {
            client
                .create(Bytes::from(vec![0u8; (s * pairs * 4) as usize]))
                .expect("create")
        })
        .collect();
    let mut args = KernelArguments::new().binding(&a).binding(&b);
    for out in &outs {
        args = args.binding(out);
    }
    client
        .launch(&kernel, CubeCount::Static(pairs.div_ceil(64), 1, 1), args)
        .expect("launch");
    client.sync().expect("sync");
    let read: Vec<Vec<u8>> = outs
        .into_iter()
        .map(|h| client.read_one(h).expect("read").into_vec())
        .collect();
    read.try_into().expect("three outputs")
}

#[test]
fn kernels_compute_what_the_simulator_computes() {
    let Some(ctx) = gpu("kernels_compute_what_the_simulator_computes") else {
        return;
    };
    let gpu_client = client(&ctx);
    let sim_client = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    for elem in [ElemType::U32, ElemType::I32, ElemType::F32] {
        let on_gpu = run_semantics(&gpu_client, elem);
        let on_sim = run_semantics(&sim_client, elem);
        for (out, (g, s)) in on_gpu.iter().zip(&on_sim).enumerate() {
            let mut mismatches = Vec::new();
            for (index, (gw, sw)) in g.chunks_exact(4).zip(s.chunks_exact(4)).enumerate() {
                let (gw, sw) = (
                    u32::from_le_bytes(gw.try_into().expect("a word")),
                    u32::from_le_bytes(sw.try_into().expect("a word")),
                );
                // NaN payloads are not part of the semantics: hardware picks its own.
                let both_nan =
                    out == 2 && f32::from_bits(gw).is_nan() && f32::from_bits(sw).is_nan();
                if gw != sw && !both_nan {
                    mismatches.push(format!("word {index}: gpu {gw:#010x}, sim {sw:#010x}"));
                }
            }
            assert!(
                mismatches.is_empty(),
                "{elem} kernel, output {out}: {} mismatches, first: {:?}",
                mismatches.len(),
                &mismatches[..mismatches.len().min(8)]
            );
        }
    }
}

/// Every 16-bit pattern through the half floats' conformance kernel, on the GPU, bit for bit
/// against the `half` crate's reference (a NaN matches any NaN); `bf16` where the GPU has it.
#[test]
fn every_half_float_bit_pattern_computes_the_reference() {
    use lockstep_kernels::half::{compare, exhaustive_inputs, reference, run};
    let Some(ctx) = gpu("every_half_float_bit_pattern_computes_the_reference") else {
        return;
    };
    let c = client(&ctx);
    let features = c.properties().features.clone();
    assert!(features.f16);
    for elem in [ElemType::F16, ElemType::BF16] {
        if !features.supports(elem) {
            println!("{elem}: not supported by this GPU (Features::{elem} false)");
            continue;
        }
        let inputs = exhaustive_inputs(elem);
        let got = run(&c, elem, &inputs).expect("the half kernel runs");
        compare(elem, &inputs, &got, &reference(elem, &inputs)).expect("bit-exact");
    }
}

fn overrun() -> Kernel {
    lockstep_kernels::elementwise::overrun()
}

#[test]
fn checked_kernels_report_the_first_fault_and_stay_usable() {
    let Some(ctx) = gpu("checked_kernels_report_the_first_fault_and_stay_usable") else {
        return;
    };
    let c = client(&ctx);
    let data = c.create(Bytes::from_elems(&[1u32, 2, 3])).expect("create");
    let args = |past_end: u32| {
        KernelArguments::new()
            .binding(&data)
            .param(Scalar::U32(past_end))
    };
    c.launch(&overrun(), CubeCount::Static(1, 1, 1), args(4))
        .expect("launch");
    c.launch(&overrun(), CubeCount::Static(1, 1, 1), args(9))
        .expect("launch");
    match c.sync() {
        Err(ServerError::KernelFault {
            kernel,
            binding,
            index,
            stream,
        }) => {
            assert_eq!((kernel.as_str(), binding, index), ("overrun", 0, 7));
            assert_eq!(stream, c.stream_id());
        }
        other => panic!("expected the first kernel fault, got {other:?}"),
    }
    c.sync().expect("the fault is reported once");
    assert_eq!(
        c.read_one(data).expect("read").to_elems::<u32>(),
        vec![1, 2, 3]
    );
}

#[test]
fn indirect_launches_read_their_counts_on_the_device() {
    let Some(ctx) = gpu("indirect_launches_read_their_counts_on_the_device") else {
        return;
    };
    let mut k = KernelBuilder::new("mark", [2, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let x = k.global_id(Axis::X);
    let y = k.workgroup_id(Axis::Y);
    let z = k.workgroup_id(Axis::Z);
    let width = k.num_workgroups(Axis::X) * 2u32;
    let height = k.num_workgroups(Axis::Y);
    let index = (z * height + y) * width + x;
    k.atomic_add(out, index, 1u32);
    let mark = kernel(k.build());
    let c = client(&ctx);
    let counts = c.create(Bytes::from_elems(&[0u32; 3])).expect("create");
    let out = c.create(Bytes::from_elems(&[0u32; 64])).expect("create");
    // The counts are written after the launch is validated, before it executes.
    c.write(&counts, Bytes::from_elems(&[3u32, 2, 2]))
        .expect("write");
    c.launch(
        &mark,
        CubeCount::Dynamic(counts),
        KernelArguments::new().binding(&out),
    )
    .expect("launch");
    let marks = c.read_one(out).expect("read").to_elems::<u32>();
    assert_eq!(marks[..24], [1; 24]);
    assert!(marks[24..].iter().all(|&m| m == 0));
}

/// 12 inputs, an output and 12 parameters: 39 argument slots, more than the 32 the launch
/// keeps on the stack.
#[test]
fn a_kernel_with_more_arguments_than_fit_on_the_stack_reads_each_of_them() {
    let Some(ctx) = gpu("a_kernel_with_more_arguments_than_fit_on_the_stack_reads_each_of_them")
    else {
        return;
    };
    const INPUTS: u32 = 12;
    const LEN: usize = 8;
    let mut k = KernelBuilder::new("sum_of_many", [LEN as u32, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let inputs: Vec<_> = (0..INPUTS)
        .map(|_| k.binding(ElemType::U32, Access::Read))
        .collect();
    let params: Vec<_> = (0..INPUTS).map(|_| k.param(ElemType::U32)).collect();
    let i = k.global_id(Axis::X);
    let mut sum = out.load(i);
    for (input, param) in inputs.iter().zip(params) {
        sum = sum + input.load(i) * param;
    }
    k.store(out, i, sum);
    let sum_of_many = kernel(k.build());

    let c = client(&ctx);
    let out = c.create(Bytes::from_elems(&[1u32; LEN])).expect("create");
    let data = |j: u32| (0..LEN as u32).map(|i| 100 * j + i).collect::<Vec<u32>>();
    let handles: Vec<_> = (0..INPUTS)
        .map(|j| c.create(Bytes::from_elems(&data(j))).expect("create"))
        .collect();
    let mut args = KernelArguments::new().binding(&out);
    for handle in &handles {
        args = args.binding(handle);
    }
    for j in 0..INPUTS {
        args = args.param(Scalar::U32(j + 1));
    }
    c.launch(&sum_of_many, CubeCount::Static(1, 1, 1), args)
        .expect("launch");
    let expected: Vec<u32> = (0..LEN)
        .map(|i| 1 + (0..INPUTS).map(|j| data(j)[i] * (j + 1)).sum::<u32>())
        .collect();
    assert_eq!(c.read_one(out).expect("read").to_elems::<u32>(), expected);
}

#[test]
fn graphs_replay_captured_launches_and_refuse_transfers() {
    let Some(ctx) = gpu("graphs_replay_captured_launches_and_refuse_transfers") else {
        return;
    };
    let mut device = CudaDevice::with_context(&ctx);
    let stream = device.create_stream().expect("stream");
    let options = CompileOptions::checked(0);
    let inc = device
        .compile(increment_kernel().def(), options)
        .expect("compile");
    let data = device.allocate(400).expect("allocate");
    let record = device
        .allocate(FaultRecord::BYTES as u64)
        .expect("allocate");
    device.write(stream, &data, 0, &[0; 400]).expect("write");
    device
        .write(stream, &record, 0, &[0; FaultRecord::BYTES])
        .expect("write");
    device.begin_capture(stream).expect("begin_capture");
    assert!(matches!(
        device.begin_capture(stream),
        Err(DeviceError::Capture { .. })
    ));
    for _ in 0..3 {
        let bindings = [
            BufferSlice {
                buffer: &data,
                offset: 0,
                len: 400,
            },
            BufferSlice {
                buffer: &record,
                offset: 0,
                len: FaultRecord::BYTES as u64,
            },
        ];
        device
            .launch(stream, &inc, LaunchCount::Static([4, 1, 1]), &bindings, &[])
            .expect("captured launch");
    }
    assert!(matches!(
        device.write(stream, &data, 0, &[1; 4]),
        Err(DeviceError::Capture { .. })
    ));
    device
        .synchronize(stream)
        .expect("synchronize waits for the work before the capture");
    let graph = device.end_capture(stream).expect("end_capture");
    for _ in 0..2 {
        device.replay(stream, &graph).expect("replay");
    }
    let read = device.read(stream, &data, 0, 400).expect("read");
    let values: Vec<u32> = device
        .wait_read(read)
        .expect("wait_read")
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("a word")))
        .collect();
    assert_eq!(values, vec![6; 100], "two replays of three increments");
    device.destroy_graph(graph);
    device.free(data);
    device.free(record);
}

#[test]
fn allocations_beyond_memory_are_typed_errors() {
    let Some(ctx) = gpu("allocations_beyond_memory_are_typed_errors") else {
        return;
    };
    let mut device = CudaDevice::with_context(&ctx);
    let total = device.properties().memory_bytes;
    match device.allocate(total) {
        Err(DeviceError::OutOfMemory {
            requested_bytes,
            available_bytes,
        }) => {
            assert_eq!(requested_bytes, total);
            assert!(available_bytes < total);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    assert!(matches!(
        device.allocate(total + 1),
        Err(DeviceError::AllocationTooLarge { .. })
    ));
    let c = client(&ctx);
    assert!(matches!(
        c.empty(total as usize),
        Err(ServerError::OutOfMemory(_))
    ));
    c.create(Bytes::from_elems(&[1u32]))
        .expect("the device stays usable after an out-of-memory error");
}

const POISON_CHILD: &str = "LOCKSTEP_CUDA_POISON_CHILD";

/// Run only as a child of `device_loss_is_sticky_typed_and_never_hangs`: it makes the process's
/// CUDA context unusable for good.
#[test]
#[ignore = "poisons the process's CUDA context; run by device_loss_is_sticky_typed_and_never_hangs in a child process"]
fn poisoning_child() {
    if !child::is_child(POISON_CHILD) {
        return;
    }
    let ctx = CudaContext::new(0).expect("the parent saw a GPU");
    let unchecked = ServerOptions {
        // SAFETY: broken on purpose, and only in this child process: `wild_store` stores 15 GiB
        // past its binding, an address no allocation of this process maps, so the GPU reports
        // an illegal address (sticky for the process's context) instead of writing memory in
        // use; the parent reads only the child's exit and output.
        kernel_checks: unsafe { KernelChecks::unchecked() },
        ..ServerOptions::default()
    };
    let c = ComputeClient::with_options(CudaDevice::with_context(&ctx), unchecked);
    let other = client(&ctx);
    let survivor = other.create(Bytes::from_elems(&[5u32])).expect("create");
    let data = c.create(Bytes::from_elems(&[0u32; 4])).expect("create");
    let mut k = KernelBuilder::new("wild_store", [1, 1, 1]);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    // 15 GiB past the buffer: far outside any allocation of this test.
    k.store(out, 0xF000_0000u32, 1u32);
    c.launch(
        &kernel(k.build()),
        CubeCount::Static(1, 1, 1),
        KernelArguments::new().binding(&data),
    )
    .expect("launch is validated, not executed");
    let started = Instant::now();
    let lost = |what: &str, result: Result<(), ServerError>| match result {
        Err(ServerError::DeviceLost { reason }) => {
            assert!(reason.contains("CUDA_ERROR_"), "{what}: {reason}");
            println!("child: {what}: {reason}");
        }
        other => panic!("{what}: expected DeviceLost, got {other:?}"),
    };
    lost("sync", c.sync());
    lost("create", c.create(Bytes::from_elems(&[1u32])).map(drop));
    lost("read", c.read_one(data).map(drop));
    lost("flush", c.flush());
    lost("other device's read", other.read_one(survivor).map(drop));
    lost(
        "a new device's create",
        client(&ctx).create(Bytes::from_elems(&[1u32])).map(drop),
    );
    assert!(c.memory_usage().is_ok(), "memory_usage answers regardless");
    assert!(started.elapsed() < Duration::from_secs(30), "no call hangs");
    println!("child: device lost as expected");
}

#[test]
fn device_loss_is_sticky_typed_and_never_hangs() {
    if gpu("device_loss_is_sticky_typed_and_never_hangs").is_none() {
        return;
    }
    child::run(
        "poisoning_child",
        POISON_CHILD,
        "child: device lost as expected",
        Duration::from_secs(120),
    );
}

#[test]
fn staged_bytes_are_pinned_and_written_in_place() {
    let Some(ctx) = gpu("staged_bytes_are_pinned_and_written_in_place") else {
        return;
    };
    let c = client(&ctx);
    // Above the direct-write size, in several chunks of the device's own staging.
    let data: Vec<Vec<u8>> = (0..3u8)
        .map(|i| (0..5 << 20).map(|j: u32| (j % 253) as u8 ^ i).collect())
        .collect();
    let mut staged: Vec<Bytes> = data.iter().map(|d| Bytes::from(d.clone())).collect();
    c.staging(staged.iter_mut(), false).unwrap();
    assert!(
        staged
            .iter()
            .all(|b| b.property() == lockstep::AllocationProperty::Pinned)
    );
    let mut staged = staged.into_iter();
    let created = c.create(staged.next().unwrap()).unwrap();
    let written = c.empty(data[1].len()).unwrap();
    c.write(&written, staged.next().unwrap()).unwrap();
    // At an offset: the copy engine reads the whole pinned buffer in place.
    let offset = c.empty(data[2].len() + 512).unwrap();
    c.write_at(&offset, 512, staged.next().unwrap()).unwrap();
    let read = c.read(vec![created, written, offset]);
    assert!(*read[0] == *data[0]);
    assert!(*read[1] == *data[1]);
    assert!(read[2][512..] == *data[2]);
}

#[test]
fn get_resource_hands_out_a_device_pointer_that_outside_code_can_copy_from() {
    let Some(ctx) = gpu("get_resource_hands_out_a_device_pointer_that_outside_code_can_copy_from")
    else {
        return;
    };
    let c = client(&ctx);
    let data: Vec<u32> = (0..4096).collect();
    let h = c.create(Bytes::from_elems(&data)).unwrap();
    let resource = c.get_resource(h).unwrap();
    assert_eq!(resource.len_bytes(), 4096 * 4);
    let len = resource.len_bytes() as usize;
    let copied = resource
        .with_buffer(move |buffer, offset| {
            assert!(offset + len as u64 <= buffer.len_bytes());
            let mut host = vec![0u8; len];
            // SAFETY: `len` bytes of a live allocation (the guard keeps it) into a host vector
            // of that size; the device's thread has its context bound.
            unsafe {
                cudarc::driver::sys::cuMemcpyDtoH_v2(
                    host.as_mut_ptr().cast(),
                    buffer.device_ptr() + offset,
                    len,
                )
            }
            .result()
            .map(|()| host)
        })
        .unwrap()
        .expect("cuMemcpyDtoH from the resource's pointer");
    assert_eq!(Bytes::from(copied).to_elems::<u32>(), data);
}

#[test]
fn every_broken_precondition_is_refused_with_its_typed_error() {
    let Some(ctx) = gpu("every_broken_precondition_is_refused_with_its_typed_error") else {
        return;
    };
    let mut device = CudaDevice::with_context(&ctx);
    let mut other = CudaDevice::with_context(&ctx);
    let report = lockstep_harness::contract::run(&mut device, &mut other).unwrap();
    report.assert_conforms();
}

fn host_pool(c: &ComputeClient<CudaDevice>) -> lockstep::HostPoolStats {
    c.memory_report()
        .expect("memory_report")
        .host_pool
        .expect("CUDA reports its pinned pool")
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
}

#[test]
fn reads_are_pooled_pinned_blocks_with_the_right_bytes_at_every_size_class() {
    if gpu("reads_are_pooled_pinned_blocks_with_the_right_bytes_at_every_size_class").is_none() {
        return;
    }
    // A context of its own, so that its pool's counters see only this test.
    let ctx = CudaContext::new(0).expect("the GPU opened above");
    let c = client(&ctx);
    for len in [1, 4096, 4097, 5121, 65_548, (1 << 20) + 4, (5 << 20) + 3] {
        let h = c.create(Bytes::from(pattern(len, 1))).unwrap();
        let before = host_pool(&c);
        let first = c.read_one(h.clone()).unwrap();
        assert_eq!(first.property(), lockstep::AllocationProperty::Pinned);
        assert!(*first == *pattern(len, 1), "{len} bytes");
        let class = lockstep::host_pool::class_of(len) as u64;
        let lent = host_pool(&c);
        assert_eq!(
            (lent.blocks_lent, lent.bytes_lent),
            (before.blocks_lent + 1, before.bytes_lent + class),
            "{len} bytes"
        );
        drop(first);
        c.write(&h, Bytes::from(pattern(len, 2))).unwrap();
        // The write's staging block, if any, is idle again: kept blocks serve the next read.
        c.sync().unwrap();
        let second = c.read_one(h).unwrap();
        assert!(*second == *pattern(len, 2), "{len} bytes, rewritten");
        let after = host_pool(&c);
        assert_eq!(after.allocations, lent.allocations, "{len}: no new block");
        assert!(after.reuses > lent.reuses, "{len}: a kept block was reused");
    }
}

#[test]
fn a_read_block_returns_to_the_pool_when_dropped_on_another_thread_after_its_client() {
    if gpu("a_read_block_returns_to_the_pool_when_dropped_on_another_thread_after_its_client")
        .is_none()
    {
        return;
    }
    let ctx = CudaContext::new(0).expect("the GPU opened above");
    let c = client(&ctx);
    let h = c.create(Bytes::from(pattern(10_000, 3))).unwrap();
    let back = c.read_one(h.clone()).unwrap();
    assert_eq!(host_pool(&c).blocks_lent, 1);
    drop((h, c));
    std::thread::spawn(move || {
        assert!(*back == *pattern(10_000, 3));
        drop(back);
    })
    .join()
    .unwrap();
    let c = client(&ctx);
    let returned = host_pool(&c);
    assert_eq!((returned.blocks_lent, returned.blocks_kept), (0, 1));
    let h = c.create(Bytes::from(pattern(10_000, 4))).unwrap();
    assert!(*c.read_one(h).unwrap() == *pattern(10_000, 4));
    let reused = host_pool(&c);
    assert_eq!(
        (reused.allocations, reused.reuses),
        (returned.allocations, returned.reuses + 1)
    );
}

#[test]
fn writes_from_a_vec_arrive_whole_for_every_chunking_and_past_a_segment() {
    let Some(ctx) = gpu("writes_from_a_vec_arrive_whole_for_every_chunking_and_past_a_segment")
    else {
        return;
    };
    let stagings = [
        lockstep_cuda::WriteStaging::default(),
        lockstep_cuda::WriteStaging {
            chunk_bytes: 4096,
            threads_max: 3,
        },
        lockstep_cuda::WriteStaging {
            chunk_bytes: 0,
            threads_max: 0,
        },
    ];
    for staging in stagings {
        let c = ComputeClient::new(CudaDevice::with_context(&ctx).with_write_staging(staging));
        for len in [65_537, (2 << 20) + 3, (9 << 20) + 1] {
            let h = c.empty(len + 8).unwrap();
            c.write_at(&h, 8, Bytes::from(pattern(len, 5))).unwrap();
            let back = c.read_one(h).unwrap();
            assert!(back[8..] == *pattern(len, 5), "{staging:?}, {len} bytes");
        }
    }
    let c = client(&ctx);
    let len = (256 << 20) + 4096;
    let h = c.create(Bytes::from(pattern(len, 6))).unwrap();
    assert!(*c.read_one(h).unwrap() == *pattern(len, 6), "two segments");
}
