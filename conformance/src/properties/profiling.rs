//! Profiling and tuning: `profile` and profiling levels, lazy reads, staging, dry runs,
//! `get_resource` and the throughput cache, checked against host references on every device.

use lockstep::kernel::{ElemType, Scalar};
use lockstep::{
    AllocationProperty, Bytes, CaptureError, ComputeClient, CopyDescriptor, CubeCount, Device,
    Handle, KernelArguments, KernelConfig, ProfileError, ProfileLevel, ServerError, StreamId,
    ThroughputKey, dry_run,
};
use proptest::collection::vec;
use proptest::prelude::*;

use super::data::random_bytes;
use super::{Failure, RunConfig, expect_baseline, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::elementwise::KernelKind;

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Launches `dst[i] += k` over all of `dst`.
fn add_const<D: Device>(c: &ComputeClient<D>, dst: &Handle, k: u32) -> Result<(), String> {
    let elems = dst.size() as usize / 4;
    c.launch(
        &KernelKind::AddConst.kernel(),
        CubeCount::Static(KernelKind::AddConst.workgroups(elems, 0).max(1), 1, 1),
        KernelArguments::new().binding(dst).param(Scalar::U32(k)),
    )
    .map_err(|e| format!("launch: {e}"))
}

fn resolve(duration: lockstep::ProfileDuration, what: &str) -> Result<std::time::Duration, String> {
    duration
        .resolve_blocking()
        .map_err(|e| format!("resolving the profile of {what}: {e}"))
}

/// `profile` times a launch (a bigger one longer, where time is virtual) without changing what
/// it computes; a profiling level registers every launch; `profile` in a capture window is
/// refused without running its closure.
pub(super) fn profiling<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = (1usize..=64, 2u32..=16, any::<u32>(), any::<u64>());
    run_cases(config, "profiling", strategy, |(elems, scale, k, seed)| {
        let session = factory.open(seed);
        let mut c = session.client.clone();
        c.set_stream(StreamId(2));
        // At least `scale` more workgroups than the small launch.
        let big_elems = elems + (scale * lockstep_kernels::elementwise::WORKGROUP) as usize;
        let data = u32s(&random_bytes(big_elems * 4, seed));
        let h = c
            .create(Bytes::from_elems(&data))
            .map_err(|e| e.to_string())?;
        let small = c
            .create(Bytes::from_elems(&data[..elems]))
            .map_err(|e| e.to_string())?;
        let (little, big) = profiled_launches(&c, &small, &h, k)?;
        // Only virtual time is exact enough to compare launches of a few microseconds.
        ensure!(
            !factory.deterministic() || big > little,
            "{big_elems} elements took {big:?}, not longer than {elems} ({little:?})"
        );
        let mut expected = data.clone();
        expected.iter_mut().for_each(|x| *x = x.wrapping_add(k));
        let mut expected_small = data[..elems].to_vec();
        expected_small
            .iter_mut()
            .for_each(|x| *x = x.wrapping_add(k).wrapping_add(k));
        let read = |h: &Handle| {
            c.read_one(h.clone())
                .map(|b| b.to_elems::<u32>())
                .map_err(|e| e.to_string())
        };
        ensure!(
            read(&h)? == expected && read(&small)? == expected_small,
            "profiled launches did not compute what they compute unprofiled"
        );
        launches_register_at_a_level(&c, &small, k)?;
        profile_refused_in_capture(&c)?;
        drop((h, small));
        expect_clean(&session)
    })
}

/// Adds `k` to `small` once unprofiled (compiling the kernel outside the windows), then
/// profiles adding `k` to `small` and to `big`; returns the two durations, neither zero, both
/// measured the client's way.
fn profiled_launches<D: Device>(
    c: &ComputeClient<D>,
    small: &Handle,
    big: &Handle,
    k: u32,
) -> Result<(std::time::Duration, std::time::Duration), String> {
    add_const(c, small, k)?;
    c.sync().map_err(|e| format!("sync: {e}"))?;
    let (launched, little) = c
        .profile(|| add_const(c, small, k), "small")
        .map_err(|e| e.to_string())?;
    launched?;
    let (launched, large) = c
        .profile(|| add_const(c, big, k), "big")
        .map_err(|e| e.to_string())?;
    launched?;
    ensure!(
        little.timing_method() == c.timing_method(),
        "profile used {:?}, the client reports {:?}",
        little.timing_method(),
        c.timing_method()
    );
    let (little, large) = (resolve(little, "small")?, resolve(large, "big")?);
    ensure!(
        !little.is_zero() && !large.is_zero(),
        "a profiled launch took no time: {little:?}, {large:?}"
    );
    Ok((little, large))
}

