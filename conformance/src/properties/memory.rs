//! Memory: packed and pitched tensors, pool installation and reports, the device budget.

use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, Device, Handle, InstallMemoryPoolsError,
    MemoryBudgetError, MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutStrategy,
    MemoryPoolsConfig, OutOfMemoryReason, PoolKind, PoolLayout, ServerError, StreamId,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::data::random_bytes;
use super::{Failure, RunConfig, err, expect_baseline, expect_clean, run_cases};
use crate::factory::DeviceFactory;

fn descriptor() -> impl Strategy<Value = MemoryLayoutDescriptor> {
    (
        prop_oneof![
            Just(MemoryLayoutStrategy::Contiguous),
            Just(MemoryLayoutStrategy::Optimized)
        ],
        vec(0..=7usize, 0..=3),
        select(vec![1usize, 2, 4, 8, 12]),
    )
        .prop_map(|(strategy, shape, elem_size)| {
            MemoryLayoutDescriptor::new(strategy, shape, elem_size)
        })
}

pub(super) fn packed_tensors<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (
        vec(descriptor(), 1..=4),
        any::<u64>(),
        any::<prop::sample::Index>(),
    );
    run_cases(
        config,
        "packed_tensors",
        strategy,
        |(descriptors, seed, target)| {
            let session = factory.open(seed);
            let c = &session.client;
            let baseline = c.memory_usage().map_err(|e| e.to_string())?;
            let load_width = c.properties().max_load_width_bytes as usize;
            let data: Vec<Vec<u8>> = descriptors
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    random_bytes(
                        d.shape.iter().product::<usize>() * d.elem_size,
                        seed ^ i as u64,
                    )
                })
                .collect();
            let tensors = descriptors
                .iter()
                .cloned()
                .zip(data.iter().map(|d| Bytes::from(d.clone())))
                .collect();
            let layouts = c
                .create_tensors(tensors)
                .map_err(|e| format!("create_tensors: {e}"))?;
            for (d, layout) in descriptors.iter().zip(&layouts) {
                check_pitch(d, &layout.strides, load_width)?;
            }
            let read_all = |what: &str| {
                read_tensors(c, &descriptors, &layouts).map_err(|e| format!("{what}: {e}"))
            };
            ensure!(
                read_all("read_tensor")? == data,
                "tensors created together did not read back as written"
            );
            // Overwrite one tensor's whole memory: the others must not change.
            let t = target.index(layouts.len());
            let size = layouts[t].memory.size() as usize;
            c.write(&layouts[t].memory, Bytes::from(vec![0xAB; size]))
                .map_err(|e| format!("write: {e}"))?;
            let after = read_all("read after write")?;
            for (i, (before, now)) in data.iter().zip(&after).enumerate() {
                ensure!(
                    i == t || before == now,
                    "writing tensor {t} changed tensor {i}"
                );
            }
            drop(layouts);
            expect_baseline(c, baseline)?;
            expect_clean(&session)
        },
    )
}

/// A pitched layout (rows further apart than a row's elements) is only `Optimized`'s, its
/// pitch a whole number of the device's widest load and at least a row.
fn check_pitch(
    d: &MemoryLayoutDescriptor,
    strides: &[usize],
    load_width: usize,
) -> Result<(), String> {
    let n = d.shape.len();
    let pitched = n >= 2 && strides[n - 2] != d.shape[n - 1];
    if pitched {
        let pitch_bytes = strides[n - 2] * d.elem_size;
        ensure!(
            d.strategy != MemoryLayoutStrategy::Contiguous
                && pitch_bytes.is_multiple_of(load_width)
                && pitch_bytes >= d.shape[n - 1] * d.elem_size,
            "bad pitch {strides:?} for {d:?}"
        );
    }
    Ok(())
}

/// Every tensor's dense bytes, read together in one `read_tensor_async`.
fn read_tensors<D: Device>(
    c: &ComputeClient<D>,
    descriptors: &[MemoryLayoutDescriptor],
    layouts: &[MemoryLayout],
) -> Result<Vec<Vec<u8>>, lockstep::ServerError> {
    let descs = descriptors
        .iter()
        .zip(layouts)
        .map(|(d, l)| {
            CopyDescriptor::new(
                l.memory.clone(),
                d.shape.clone(),
                l.strides.clone(),
                d.elem_size,
            )
        })
        .collect();
    let bytes = lockstep::block_on(c.read_tensor_async(descs))?;
    Ok(bytes.into_iter().map(|b| b.into_vec()).collect())
}

