//! The host-timing fallback: a device without timestamps (the simulator built
//! `without_timestamps`) is profiled with the host clock around stream syncs, and says so.
//! Durations are wall-clock, so the tests check the method, that the profiled work ran, and that
//! nothing is refused or lost, never a time.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, DeviceError, Kernel, KernelArguments, ProfileLevel,
    TimingMethod,
};
use lockstep_sim::{SimConfig, SimDevice};

fn add_one() -> Kernel {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| {
        k.store(data, i, data.load(i) + 1u32);
    });
    k.build().unwrap()
}

#[test]
fn a_device_without_timestamps_is_profiled_with_the_host_clock() {
    let c = ComputeClient::new(SimDevice::new(SimConfig::new(1).without_timestamps()));
    assert_eq!(c.timing_method(), TimingMethod::System);
    let h = c.create(Bytes::from_elems(&[0u32; 16])).unwrap();
    let launch = || {
        c.launch(
            &add_one(),
            CubeCount::Static(4, 1, 1),
            KernelArguments::new().binding(&h),
        )
        .unwrap()
    };
    let ((), duration) = c.profile(launch, "add_one").unwrap();
    assert_eq!(duration.timing_method(), TimingMethod::System);
    duration.resolve_blocking().unwrap();

    // Every launch is still registered, timed on the host.
    c.set_profile_level(Some(ProfileLevel::Medium));
    launch();
    launch();
    c.sync().unwrap();
    let summary = c.profile_summary().unwrap();
    assert_eq!(summary.method, Some(TimingMethod::System));
    assert_eq!(summary.kernels.len(), 1);
    assert_eq!(summary.kernels[0].label, "add_one [4, 1, 1]");
    assert_eq!(summary.kernels[0].launches, 2);
    assert!(summary.kernels[0].total.is_some());
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![3; 16]);
}

#[test]
fn a_device_without_timestamps_refuses_them() {
    let mut device = SimDevice::new(SimConfig::new(1).without_timestamps());
    assert!(!device.properties().features.timestamps);
    let stream = device.create_stream().unwrap();
    assert_eq!(
        device.record_timestamp(stream).unwrap_err(),
        DeviceError::Unsupported {
            operation: "record_timestamp (the simulated device has no timestamps)".to_owned(),
        }
    );
}
