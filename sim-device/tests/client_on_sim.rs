//! The runtime driven through `ComputeClient` on the simulator: behaviour only the simulator
//! can show (injected faults, device loss, determinism, the sanitizer). Properties that hold on
//! every device live in the conformance suite.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
use lockstep::{
    Bytes, ComputeClient, ContractViolation, CubeCount, Device, DeviceError, KernelArguments,
    ServerError, StreamId,
};
use lockstep_sim::{FaultKind, FaultPlan, SanitizerReport, ScriptedFault, SimConfig, SimDevice};

mod common;
use common::{add_one, pinned};

fn client(config: SimConfig) -> ComputeClient<SimDevice> {
    ComputeClient::new(SimDevice::new(config))
}

fn launch_add_one(client: &ComputeClient<SimDevice>, handle: &lockstep::Handle, elems: u32) {
    client
        .launch(
            &add_one(),
            CubeCount::Static(elems.div_ceil(4), 1, 1),
            KernelArguments::new().binding(handle),
        )
        .unwrap();
}

#[test]
fn kernels_compute_on_the_simulator() {
    let c = client(SimConfig::new(1));
    let h = c.create(Bytes::from_elems(&[1u32, 2, 3, 4, 5])).unwrap();
    launch_add_one(&c, &h, 5);
    assert_eq!(
        c.read_one(h).unwrap().to_elems::<u32>(),
        vec![2, 3, 4, 5, 6]
    );
}

#[test]
fn injected_transfer_failure_surfaces_once_on_its_stream_only() {
    // The second transfer to execute is stream 1's write of [7]; the first is stream 0's.
    let c = client(
        SimConfig::new(3).with_faults(FaultPlan::scripted([ScriptedFault::at(
            FaultKind::TransferFailure,
            2,
        )])),
    );
    let a = pinned(&c, 0);
    let b = pinned(&c, 1);
    let ha = a.create(Bytes::from_elems(&[1u32])).unwrap();
    a.sync().unwrap();
    let hb = b.create(Bytes::from_elems(&[7u32])).unwrap();
    assert!(
        c.memory_usage().is_ok(),
        "memory usage answers while a stream holds a failure"
    );
    let err = b.sync().unwrap_err();
    assert!(
        matches!(err, ServerError::Device { stream, error: DeviceError::TransferFailed { .. } } if stream == b.stream_id()),
        "{err}"
    );
    b.sync()
        .expect("reported exactly once; the stream is healthy again");
    a.sync().expect("stream 0 is unaffected");
    assert_eq!(a.read_one(ha).unwrap().to_elems::<u32>(), vec![1]);
    b.write(&hb, Bytes::from_elems(&[8u32])).unwrap();
    assert_eq!(b.read_one(hb).unwrap().to_elems::<u32>(), vec![8]);
}

#[test]
fn a_fault_aimed_at_a_stream_counts_that_streams_launches_only() {
    // Stream 1's second launch faults, however the two streams' launches interleave: no
    // fence is needed to aim at it.
    let aimed = ScriptedFault::at(FaultKind::KernelFault, 2)
        .on_stream(StreamId(1))
        .unwrap();
    let device = SimDevice::new(SimConfig::new(9).with_faults(FaultPlan::scripted([aimed])));
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let (a, b) = (pinned(&c, 0), pinned(&c, 1));
    let ha = a.create(Bytes::from_elems(&[0u32; 4])).unwrap();
    let hb = b.create(Bytes::from_elems(&[10u32; 4])).unwrap();
    for _ in 0..3 {
        launch_add_one(&a, &ha, 4);
        launch_add_one(&b, &hb, 4);
    }
    a.sync().expect("stream 0's launches are not counted");
    let err = b.sync().unwrap_err();
    assert_eq!(err.stream(), Some(StreamId(1)));
    insta::assert_snapshot!(err.to_string());
    b.sync().expect("reported once");
    assert_eq!(a.read_one(ha).unwrap().to_elems::<u32>(), vec![3; 4]);
    // The faulting launch wrote nothing.
    assert_eq!(b.read_one(hb).unwrap().to_elems::<u32>(), vec![12; 4]);
    let faults = probe.observations().faults.clone();
    assert_eq!(faults.len(), 1);
    assert_eq!(
        (faults[0].kind, faults[0].stream_id),
        (FaultKind::KernelFault, Some(StreamId(1)))
    );
}