/// With a level on, three launches of `add_const` make one summary entry of three timed
/// launches.
fn launches_register_at_a_level<D: Device>(
    c: &ComputeClient<D>,
    small: &Handle,
    k: u32,
) -> Result<(), String> {
    c.set_profile_level(Some(ProfileLevel::Basic));
    for _ in 0..3 {
        add_const(c, small, k)?;
    }
    c.sync().map_err(|e| format!("sync: {e}"))?;
    let summary = c.profile_summary().map_err(|e| e.to_string())?;
    c.set_profile_level(None);
    let kernel = summary.kernels.first();
    ensure!(
        summary.kernels.len() == 1
            && kernel.map(|k| (k.label.as_str(), k.launches)) == Some(("add_const", 3))
            && kernel.and_then(|k| k.total).is_some(),
        "three timed add_const launches, summary:\n{summary}"
    );
    Ok(())
}

/// `profile` inside a capture window is refused at once, its closure never run.
fn profile_refused_in_capture<D: Device>(c: &ComputeClient<D>) -> Result<(), String> {
    c.graph_prepare().map_err(|e| e.to_string())?;
    c.start_capture().map_err(|e| e.to_string())?;
    let mut ran = false;
    let refused = c.profile(|| ran = true, "captured");
    c.stop_capture().map_err(|e| format!("stop_capture: {e}"))?;
    match refused {
        Err(ProfileError::Server {
            source: ServerError::Capture(CaptureError::Refused { .. }),
            ..
        }) if !ran => Ok(()),
        other => Err(format!(
            "profile in the capture window: {other:?}, closure ran: {ran}"
        )),
    }
}

pub(super) fn lazy_reads<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = (vec(0usize..=9, 0..=3), any::<u32>(), any::<u64>());
    run_cases(config, "lazy_reads", strategy, |(shape, k, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        let baseline = c.memory_usage().map_err(|e| e.to_string())?;
        let elems: usize = shape.iter().product();
        let data = u32s(&random_bytes(elems * 4, seed));
        let layout = c
            .create_tensor(Bytes::from_elems(&data), &shape, 4)
            .map_err(|e| e.to_string())?;
        let descriptor = || {
            CopyDescriptor::new(
                layout.memory.clone(),
                shape.clone(),
                layout.strides.clone(),
                4,
            )
        };
        let eager = c.read_tensor(vec![descriptor()]).remove(0);
        let lazy = c.read_lazy(descriptor());
        let later = c.read_lazy(descriptor());
        ensure!(
            lazy.len() == elems * 4,
            "lazy length {} for {} bytes",
            lazy.len(),
            elems * 4
        );
        let lazy = lazy.materialize().map_err(|e| e.to_string())?.to_vec();
        ensure!(
            lazy == *eager && u32s(&lazy) == data,
            "read_lazy differs from read_tensor"
        );
        // The data is the device's at first access: a launch after read_lazy is seen.
        if layout.memory.size() > 0 {
            add_const(c, &layout.memory, k)?;
        }
        let expected: Vec<u32> = data.iter().map(|x| x.wrapping_add(k)).collect();
        let later = later.materialize().map_err(|e| e.to_string())?;
        ensure!(
            u32s(later) == expected,
            "a lazy read did not see a launch that preceded its first access"
        );
        drop(layout);
        expect_baseline(c, baseline)?;
        expect_clean(&session)
    })
}

