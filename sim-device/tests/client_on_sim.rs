//! The runtime driven through `ComputeClient` on the simulator: behaviour only the simulator
//! can show (injected faults, device loss, determinism, the sanitizer). Properties that hold on
//! every device live in the conformance suite.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Scalar};
use lockstep::{
    Bytes, ComputeClient, CubeCount, DeviceError, Kernel, KernelArguments, ServerError, StreamId,
};
use lockstep_sim::{FaultKind, FaultPlan, ScriptedFault, SimConfig, SimDevice};

fn client(config: SimConfig) -> ComputeClient<SimDevice> {
    ComputeClient::new(SimDevice::new(config))
}

fn pinned(client: &ComputeClient<SimDevice>, stream: u64) -> ComputeClient<SimDevice> {
    let mut c = client.clone();
    c.set_stream(StreamId(stream));
    c
}

fn add_one() -> Kernel {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.clone().lt(data.len()), |k| {
        k.store(data, i.clone(), data.load(i) + 1u32);
    });
    Kernel::new(k.build().unwrap()).unwrap()
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
        SimConfig::new(3).with_faults(FaultPlan::scripted([ScriptedFault {
            kind: FaultKind::TransferFailure,
            nth: 2,
        }])),
    );
    let a = pinned(&c, 0);
    let b = pinned(&c, 1);
    let ha = a.create(Bytes::from_elems(&[1u32])).unwrap();
    a.sync().unwrap();
    let hb = b.create(Bytes::from_elems(&[7u32])).unwrap();
    let err = b.sync().unwrap_err();
    assert!(
        matches!(err, ServerError::Device(DeviceError::TransferFailed { .. })),
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
fn injected_kernel_fault_leaves_data_and_other_streams_intact() {
    let c = client(
        SimConfig::new(4).with_faults(FaultPlan::scripted([ScriptedFault {
            kind: FaultKind::KernelFault,
            nth: 1,
        }])),
    );
    let h = c.create(Bytes::from_elems(&[10u32, 20])).unwrap();
    launch_add_one(&c, &h, 2);
    let err = c.sync().unwrap_err();
    assert!(
        matches!(err, ServerError::Device(DeviceError::ExecutionFault { .. })),
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
fn allocation_failure_is_returned_at_the_call() {
    let c = client(SimConfig::new(5).with_memory(1024, 512));
    let too_large = c.empty(4096).unwrap_err();
    assert!(matches!(
        too_large,
        ServerError::OutOfMemory(DeviceError::AllocationTooLarge {
            requested_bytes: 4096,
            ..
        })
    ));
    let _a = c.empty(512).unwrap();
    let _b = c.empty(512).unwrap();
    let full = c.empty(4).unwrap_err();
    assert_eq!(
        full,
        ServerError::OutOfMemory(DeviceError::OutOfMemory {
            requested_bytes: 4,
            available_bytes: 0
        })
    );
    c.sync()
        .expect("an allocation failure does not poison the stream");
}

#[test]
fn device_loss_fails_every_stream_without_hanging() {
    let c = client(
        SimConfig::new(6).with_faults(FaultPlan::scripted([ScriptedFault {
            kind: FaultKind::DeviceLoss,
            nth: 3,
        }])),
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
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![3]);
}

#[test]
fn checked_out_of_range_kernel_reports_kernel_fault_once() {
    let mut k = KernelBuilder::new("overrun", [1, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let at = k.param(ElemType::U32);
    k.store(data, at, 9u32);
    let overrun = Kernel::new(k.build().unwrap()).unwrap();
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
            index: 6
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