#[test]
#[should_panic(expected = "device stream 0 has no StreamId")]
fn a_fault_aimed_at_a_stream_needs_the_runtime_to_name_its_streams() {
    let aimed = ScriptedFault::at(FaultKind::TransferFailure, 1)
        .on_stream(StreamId(0))
        .unwrap();
    let mut device = SimDevice::new(SimConfig::new(1).with_faults(FaultPlan::scripted([aimed])));
    let stream = device.create_stream().unwrap();
    let buffer = device.allocate(4).unwrap();
    device.write(stream, &buffer, 0, &[1, 2, 3, 4]).unwrap();
    let _ = device.synchronize(stream);
}

#[test]
fn a_stream_labelled_twice_is_reported_and_keeps_its_first_label() {
    let plan = FaultPlan::scripted([ScriptedFault::at(FaultKind::TransferFailure, 1)]);
    let mut device = SimDevice::new(SimConfig::new(2).with_faults(plan));
    let probe = device.probe();
    let stream = device.create_stream().unwrap();
    device.label_stream(stream, StreamId(4));
    device.label_stream(stream, StreamId(5));
    assert_eq!(
        probe.observations().reports,
        vec![SanitizerReport::ContractViolation(DeviceError::Contract {
            operation: "label_stream".to_owned(),
            violation: ContractViolation::StreamLabelledTwice { index: 0 },
        })]
    );
    let buffer = device.allocate(4).unwrap();
    device.write(stream, &buffer, 0, &[1, 2, 3, 4]).unwrap();
    device.synchronize(stream).unwrap();
    let errors = device.take_errors(stream);
    assert!(
        matches!(&errors[..], [DeviceError::TransferFailed { reason }] if reason.contains("on stream-4 [injected fault #0]")),
        "{errors:?}"
    );
    device.free(buffer);
}

#[test]
fn a_failed_read_returns_an_older_failure_of_its_stream_first() {
    // Transfers 1 and 2 are the create's write and the read: both fail, the write first.
    let c = client(
        SimConfig::new(5).with_faults(FaultPlan::scripted([ScriptedFault::window(
            FaultKind::TransferFailure,
            1,
            2,
        )])),
    );
    let h = c.create(Bytes::from_elems(&[1u32])).unwrap();
    let message = |err: ServerError| err.to_string();
    let first = message(c.read_one(h).unwrap_err());
    assert!(
        first.contains("writing") && first.contains("#0]"),
        "{first}"
    );
    let second = message(c.sync().unwrap_err());
    assert!(
        second.contains("reading") && second.contains("#1]"),
        "{second}"
    );
    c.sync().expect("each failure is returned once");
}

/// A read of no handles is still a blocking call: it returns the failure of the stream's
/// earlier write, which the explorer found returned by nobody until a later `sync_all`.
#[test]
fn a_read_of_no_handles_returns_the_failure_of_an_earlier_write() {
    // Transfer 1 is the create's write.
    let c = client(
        SimConfig::new(5).with_faults(FaultPlan::scripted([ScriptedFault::at(
            FaultKind::TransferFailure,
            1,
        )])),
    );
    let _h = c.create(Bytes::from_elems(&[1u32])).unwrap();
    let err = lockstep::block_on(c.read_async(Vec::new())).unwrap_err();
    assert!(err.to_string().contains("writing"), "{err}");
    c.sync()
        .expect("the failure was returned once, by the read");
}

#[test]
fn injected_kernel_fault_leaves_data_and_other_streams_intact() {
    let c = client(
        SimConfig::new(4).with_faults(FaultPlan::scripted([ScriptedFault::at(
            FaultKind::KernelFault,
            1,
        )])),
    );
    let h = c.create(Bytes::from_elems(&[10u32, 20])).unwrap();
    launch_add_one(&c, &h, 2);
    let err = c.sync().unwrap_err();
    assert!(
        matches!(err, ServerError::Device { stream, error: DeviceError::ExecutionFault { .. } } if stream == c.stream_id()),
        "{err}"
    );
    assert_eq!(
        c.read_one(h.clone()).unwrap().to_elems::<u32>(),
        vec![10, 20]
    );
    launch_add_one(&c, &h, 2);
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![11, 21]);
}

#[test]
fn allocation_failure_is_returned_at_the_call_naming_the_request() {
    let c = client(SimConfig::new(5).with_memory(1024, 512));
    let too_large = c.empty(4096).unwrap_err();
    assert!(
        matches!(&too_large, ServerError::OutOfMemory(oom) if oom.requested_bytes == 4096),
        "{too_large}"
    );
    let _a = c.empty(512).unwrap();
    let _b = c.empty(512).unwrap();
    let ServerError::OutOfMemory(full) = c.empty(4).unwrap_err() else {
        panic!("expected out of memory");
    };
    assert_eq!(
        (full.requested_bytes, full.bytes_reserved, full.bytes_in_use),
        (4, 1024, 1024)
    );
    c.sync()
        .expect("an allocation failure does not poison the stream");
}