pub(super) fn staging<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = (vec(0usize..=(300 << 10), 1..=3), any::<u64>());
    run_cases(config, "staging", strategy, |(sizes, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        let data: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| random_bytes(len, seed ^ i as u64))
            .collect();
        let mut kept: Vec<Bytes> = data.iter().map(|d| Bytes::from(d.clone())).collect();
        c.staging(kept.iter_mut(), true)
            .map_err(|e| format!("staging, file only: {e}"))?;
        ensure!(
            kept.iter()
                .all(|b| b.property() == AllocationProperty::Native),
            "file-only staging moved heap bytes"
        );
        let mut staged = kept.clone();
        c.staging(staged.iter_mut(), false)
            .map_err(|e| format!("staging: {e}"))?;
        for (i, (b, d)) in staged.iter().zip(&data).enumerate() {
            ensure!(**b == **d, "staging changed the contents of bytes {i}");
        }
        let mut handles = Vec::new();
        for (i, b) in staged.into_iter().enumerate() {
            // Half through `create`, half through `write` into memory made first.
            let h = if i % 2 == 0 {
                c.create(b).map_err(|e| format!("create: {e}"))?
            } else {
                let h = c.empty(b.len()).map_err(|e| format!("empty: {e}"))?;
                c.write(&h, b).map_err(|e| format!("write: {e}"))?;
                h
            };
            handles.push(h);
        }
        let read = c.read_async(handles);
        let read = lockstep::block_on(read).map_err(|e| format!("read: {e}"))?;
        for (i, (r, d)) in read.iter().zip(&data).enumerate() {
            ensure!(**r == **d, "staged bytes {i} did not round-trip");
        }
        expect_clean(&session)
    })
}

pub(super) fn dry_runs<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = (
        vec(
            (prop::sample::select(KernelKind::ALL.to_vec()), any::<u32>()),
            1..=4,
        ),
        1usize..=40,
        any::<u64>(),
    );
    run_cases(config, "dry_runs", strategy, |(launches, elems, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        let dst_data = u32s(&random_bytes(elems * 4, seed));
        let src_data = u32s(&random_bytes(elems * 4, !seed));
        let dst = c
            .create(Bytes::from_elems(&dst_data))
            .map_err(|e| e.to_string())?;
        let src = c
            .create(Bytes::from_elems(&src_data))
            .map_err(|e| e.to_string())?;
        let run = |kind: KernelKind, k: u32| {
            let mut args = KernelArguments::new().binding(&dst);
            if kind.has_src() {
                args = args.binding(&src);
            } else {
                args = args.param(Scalar::U32(k));
            }
            if kind == KernelKind::MulAdd {
                args = args.param(Scalar::U32(k));
            }
            let count = CubeCount::Static(kind.workgroups(elems, elems), 1, 1);
            c.launch(&kind.kernel(), count, args)
                .map_err(|e| format!("launch: {e}"))
        };
        dry_run(|| launches.iter().try_for_each(|&(kind, k)| run(kind, k)))?;
        // Validation still happens in a dry run.
        let invalid = dry_run(|| {
            c.launch(
                &KernelKind::AddConst.kernel(),
                CubeCount::Static(1, 1, 1),
                KernelArguments::new().binding(&dst),
            )
        });
        ensure!(
            invalid.is_err(),
            "a dry run accepted a launch missing its parameter"
        );
        c.sync().map_err(|e| format!("sync after dry runs: {e}"))?;
        let read = |h: &Handle| {
            c.read_one(h.clone())
                .map(|b| b.to_elems::<u32>())
                .map_err(|e| e.to_string())
        };
        ensure!(
            read(&dst)? == dst_data && read(&src)? == src_data,
            "a dry run changed memory"
        );
        let mut expected = dst_data.clone();
        for &(kind, k) in &launches {
            run(kind, k)?;
            kind.reference(&mut expected, &src_data, k);
        }
        ensure!(
            read(&dst)? == expected,
            "after dry runs, the same launches did not compute the reference"
        );
        expect_clean(&session)
    })
}