fn pool_layout() -> impl Strategy<Value = PoolLayout> {
    (12u32..=20, 0u32..=4, 1u64..=8).prop_map(|(page_log, slice_shift, cap_pages)| {
        let page_bytes = 1u64 << page_log;
        PoolLayout {
            page_bytes,
            max_slice_bytes: page_bytes >> slice_shift,
            cap_bytes: page_bytes * cap_pages,
        }
    })
}

pub(super) fn pool_installation<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (vec(pool_layout(), 1..=3), 1usize..=4096, any::<u64>());
    run_cases(
        config,
        "pool_installation",
        strategy,
        |(pools, size, seed)| {
            let session = factory.open(seed);
            let mut c = session.client.clone();
            c.set_stream(StreamId(1));
            let layout = MemoryPoolsConfig::Pools(pools.clone());
            let expected: Vec<_> = pools
                .iter()
                .map(|p| (Some(p.page_bytes), Some(p.max_slice_bytes)))
                .collect();
            let live = c
                .create(Bytes::from(vec![7u8; size]))
                .map_err(err("create"))?;
            refused_while_in_use(&c, &layout, &live, size)?;

            // A stream first used after the install is built with the new layout.
            let mut fresh = c.clone();
            fresh.set_stream(StreamId(2));
            let fresh_report = fresh.memory_report().map_err(err("memory_report"))?;
            ensure!(
                sliced(&fresh_report) == expected,
                "a new stream did not get the installed layout:\n{fresh_report}"
            );

            drop(live);
            c.sync().map_err(err("sync"))?;
            installed_when_idle(&c, &layout, &expected)?;
            served_by_new_pools(&c, size)?;
            expect_clean(&session)
        },
    )
}

/// `install_memory_pools` of `layout` while `live` (`size` bytes of 7) is allocated on `c`'s
/// stream: refused as `PoolsInUse`, changing neither the stream's pools nor the live data.
fn refused_while_in_use<D: Device>(
    c: &ComputeClient<D>,
    layout: &MemoryPoolsConfig,
    live: &Handle,
    size: usize,
) -> Result<(), String> {
    let before = c.memory_report().map_err(err("memory_report"))?;
    match c.install_memory_pools(layout) {
        Err(InstallMemoryPoolsError::PoolsInUse { live_slices, .. }) if live_slices >= 1 => {}
        other => {
            return Err(format!(
                "install with a live slice: expected PoolsInUse, got {other:?}"
            ));
        }
    }
    ensure!(
        c.memory_report().map_err(err("memory_report"))? == before,
        "a refused install changed the stream's pools"
    );
    ensure!(
        c.read_one(live.clone()).map_err(err("read"))?[..] == vec![7u8; size][..],
        "a refused install disturbed live data"
    );
    Ok(())
}

/// `install_memory_pools` of `layout` on `c`'s idle stream: installed with the `expected`
/// sliced pools (page and slice sizes), every high-water mark reset.
fn installed_when_idle<D: Device>(
    c: &ComputeClient<D>,
    layout: &MemoryPoolsConfig,
    expected: &[(Option<u64>, Option<u64>)],
) -> Result<(), String> {
    c.install_memory_pools(layout)
        .map_err(|e| format!("install once idle: {e}"))?;
    let report = c.memory_report().map_err(err("memory_report"))?;
    ensure!(
        sliced(&report) == expected,
        "the calling stream did not get the installed layout:\n{report}"
    );
    ensure!(
        report
            .pools
            .iter()
            .filter(|p| p.kind != PoolKind::Persistent)
            .all(|p| p.bytes_in_use_peak == 0 && p.bytes_reserved_peak == 0),
        "install did not reset the high-water marks:\n{report}"
    );
    Ok(())
}