#[test]
fn out_of_memory_reclaims_free_pages_and_retries() {
    let c = client(SimConfig::new(5).with_memory(1024, 512));
    let a = c.empty(512).unwrap();
    let _b = c.empty(512).unwrap();
    drop(a);
    // The device is full of pages; a's page is free but cached by its pool. A small request
    // needs a new page for the small pool: the runtime must give a's page back and retry.
    let small = c.create(Bytes::from_elems(&[3u32])).unwrap();
    assert_eq!(c.read_one(small).unwrap().to_elems::<u32>(), vec![3]);
}

#[test]
fn device_loss_fails_every_stream_without_hanging() {
    let c = client(
        SimConfig::new(6).with_faults(FaultPlan::scripted([ScriptedFault::at(
            FaultKind::DeviceLoss,
            3,
        )])),
    );
    let a = pinned(&c, 0);
    let b = pinned(&c, 1);
    let h = a.create(Bytes::from_elems(&[1u32, 2])).unwrap();
    for _ in 0..3 {
        launch_add_one(&a, &h, 2);
    }
    assert!(matches!(a.sync(), Err(ServerError::DeviceLost { .. })));
    assert!(matches!(b.sync(), Err(ServerError::DeviceLost { .. })));
    assert!(matches!(b.empty(16), Err(ServerError::DeviceLost { .. })));
    assert!(matches!(a.read_one(h), Err(ServerError::DeviceLost { .. })));
    assert!(c.memory_usage().is_ok(), "memory usage still answers");
}

#[test]
fn a_panicking_exclusive_task_is_reported_and_the_device_keeps_working() {
    let c = client(SimConfig::new(7));
    let err = c.exclusive(|| panic!("boom")).unwrap_err();
    assert!(matches!(err, ServerError::TaskPanicked { ref message, .. } if message == "boom"));
    assert_eq!(c.exclusive(|| 41 + 1).unwrap(), 42);
    let h = c.create(Bytes::from_elems(&[3u32])).unwrap();
    assert_eq!(c.read_one(h.clone()).unwrap().to_elems::<u32>(), vec![3]);
    // A call that waits for the device, inside exclusive, deadlocked: it fails now.
    let err = c.exclusive(|| c.read_one(h.clone())).unwrap_err();
    assert!(
        matches!(&err, ServerError::TaskPanicked { message, .. } if message.contains("would wait forever")),
        "{err:?}"
    );
    c.sync().unwrap();
}