pub(super) fn resources<F: DeviceFactory>(factory: &F, config: RunConfig) -> Result<(), Failure> {
    let strategy = (1usize..=256, any::<u32>(), any::<u64>());
    run_cases(config, "resources", strategy, |(elems, k, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        let baseline = c.memory_usage().map_err(|e| e.to_string())?;
        let data = u32s(&random_bytes(elems * 4, seed));
        let h = c
            .create(Bytes::from_elems(&data))
            .map_err(|e| e.to_string())?;
        add_const(c, &h, k)?;
        let resource = c
            .get_resource(h)
            .map_err(|e| format!("get_resource: {e}"))?;
        ensure!(
            resource.len_bytes() == elems as u64 * 4,
            "resource of {} bytes",
            resource.len_bytes()
        );
        let offset = resource.offset_bytes();
        let seen = resource
            .with_buffer(move |_, o| o)
            .map_err(|e| format!("with_buffer: {e}"))?;
        ensure!(
            seen == offset,
            "with_buffer saw offset {seen}, the guard says {offset}"
        );
        // Every other handle is gone: the guard alone keeps the memory.
        c.memory_cleanup();
        c.sync().map_err(|e| e.to_string())?;
        let usage = c.memory_usage().map_err(|e| e.to_string())?;
        ensure!(
            usage.bytes_in_use > baseline.bytes_in_use,
            "the guarded memory was released: {usage} (baseline {baseline})"
        );
        let expected: Vec<u32> = data.iter().map(|x| x.wrapping_add(k)).collect();
        let read = c
            .read_one(resource.handle().clone())
            .map_err(|e| e.to_string())?;
        ensure!(
            read.to_elems::<u32>() == expected,
            "the guarded memory does not hold the launch's result"
        );
        drop(resource);
        expect_baseline(c, baseline)?;
        expect_clean(&session)
    })
}

pub(super) fn throughput_cache<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (
        prop::sample::select(vec![
            ThroughputKey::Arithmetic(ElemType::F32),
            ThroughputKey::Arithmetic(ElemType::U32),
            ThroughputKey::Memory,
        ]),
        1u32..=4,
        1u32..=16,
        any::<u64>(),
    );
    run_cases(
        config,
        "throughput_cache",
        strategy,
        |(key, workgroups, iterations, seed)| {
            let session = factory.open(seed);
            let c = &session.client;
            let config = KernelConfig {
                workgroups,
                iterations,
            };
            // Execution-only profiling counts the launches each call makes.
            c.set_profile_level(Some(ProfileLevel::ExecutionOnly));
            let first = c
                .measure_throughput(key, config)
                .map_err(|e| format!("measure_throughput: {e}"))?;
            let launched = c.profile_summary().map_err(|e| e.to_string())?.launches();
            ensure!(
                launched > 0 && first.per_second > 0.0 && !first.elapsed.is_zero(),
                "a measurement of {launched} launches gave {first:?}"
            );
            if first.method != c.timing_method() {
                return Err(format!("measured with {:?}", first.method));
            }
            c.set_profile_level(Some(ProfileLevel::ExecutionOnly));
            let bigger = KernelConfig {
                workgroups: workgroups * 2,
                iterations,
            };
            let again = dry_run(|| c.measure_throughput(key, bigger))
                .map_err(|e| format!("measure_throughput again: {e}"))?;
            c.sync().map_err(|e| e.to_string())?;
            let relaunched = c.profile_summary().map_err(|e| e.to_string())?.launches();
            c.set_profile_level(None);
            if again != first || relaunched != 0 {
                return Err(format!(
                    "second call: {again:?} after {relaunched} launches, first: {first:?}"
                ));
            }

            check_vector_sizes(c)?;
            expect_clean(&session)
        },
    )
}

/// `io_optimized_vector_sizes` of every element size: powers of two, widest first, down to 1,
/// none wider than the device's widest load or `MAX_VECTOR_SIZE`.
fn check_vector_sizes<D: Device>(c: &ComputeClient<D>) -> Result<(), String> {
    let load_width = c.properties().max_load_width_bytes as usize;
    for elem_size in [1usize, 2, 4, 8, 16, 32] {
        let sizes: Vec<usize> = c.io_optimized_vector_sizes(elem_size).collect();
        let widest = sizes.first().copied().unwrap_or(0);
        let halving = sizes.windows(2).all(|w| w[0] == 2 * w[1]);
        if sizes.last() != Some(&1)
            || !halving
            || (widest > 1 && widest * elem_size > load_width)
            || widest > lockstep::MAX_VECTOR_SIZE
        {
            return Err(format!(
                "io_optimized_vector_sizes({elem_size}) = {sizes:?} (load width {load_width})"
            ));
        }
    }
    Ok(())
}