/// The new pools serve an allocation of `size` bytes (read back as written), their marks record
/// it, and after cleanup the stream holds no memory.
fn served_by_new_pools<D: Device>(c: &ComputeClient<D>, size: usize) -> Result<(), String> {
    let handle = c
        .create(Bytes::from(vec![9u8; size]))
        .map_err(err("create after install"))?;
    ensure!(
        c.read_one(handle.clone())
            .map_err(err("read after install"))?[..]
            == vec![9u8; size][..],
        "the installed pools returned wrong bytes"
    );
    let peak: u64 = c
        .memory_report()
        .map_err(err("memory_report"))?
        .pools
        .iter()
        .map(|p| p.bytes_in_use_peak)
        .sum();
    ensure!(
        peak >= size as u64,
        "high-water marks did not record a {size}-byte slice"
    );
    drop(handle);
    c.memory_cleanup();
    c.sync().map_err(err("sync"))?;
    let usage = c.memory_usage().map_err(err("memory_usage"))?;
    ensure!(
        usage.bytes_reserved == 0 && usage.bytes_in_use == 0,
        "memory did not return to zero: {usage}"
    );
    Ok(())
}

/// The (page, largest slice) sizes of `report`'s sliced pools, in order.
fn sliced(report: &lockstep::MemoryReport) -> Vec<(Option<u64>, Option<u64>)> {
    report
        .pools
        .iter()
        .filter(|p| p.kind == PoolKind::Sliced)
        .map(|p| (p.page_bytes, p.max_slice_bytes))
        .collect()
}

/// A budget bounds what every pool of the device reserves: an allocation that would pass it is
/// refused as `OutOfMemoryReason::Budget` naming it (one larger than the budget always is); a
/// budget below what the pools hold after cleanup is refused and the budget stays; once every
/// handle is gone, the first request that fitted fits again; without a budget, all fit.
pub(super) fn memory_budget<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (1u64..=48, vec(1u64..=(20 << 20), 1..=8), any::<u64>());
    run_cases(
        config,
        "memory_budget",
        strategy,
        |(budget_mib, sizes, seed)| {
            let session = factory.open(seed);
            let c = &session.client;
            let budget = budget_mib << 20;
            let baseline = c.memory_usage().map_err(|e| e.to_string())?;
            let reserved = |c: &ComputeClient<F::Device>| -> Result<u64, String> {
                Ok(c.memory_report()
                    .map_err(|e| e.to_string())?
                    .device_bytes_reserved)
            };
            if reserved(c)? > budget {
                return Ok(()); // The runtime's own pages already pass it; nothing to draw.
            }
            c.set_memory_budget(Some(budget))
                .map_err(|e| format!("set_memory_budget: {e}"))?;
            let mut live = Vec::new();
            let mut first_fit = None;
            for &size in &sizes {
                match c.empty(size as usize) {
                    Ok(handle) => {
                        ensure!(
                            size <= budget,
                            "{size} bytes allocated under a budget of {budget}"
                        );
                        first_fit.get_or_insert(size);
                        live.push(handle);
                    }
                    Err(ServerError::OutOfMemory(oom)) => match oom.reason {
                        OutOfMemoryReason::Budget { budget_bytes, .. } => ensure!(
                            budget_bytes == budget,
                            "a refusal names a budget of {budget_bytes}, not {budget}"
                        ),
                        other => return Err(format!("{size} bytes refused for {other}")),
                    },
                    Err(e) => return Err(format!("empty({size}) under a budget: {e}")),
                }
                let now = reserved(c)?;
                ensure!(
                    now <= budget,
                    "{now} bytes reserved under a budget of {budget}"
                );
            }
            let held = reserved(c)?;
            if held > 0 {
                match c.set_memory_budget(Some(held - 1)) {
                    Err(MemoryBudgetError::BelowReserved { budget_bytes, .. }) => {
                        ensure!(
                            budget_bytes == held - 1,
                            "BelowReserved names {budget_bytes}"
                        )
                    }
                    other => {
                        return Err(format!("a budget below {held} reserved bytes: {other:?}"));
                    }
                }
                let report = c.memory_report().map_err(|e| e.to_string())?;
                ensure!(
                    report.budget_bytes == Some(budget),
                    "a refused budget changed it"
                );
            }
            drop(live);
            expect_baseline(c, baseline)?;
            if let Some(size) = first_fit {
                c.empty(size as usize)
                    .map_err(|e| format!("{size} bytes no longer fit: {e}"))?;
            }
            c.set_memory_budget(None)
                .map_err(|e| format!("removing the budget: {e}"))?;
            let all: Result<Vec<_>, _> = sizes.iter().map(|&size| c.empty(size as usize)).collect();
            all.map_err(|e| format!("without a budget: {e}"))?;
            Ok(())
        },
    )
}
