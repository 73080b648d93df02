//! Profiling, dry runs, lazy reads, staging, throughput and resources on the simulator, where
//! virtual time makes durations exact: a launch costs a fixed latency plus one virtual
//! nanosecond per invocation.

use std::time::Duration;

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{
    AllocationProperty, Bytes, CaptureError, ComputeClient, CopyDescriptor, CubeCount, IoError,
    Kernel, KernelArguments, KernelConfig, MemoryLayoutDescriptor, MemoryLayoutStrategy,
    ProfileError, ProfileLevel, ServerError, ThroughputKey, TimingMethod, dry_run,
};
use lockstep_sim::{SimConfig, SimDevice, SimProbe};

const WORKGROUP: u32 = 4;

fn client(seed: u64) -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(SimConfig::new(seed));
    let probe = device.probe();
    (ComputeClient::new(device), probe)
}

fn kernel(name: &str) -> Kernel {
    let mut k = KernelBuilder::new(name, [WORKGROUP, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| {
        k.store(data, i, data.load(i) + 1u32);
    });
    k.build().unwrap()
}

fn launch(c: &ComputeClient<SimDevice>, k: &Kernel, h: &lockstep::Handle, workgroups: u32) {
    c.launch(
        k,
        CubeCount::Static(workgroups, 1, 1),
        KernelArguments::new().binding(h),
    )
    .unwrap();
}

fn profiled_launch(seed: u64, workgroups: u32) -> Duration {
    let (c, _) = client(seed);
    let k = kernel("add_one");
    let h = c.create(Bytes::from_elems(&[0u32; 64])).unwrap();
    // Compile and allocate the fault record outside the profiled window.
    launch(&c, &k, &h, 1);
    c.sync().unwrap();
    let ((), duration) = c
        .profile(|| launch(&c, &k, &h, workgroups), "add_one")
        .unwrap();
    assert_eq!(duration.timing_method(), TimingMethod::Device);
    duration.resolve_blocking().unwrap()
}

#[test]
fn profile_measures_virtual_time_and_a_bigger_launch_takes_longer() {
    let small = profiled_launch(7, 1);
    let big = profiled_launch(7, 16);
    // One virtual nanosecond per invocation, on top of the same fixed latency.
    assert_eq!(big - small, Duration::from_nanos(15 * u64::from(WORKGROUP)));
    assert!(small > Duration::ZERO);
    assert_eq!(profiled_launch(7, 16), big, "virtual time is deterministic");
}

#[test]
fn profile_is_refused_inside_a_capture_window_without_running_the_closure() {
    let (c, _) = client(1);
    c.graph_prepare().unwrap();
    c.start_capture().unwrap();
    let mut ran = false;
    let err = c.profile(|| ran = true, "captured").unwrap_err();
    let stream = c.stream_id();
    assert_eq!(
        err,
        ProfileError::Server {
            name: "captured".to_owned(),
            source: ServerError::Capture(CaptureError::Refused {
                operation: "profile",
                stream
            }),
        }
    );
    assert!(!ran);
    c.stop_capture().unwrap();
    // A profile taken before the window cannot be resolved inside it.
    let ((), pending) = c.profile(|| (), "before").unwrap();
    c.graph_prepare().unwrap();
    c.start_capture().unwrap();
    assert!(matches!(
        pending.resolve_blocking(),
        Err(ProfileError::Server {
            source: ServerError::Capture(CaptureError::Refused { .. }),
            ..
        })
    ));
    c.stop_capture().unwrap();
}

#[test]
fn profiling_levels_register_every_launch_into_the_summary() {
    let (c, _) = client(3);
    let (a, b) = (kernel("kernel_a"), kernel("kernel_b"));
    let h = c.create(Bytes::from_elems(&[0u32; 64])).unwrap();
    let g = c.create(Bytes::from_elems(&[0u32; 64])).unwrap();
    launch(&c, &a, &h, 1);
    c.set_profile_level(Some(ProfileLevel::Basic));
    for workgroups in [1, 2, 16] {
        launch(&c, &a, &h, workgroups);
    }
    launch(&c, &b, &g, 4);
    c.sync().unwrap();
    let summary = c.profile_summary().unwrap();
    assert_eq!(summary.launches(), 4);
    insta::assert_snapshot!("basic_summary", summary.to_string());

    c.set_profile_level(Some(ProfileLevel::Full));
    launch(&c, &b, &g, 4);
    // Counted only once its stream has been synced.
    assert_eq!(c.profile_summary().unwrap().launches(), 0);
    c.sync().unwrap();
    let label = &c.profile_summary().unwrap().kernels[0].label;
    assert_eq!(
        label,
        &format!("kernel_b #{:016x} [4, 1, 1]", b.content_hash())
    );

    c.set_profile_level(Some(ProfileLevel::ExecutionOnly));
    launch(&c, &a, &h, 1);
    launch(&c, &a, &h, 1);
    c.sync().unwrap();
    insta::assert_snapshot!(
        "execution_only_summary",
        c.profile_summary().unwrap().to_string()
    );
    assert_eq!(
        c.read_one(h).unwrap().to_elems::<u32>()[..4],
        [6, 6, 6, 6],
        "profiled launches ran: one before, three timed, two counted"
    );
}

#[test]
fn dry_run_launches_compile_but_leave_memory_unchanged() {
    let (c, probe) = client(4);
    let k = kernel("add_one");
    let h = c.create(Bytes::from_elems(&[5u32; 8])).unwrap();
    c.sync().unwrap();
    let ops = probe.observations().ops_executed;
    dry_run(|| launch(&c, &k, &h, 2));
    c.sync().unwrap();
    assert_eq!(probe.observations().ops_executed, ops, "nothing executed");
    assert_eq!(c.read_one(h.clone()).unwrap().to_elems::<u32>(), vec![5; 8]);
    launch(&c, &k, &h, 2);
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![6; 8]);
}