#[test]
fn checked_out_of_range_kernel_reports_kernel_fault_once() {
    let mut k = KernelBuilder::new("overrun", [1, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let at = k.param(ElemType::U32);
    k.store(data, at, 9u32);
    let overrun = k.build().unwrap();
    let c = client(SimConfig::new(8));
    let h = c.create(Bytes::from_elems(&[0u32; 4])).unwrap();
    let args = KernelArguments::new().binding(&h).param(Scalar::U32(6));
    c.launch(&overrun, CubeCount::Static(1, 1, 1), args)
        .unwrap();
    assert_eq!(
        c.sync().unwrap_err(),
        ServerError::KernelFault {
            kernel: "overrun".into(),
            binding: 0,
            index: 6,
            stream: c.stream_id(),
        }
    );
    c.sync().unwrap();
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![0; 4]);
}

#[test]
fn reading_never_written_memory_is_reported_by_the_sanitizer() {
    let device = SimDevice::new(SimConfig::new(9));
    let probe = device.probe();
    let c = ComputeClient::new(device);
    let h = c.empty(8).unwrap();
    let bytes = c.read_one(h).unwrap();
    assert_eq!(&bytes[..], &[lockstep_sim::POISON_FRESH; 8]);
    let reports = probe.observations().reports.clone();
    assert_eq!(reports.len(), 1, "{reports:?}");
}

#[test]
fn memory_returns_to_baseline_after_handles_drop() {
    let c = client(SimConfig::new(10));
    let baseline = c.memory_usage().unwrap();
    let h = c.create(Bytes::from_elems(&[1u32; 64])).unwrap();
    launch_add_one(&c, &h, 64);
    assert!(c.memory_usage().unwrap().bytes_in_use > baseline.bytes_in_use);
    drop(h);
    c.sync().unwrap();
    assert_eq!(
        c.memory_usage().unwrap().bytes_in_use,
        baseline.bytes_in_use
    );
}

#[test]
fn dynamic_cube_counts_are_read_from_device_memory() {
    let c = client(SimConfig::new(11));
    let data = c.create(Bytes::from_elems(&[0u32; 12])).unwrap();
    // Two workgroups of four: the first eight elements.
    let count = c.create(Bytes::from_elems(&[2u32, 1, 1])).unwrap();
    c.launch(
        &add_one(),
        CubeCount::Dynamic(count),
        KernelArguments::new().binding(&data),
    )
    .unwrap();
    let expected: Vec<u32> = (0..12).map(|i| u32::from(i < 8)).collect();
    assert_eq!(c.read_one(data).unwrap().to_elems::<u32>(), expected);
}

/// Dynamic counts were never bounded: `u32::MAX` in each dimension ended as `TaskPanicked`
/// ("capacity overflow") and a count above the maximum a static one is refused for ran. A
/// count above `max_workgroups` in any dimension makes the launch do nothing, as WebGPU has it.
#[test]
fn dynamic_counts_above_the_maximum_launch_nothing() {
    let c = client(SimConfig::new(14));
    let max = c.properties().max_workgroups;
    let data = c.create(Bytes::from_elems(&[0u32; 8])).unwrap();
    for counts in [
        [u32::MAX; 3],
        [max[0] + 1, 1, 1],
        [1, max[1] + 1, 1],
        [2, 1, u32::MAX],
    ] {
        let count = c.create(Bytes::from_elems(&counts)).unwrap();
        c.launch(
            &add_one(),
            CubeCount::Dynamic(count),
            KernelArguments::new().binding(&data),
        )
        .unwrap();
    }
    c.sync().unwrap();
    assert_eq!(
        c.read_one(data.clone()).unwrap().to_elems::<u32>(),
        vec![0; 8]
    );
    launch_add_one(&c, &data, 8);
    assert_eq!(c.read_one(data).unwrap().to_elems::<u32>(), vec![1; 8]);
}

#[test]
fn registered_clients_are_loaded_by_index_and_die_with_their_last_client() {
    assert!(ComputeClient::<SimDevice>::load(7).is_none());
    let c = ComputeClient::init(7, SimDevice::new(SimConfig::new(12)));
    let loaded = ComputeClient::<SimDevice>::load(7).expect("registered");
    assert_eq!(loaded.device_id(), c.device_id());
    let h = c.create(Bytes::from_elems(&[5u32])).unwrap();
    assert_eq!(loaded.read_one(h).unwrap().to_elems::<u32>(), vec![5]);
    drop((c, loaded));
    assert!(ComputeClient::<SimDevice>::load(7).is_none());
}

#[test]
fn properties_are_mutable_only_through_the_one_client() {
    let mut c = client(SimConfig::new(13));
    assert_eq!(c.info(), c.properties());
    c.properties_mut()
        .expect("the only client")
        .max_load_width_bytes = 4;
    // Tensor rows are now pitched to 4 bytes, not the device's 16.
    let layout = c
        .create_tensor(Bytes::from_elems(&[1u8; 10]), &[2, 5], 1)
        .unwrap();
    assert_eq!(layout.strides, vec![8, 1]);
    let clone = c.clone();
    assert!(
        c.properties_mut().is_none(),
        "a clone shares the properties"
    );
    drop(clone);
    assert!(c.properties_mut().is_some());
}

#[test]
fn the_interpreter_honours_loops_selects_casts_and_2d_workgroups() {
    // out[y * 4 + x] = select(x < y, sum_{j < x} (j as i32) - y, -1) as f32, over a 4x4 grid
    // of 2x2 workgroups.
    let mut k = KernelBuilder::new("grid", [2, 2, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let x = k.global_id(Axis::X);
    let y = k.global_id(Axis::Y);
    let acc = k.var(ElemType::I32, 0i32);
    k.for_range(ElemType::U32, 0u32, x, |k, j| {
        k.assign(acc, acc.get() + j.cast(ElemType::I32));
    });
    let value = x.lt(y).select(acc.get() - y.cast(ElemType::I32), -1i32);
    k.store(out, y * 4u32 + x, value.cast(ElemType::F32));
    let grid = k.build().unwrap();
    let c = client(SimConfig::new(13));
    let h = c.empty(16 * 4).unwrap();
    c.launch(
        &grid,
        CubeCount::Static(2, 2, 1),
        KernelArguments::new().binding(&h),
    )
    .unwrap();
    let expected: Vec<f32> = (0..16)
        .map(|i| {
            let (x, y) = (i % 4, i / 4);
            if x < y {
                (0..x).sum::<i32>() as f32 - y as f32
            } else {
                -1.0
            }
        })
        .collect();
    assert_eq!(c.read_one(h).unwrap().to_elems::<f32>(), expected);
}

#[test]
fn same_seed_same_trace_different_seeds_different_interleavings() {
    fn run(seed: u64) -> u64 {
        let device = SimDevice::new(SimConfig::new(seed));
        let probe = device.probe();
        let c = ComputeClient::new(device);
        let handles: Vec<_> = (0..4)
            .map(|s| {
                let p = pinned(&c, s);
                let h = p.create(Bytes::from_elems(&[s as u32; 8])).unwrap();
                launch_add_one(&p, &h, 8);
                (p, h)
            })
            .collect();
        for (p, h) in handles {
            assert_eq!(p.read_one(h).unwrap().to_elems::<u32>().len(), 8);
        }
        probe.observations().trace_hash
    }
    assert_eq!(run(21), run(21));
    let distinct: std::collections::BTreeSet<u64> = (0..8).map(run).collect();
    assert!(distinct.len() > 1, "eight seeds gave one interleaving");
}

/// A bitcast keeps every bit on the simulator, a NaN's payload included, as the reference
/// semantics say.
#[test]
fn bitcasts_keep_every_bit() {
    let c = client(SimConfig::new(15));
    let words = [
        0u32,
        1,
        0x8000_0000,
        u32::MAX,
        0x7fc0_1234,
        0x3f80_0000,
        0xdead_beef,
    ];
    let mut k = KernelBuilder::new("bitcasts", [8, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let as_float = k.binding(ElemType::F32, Access::ReadWrite);
    let back = k.binding(ElemType::I32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(input.len()), |k| {
        let f = input.load(i).bitcast(ElemType::F32);
        k.store(as_float, i, f);
        k.store(back, i, f.bitcast(ElemType::I32));
    });
    let kernel = k.build().unwrap();
    let input = c.create(Bytes::from_elems(&words)).unwrap();
    let floats = c.create(Bytes::from_elems(&[0u32; 7])).unwrap();
    let ints = c.create(Bytes::from_elems(&[0u32; 7])).unwrap();
    let args = KernelArguments::new()
        .binding(&input)
        .binding(&floats)
        .binding(&ints);
    c.launch(&kernel, CubeCount::Static(1, 1, 1), args).unwrap();
    assert_eq!(c.read_one(floats).unwrap().to_elems::<u32>(), words);
    assert_eq!(c.read_one(ints).unwrap().to_elems::<u32>(), words);
}

/// `data[i] += 1` with no guard: a launch of more invocations than elements goes out of range.
fn add_one_unguarded() -> lockstep::Kernel {
    let mut k = KernelBuilder::new("add_one_unguarded", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.store(data, i, data.load(i) + 1u32);
    k.build().unwrap()
}

#[test]
#[allow(
    unsafe_code,
    reason = "breaks an unchecked kernel's contract on purpose: the simulator traps it"
)]
fn a_kernel_made_unchecked_runs_unguarded_on_a_checked_server() {
    let c = client(SimConfig::new(12));
    let h = c.create(Bytes::from_elems(&[1u32, 2])).unwrap();
    let checked = add_one_unguarded();
    // SAFETY: not kept on purpose (4 invocations, 2 elements); the simulator traps the access
    // instead of running it, which is what this test shows.
    let unchecked = checked
        .clone()
        .with_checks(unsafe { lockstep::kernel::KernelChecks::unchecked() });
    assert!(checked.checks().is_checked() && !unchecked.checks().is_checked());
    let launch = |kernel: &lockstep::Kernel| {
        c.launch(
            kernel,
            CubeCount::Static(1, 1, 1),
            KernelArguments::new().binding(&h),
        )
        .unwrap();
        c.sync().unwrap_err()
    };
    let guarded = launch(&checked);
    assert!(
        matches!(guarded, ServerError::KernelFault { .. }),
        "{guarded}"
    );
    let trapped = launch(&unchecked);
    assert!(
        matches!(
            trapped,
            ServerError::Device {
                error: DeviceError::ExecutionFault { .. },
                ..
            }
        ),
        "{trapped}"
    );
    // The checked launch skipped its out-of-range accesses and did the others; the trapped one
    // wrote nothing.
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![2, 3]);
}