#[test]
fn read_lazy_reads_at_first_access_and_reports_failures_there() {
    let (c, _) = client(5);
    let layout = c
        .create_tensor(Bytes::from_elems(&[1u32, 2, 3, 4, 5, 6]), &[2, 3], 4)
        .unwrap();
    let descriptor =
        || CopyDescriptor::new(layout.memory.clone(), vec![2, 3], layout.strides.clone(), 4);
    let lazy = c.read_lazy(descriptor());
    assert_eq!(lazy.len(), 24);
    assert_eq!(lazy.property(), AllocationProperty::Device);
    assert_eq!(format!("{lazy:?}"), "Bytes(24 bytes, lazy)");
    // Written after read_lazy, before the first access: the access sees it.
    let k = kernel("add_one");
    launch(&c, &k, &layout.memory, 8);
    assert_eq!(lazy.to_elems::<u32>(), vec![2, 3, 4, 5, 6, 7]);
    assert_eq!(lazy.property(), AllocationProperty::Native);

    let bad = CopyDescriptor::new(layout.memory.clone(), vec![2, 3], vec![3], 4);
    let failed = c.read_lazy(bad);
    assert!(matches!(failed.materialize(), Err(ServerError::Io(_))));
    let message = std::panic::catch_unwind(|| failed.len() + failed.iter().count())
        .unwrap_err()
        .downcast::<String>()
        .unwrap();
    assert!(message.contains("call Bytes::materialize"), "{message}");
}

/// A lazy read that failed made a later `create` or `write` of its bytes panic instead of
/// returning the read's error.
#[test]
fn a_failed_lazy_read_is_the_error_of_a_create_or_write_of_it() {
    let (c, _) = client(7);
    let h = c.create(Bytes::from_elems(&[7u32; 6])).unwrap();
    let failed = || c.read_lazy(CopyDescriptor::new(h.clone(), vec![2, 3], vec![3], 4));
    let error = failed().materialize().unwrap_err();
    assert!(matches!(error, ServerError::Io(_)), "{error:?}");
    let as_write = IoError::LazyReadFailed {
        source: Box::new(error.clone()),
    };
    assert_eq!(c.create(failed()).unwrap_err(), error);
    assert_eq!(c.write(&h, failed()).unwrap_err(), as_write);
    let whole = CopyDescriptor::new(h.clone(), vec![6], vec![1], 4);
    assert_eq!(c.write_tensor(whole, failed()).unwrap_err(), as_write);
    let desc = MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![2, 3], 4);
    assert_eq!(c.create_tensors(vec![(desc, failed())]).unwrap_err(), error);
    // Nothing was written, and the stream stays usable.
    assert_eq!(c.read_one(h).unwrap().to_elems::<u32>(), vec![7; 6]);
    c.sync().unwrap();
}

#[test]
fn staging_is_a_no_op_without_pinned_memory_and_get_resource_keeps_memory_alive() {
    let (c, _) = client(6);
    let mut data = Bytes::from_elems(&[9u32; 16]);
    c.staging(std::iter::once(&mut data), false).unwrap();
    assert_eq!(data.property(), AllocationProperty::Native);

    let baseline = c.memory_usage().unwrap();
    let h = c.create(data).unwrap();
    let resource = c.get_resource(h).unwrap();
    assert_eq!(resource.len_bytes(), 64);
    let offset = resource.offset_bytes();
    assert_eq!(resource.with_buffer(move |_, o| o).unwrap(), offset);
    c.memory_cleanup();
    assert!(c.memory_usage().unwrap().bytes_in_use > baseline.bytes_in_use);
    assert_eq!(
        c.read_one(resource.handle().clone())
            .unwrap()
            .to_elems::<u32>(),
        vec![9; 16]
    );
    drop(resource);
    c.memory_cleanup();
    c.sync().unwrap();
    assert_eq!(c.memory_usage().unwrap(), baseline);
}

#[test]
fn throughput_is_measured_once_and_vector_sizes_follow_the_load_width() {
    let (c, probe) = client(8);
    let config = KernelConfig {
        workgroups: 2,
        iterations: 8,
    };
    let first = c
        .measure_throughput(ThroughputKey::Arithmetic(ElemType::F32), config)
        .unwrap();
    // 2 workgroups of 64 invocations, 8 multiply-adds each, 4 timed launches.
    assert_eq!(first.work, 2 * 64 * 8 * 2 * 4);
    assert_eq!(first.method, TimingMethod::Device);
    let ops = probe.observations().ops_executed;
    let again =
        dry_run(|| c.measure_throughput(ThroughputKey::Arithmetic(ElemType::F32), config)).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        probe.observations().ops_executed,
        ops,
        "the cache launched nothing"
    );
    let memory = c.measure_throughput(ThroughputKey::Memory, config).unwrap();
    assert_eq!(memory.work, 2 * 64 * 4 * 2 * 4);

    // The simulator loads 16 bytes at most.
    assert_eq!(
        c.io_optimized_vector_sizes(4).collect::<Vec<_>>(),
        vec![4, 2, 1]
    );
    assert_eq!(
        c.io_optimized_vector_sizes(1).collect::<Vec<_>>(),
        vec![8, 4, 2, 1]
    );
    assert_eq!(c.io_optimized_vector_sizes(32).collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        c.io_optimized_vector_sizes(0).collect::<Vec<_>>(),
        vec![8, 4, 2, 1]
    );
}
