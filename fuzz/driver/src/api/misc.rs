//! The rest of the client: memory accounting and pools, profiling and tuning, resources,
//! `exclusive`, and what a client says about its device and its peers.

use arbitrary::Arbitrary;
use lockstep::{
    Device, DeviceId, InstallMemoryPoolsError, KernelConfig, MAX_VECTOR_SIZE, MemoryAllocationMode,
    MemoryBudgetError, MemoryPoolsConfig, PoolKind, PoolLayout, PoolPreset, ProfileError,
    ProfileLevel, ServerError, StreamId, ThroughputKey, TimingMethod,
};
use lockstep_sim::SimDevice;

use super::Client;
use super::kernel::Elem;
use super::ops::{Op, Size, stream};
use super::world::{SLOTS, StreamState, World};
use crate::model::Known;

/// A memory call.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum MemoryOp {
    Usage {
        dev: u8,
    },
    Report {
        dev: u8,
        stream: u8,
    },
    Pools {
        dev: u8,
        stream: u8,
        config: Pools,
    },
    Budget {
        dev: u8,
        budget: Option<Budget>,
    },
    Cleanup {
        dev: u8,
    },
    Mode {
        dev: u8,
        stream: u8,
        persistent: bool,
    },
    /// `memory_persistent_allocation` around an `empty`, into a slot.
    Window {
        dev: u8,
        stream: u8,
        slot: u8,
        size: Size,
    },
}

/// A pool layout to install.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum Pools {
    /// `Default`, `ExclusivePages` or `LargePages` (`n % 3`; the simulator is too small for
    /// the last).
    Preset(u8),
    /// Up to 9 pools (8 are allowed), each from boundary classes.
    Pools(Vec<(u8, u8, u8)>),
}

/// A budget, from boundary classes.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(in crate::api) enum Budget {
    Zero,
    Page,
    Mebibytes(u8),
    Unbounded,
}

impl Budget {
    fn bytes(self) -> u64 {
        match self {
            Budget::Zero => 0,
            Budget::Page => 4096,
            Budget::Mebibytes(n) => u64::from(n % 64) << 20,
            Budget::Unbounded => u64::MAX,
        }
    }
}

/// A pool from boundary classes: a page of 0, 1, 4 KiB, 1 MiB, the device's largest
/// allocation or one byte more (`page % 6`); a slice of the page, half of it or one byte more
/// (`slice % 3`); a cap of one page less one byte, one page or four (`cap % 3`).
fn pool(properties: &lockstep::DeviceProperties, (page, slice, cap): (u8, u8, u8)) -> PoolLayout {
    let max = properties.max_allocation_bytes;
    let page_bytes = [0, 1, 4096, 1 << 20, max, max + 1][page as usize % 6];
    let max_slice_bytes = [page_bytes, page_bytes / 2, page_bytes + 1][slice as usize % 3];
    let cap_bytes = [page_bytes.saturating_sub(1), page_bytes, 4 * page_bytes][cap as usize % 3];
    PoolLayout {
        page_bytes,
        max_slice_bytes,
        cap_bytes,
    }
}

/// Whether `config` is a layout the device can honour, by `install_memory_pools`'s contract.
fn valid(config: &MemoryPoolsConfig, properties: &lockstep::DeviceProperties) -> bool {
    match config {
        MemoryPoolsConfig::Preset(PoolPreset::LargePages) => {
            properties.max_allocation_bytes >= 1 << 30
        }
        MemoryPoolsConfig::Preset(_) => true,
        MemoryPoolsConfig::Pools(pools) => {
            (1..=8).contains(&pools.len())
                && pools.iter().all(|p| {
                    p.page_bytes > 0
                        && p.max_slice_bytes <= p.page_bytes
                        && p.cap_bytes >= p.page_bytes
                        && p.page_bytes <= properties.max_allocation_bytes
                })
        }
    }
}

pub(super) fn memory(world: &mut World, op: &MemoryOp) -> Result<(), String> {
    match *op {
        MemoryOp::Usage { dev } => {
            let usage = world
                .client(world.device(dev), 0)
                .memory_usage()
                .map_err(|e| format!("memory_usage: {e:?}"))?;
            if usage.bytes_in_use > usage.bytes_reserved {
                return Err(format!("memory_usage: {usage}"));
            }
            Ok(())
        }
        MemoryOp::Report { dev, stream: s } => {
            let report = world
                .client(world.device(dev), stream(s))
                .memory_report()
                .map_err(|e| format!("memory_report: {e:?}"))?;
            let last = report.pools.last().map(|p| p.kind);
            let over = report
                .pools
                .iter()
                .any(|p| p.bytes_in_use > p.bytes_reserved);
            if last != Some(PoolKind::Persistent) || over {
                return Err(format!("memory_report: {report:?}"));
            }
            Ok(())
        }
        MemoryOp::Pools {
            dev,
            stream: s,
            ref config,
        } => install(world, world.device(dev), stream(s), config),
        MemoryOp::Budget { dev, budget } => {
            let device = world.device(dev);
            let bytes = budget.map(Budget::bytes);
            match world.client(device, 0).set_memory_budget(bytes) {
                Ok(()) => {
                    world.devices[device].limited |= bytes.is_some();
                    Ok(())
                }
                Err(MemoryBudgetError::BelowReserved { .. }) if bytes.is_some() => Ok(()),
                Err(err) => Err(format!("set_memory_budget({bytes:?}): {err:?}")),
            }
        }
        MemoryOp::Cleanup { dev } => {
            world.client(world.device(dev), 0).memory_cleanup();
            Ok(())
        }
        MemoryOp::Mode {
            dev,
            stream: s,
            persistent,
        } => {
            let mode = if persistent {
                MemoryAllocationMode::Persistent
            } else {
                MemoryAllocationMode::Auto
            };
            world
                .client(world.device(dev), stream(s))
                .allocation_mode(mode);
            Ok(())
        }
        MemoryOp::Window {
            dev,
            stream: s,
            slot,
            size,
        } => {
            let device = world.device(dev);
            let c = world.client(device, stream(s));
            let result = c.memory_persistent_allocation(size.bytes(), |bytes| c.empty(bytes));
            match (result, size) {
                (Ok(handle), Size::Small(_) | Size::Boundary { .. }) => {
                    world.fill_slot(slot, device, handle, Known::unwritten(size.bytes()));
                    Ok(())
                }
                (Err(ServerError::OutOfMemory(_)), Size::Overflowing { .. }) => Ok(()),
                (Err(ServerError::OutOfMemory(_)), _) if world.devices[device].limited => Ok(()),
                (result, _) => Err(format!("a persistent empty({}): {result:?}", size.bytes())),
            }
        }
    }
}

/// `install_memory_pools`: an invalid layout is refused before anything changes; a valid one
/// installs, unless the stream's pools hold live slices or the stream a failure.
fn install(world: &mut World, device: usize, s: usize, config: &Pools) -> Result<(), String> {
    let c = world.client(device, s);
    let config = match config {
        Pools::Preset(n) => MemoryPoolsConfig::Preset(
            [
                PoolPreset::Default,
                PoolPreset::ExclusivePages,
                PoolPreset::LargePages,
            ][*n as usize % 3],
        ),
        Pools::Pools(pools) => MemoryPoolsConfig::Pools(
            pools
                .iter()
                .take(9)
                .map(|&p| pool(c.properties(), p))
                .collect(),
        ),
    };
    let valid = valid(&config, c.properties());
    let state = world.stream(device, s);
    match c.install_memory_pools(&config) {
        Ok(()) if valid => {
            world.devices[device].limited = true;
            Ok(())
        }
        Err(InstallMemoryPoolsError::InvalidLayout(_)) if !valid => Ok(()),
        Err(InstallMemoryPoolsError::PoolsInUse { .. }) if valid => Ok(()),
        Err(InstallMemoryPoolsError::StreamUnavailable) if valid && state.dirty => Ok(()),
        result => Err(format!(
            "install_memory_pools({config:?}), valid {valid}: {result:?}"
        )),
    }
}

/// A profiling or tuning call.
#[derive(Arbitrary, Debug)]
pub(in crate::api) enum ProfileOp {
    /// `profile` of nothing or of an allocation, its duration resolved or dropped.
    Profile {
        dev: u8,
        stream: u8,
        allocate: bool,
        resolve: bool,
    },
    /// `set_profile_level`.
    Level {
        dev: u8,
        level: Option<u8>,
    },
    Summary {
        dev: u8,
    },
    /// `measure_throughput` with a tiny config, inside `dry_run` or not.
    Throughput {
        dev: u8,
        stream: u8,
        memory: bool,
        elem: Elem,
        workgroups: u8,
        iterations: u8,
        dry: bool,
    },
    /// `io_optimized_vector_sizes` of an element size from boundary classes (`n % 8`).
    VectorSizes {
        dev: u8,
        elem_size: u8,
    },
}

pub(super) fn profile(world: &mut World, op: &ProfileOp) -> Result<(), String> {
    match *op {
        ProfileOp::Profile {
            dev,
            stream: s,
            allocate,
            resolve,
        } => timed(world, world.device(dev), stream(s), allocate, resolve),
        ProfileOp::Level { dev, level } => {
            let level = level.map(|n| {
                [
                    ProfileLevel::Basic,
                    ProfileLevel::Medium,
                    ProfileLevel::Full,
                    ProfileLevel::ExecutionOnly,
                ][n as usize % 4]
            });
            world.client(world.device(dev), 0).set_profile_level(level);
            Ok(())
        }
        ProfileOp::Summary { dev } => world
            .client(world.device(dev), 0)
            .profile_summary()
            .map(|_| ())
            .map_err(|e| format!("profile_summary: {e:?}")),
        ProfileOp::Throughput { .. } => throughput(world, op),
        ProfileOp::VectorSizes { dev, elem_size } => {
            let elem_size = [0, 1, 2, 4, 8, 16, 17, usize::MAX][elem_size as usize % 8];
            let c = world.client(world.device(dev), 0);
            vector_sizes(c, elem_size)
        }
    }
}

/// The method a device of `timestamps` times work with.
fn method(timestamps: bool) -> TimingMethod {
    if timestamps {
        TimingMethod::Device
    } else {
        TimingMethod::System
    }
}

/// Checks a profiling call's failure: refused while the stream captures, or a pending
/// failure of a dirty stream.
fn check_profile(state: &StreamState, what: &str, err: &ProfileError) -> Result<(), String> {
    match err {
        ProfileError::Server { source, .. } => state.check_blocking(what, source),
        err => Err(format!("{what}: {err:?}")),
    }
}

fn timed(
    world: &mut World,
    device: usize,
    s: usize,
    allocate: bool,
    resolve: bool,
) -> Result<(), String> {
    let c = world.client(device, s);
    let result = c.profile(
        || {
            if allocate {
                c.empty(64).map(|_| ())
            } else {
                Ok(())
            }
        },
        "drawn",
    );
    let state = world.stream(device, s);
    let (output, duration) = match result {
        Ok(_) if state.capturing() => return Err("profile inside a capture window".into()),
        Ok(profiled) => profiled,
        Err(err) => return check_profile(state, "profile", &err),
    };
    match output {
        Err(ServerError::OutOfMemory(_)) if world.devices[device].limited => {}
        Err(err) => return Err(format!("the profiled empty: {err:?}")),
        Ok(()) => {}
    }
    if c.timing_method() != method(world.devices[device].timestamps)
        || duration.timing_method() != c.timing_method()
    {
        return Err(format!("timing method {:?}", duration.timing_method()));
    }
    if !resolve {
        return Ok(());
    }
    match duration.resolve_blocking() {
        Ok(_) => Ok(()),
        Err(err) => check_profile(state, "resolve_blocking", &err),
    }
}

fn throughput(world: &mut World, op: &ProfileOp) -> Result<(), String> {
    let ProfileOp::Throughput {
        dev,
        stream: s,
        memory,
        elem,
        workgroups,
        iterations,
        dry,
    } = *op
    else {
        unreachable!("called for throughput only");
    };
    let (device, s) = (world.device(dev), stream(s));
    let key = if memory {
        ThroughputKey::Memory
    } else {
        ThroughputKey::Arithmetic(elem.ty())
    };
    let config = KernelConfig {
        workgroups: 1 + u32::from(workgroups % 2),
        iterations: u32::from(iterations % 4),
    };
    let c = world.client(device, s);
    let result = if dry {
        lockstep::dry_run(|| c.measure_throughput(key, config))
    } else {
        c.measure_throughput(key, config)
    };
    // It creates and launches on the stream: inside a window that is a write, and a launch.
    world.stream_mut(device, s).note_write(false);
    let state = world.stream(device, s);
    let unsupported = !memory && elem.ty().is_half() && !world.devices[device].half_floats;
    match result {
        Ok(value) if value.per_second.is_finite() && value.per_second >= 0.0 => Ok(()),
        Err(ProfileError::Server {
            source: ServerError::Io(lockstep::IoError::InvalidKernel(_)),
            ..
        }) if unsupported => Ok(()),
        Err(ProfileError::Server {
            source: ServerError::OutOfMemory(_),
            ..
        }) if world.devices[device].limited => Ok(()),
        Err(err) => check_profile(state, "measure_throughput", &err),
        Ok(value) => Err(format!("measure_throughput: {value:?}")),
    }
}

/// Vector sizes are powers of two, widest first, halving down to 1, no wider than
/// `MAX_VECTOR_SIZE` nor (but for 1) than the device's widest load.
fn vector_sizes(c: &Client, elem_size: usize) -> Result<(), String> {
    let sizes: Vec<usize> = c.io_optimized_vector_sizes(elem_size).collect();
    let load = c.properties().max_load_width_bytes as usize;
    let halving = sizes.windows(2).all(|w| w[0] == 2 * w[1]);
    let widest = sizes.first().copied().unwrap_or(0);
    let fits =
        widest == 1 || (widest <= MAX_VECTOR_SIZE && widest.saturating_mul(elem_size) <= load);
    if sizes.last() != Some(&1) || !halving || !fits {
        return Err(format!("io_optimized_vector_sizes({elem_size}): {sizes:?}"));
    }
    Ok(())
}

pub(super) fn step(world: &mut World, op: &Op) -> Result<(), String> {
    match *op {
        Op::Resource {
            slot,
            stream: s,
            hold,
        } => resource(world, slot, stream(s), hold),
        Op::Exclusive {
            dev,
            stream: s,
            value,
        } => {
            let c = world.client(world.device(dev), stream(s));
            match c.exclusive(|| value.wrapping_mul(3)) {
                Ok(v) if v == value.wrapping_mul(3) => Ok(()),
                result => Err(format!("exclusive: {result:?}")),
            }
        }
        Op::Inspect { dev, stream: s } => inspect(world, world.device(dev), stream(s)),
        _ => unreachable!("ops::step routes only these operations here"),
    }
}

/// `get_resource` of a slot: the guard names the handle's bytes, and `with_buffer` runs on
/// the device with the guard's offset. With `hold`, the slot's handle drops first: the guard
/// keeps the memory.
fn resource(world: &mut World, slot: u8, s: usize, hold: bool) -> Result<(), String> {
    let Some(source) = world.slot(slot) else {
        return Ok(());
    };
    let (device, handle) = (source.device, source.handle.clone());
    let state = world.stream(device, s);
    let guard = match world.client(device, s).get_resource(handle.clone()) {
        Ok(_) if state.capturing() => return Err("get_resource inside a capture window".into()),
        Ok(guard) => guard,
        Err(err) => return state.check_blocking("get_resource", &err),
    };
    if guard.len_bytes() != handle.size() || guard.handle().size() != handle.size() {
        return Err(format!(
            "a resource of {} bytes for {handle:?}",
            guard.len_bytes()
        ));
    }
    if hold {
        world.slots[slot as usize % SLOTS] = None;
    }
    drop(handle);
    let offset = guard.offset_bytes();
    match guard.with_buffer(|_, offset| offset) {
        Ok(o) if o == offset => Ok(()),
        result => Err(format!("with_buffer: {result:?}, the guard says {offset}")),
    }
}

/// What a client says of its device: its stream, its properties, and its place among its
/// cluster's devices.
fn inspect(world: &World, device: usize, s: usize) -> Result<(), String> {
    let state = &world.devices[device];
    let c = world.client(device, s);
    let cluster = &world.clusters[state.cluster];
    let ordinal = cluster
        .iter()
        .position(|&d| d == device)
        .expect("a device is in its cluster") as u32;
    let type_id = SimDevice::TYPE_ID;
    let peers: Vec<DeviceId> = (0..cluster.len() as u32)
        .map(|index| DeviceId { type_id, index })
        .collect();
    let others_distinct = (0..world.devices.len())
        .filter(|&d| d != device && world.devices[d].started())
        .all(|d| world.client(d, 0).device_id() != c.device_id());
    let features = c.features();
    let checks = [
        ("stream_id", c.stream_id() == StreamId(s as u64)),
        ("device_id", others_distinct),
        (
            "info",
            c.info() == c.properties() && features == &c.properties().features,
        ),
        (
            "features",
            features.f16 == state.half_floats && features.timestamps == state.timestamps,
        ),
        (
            "peer_id",
            c.peer_id()
                == DeviceId {
                    type_id,
                    index: ordinal,
                },
        ),
        ("enumerate_all_devices", c.enumerate_all_devices() == peers),
        (
            "enumerate_devices",
            c.enumerate_devices(type_id) == peers && c.enumerate_devices(type_id ^ 1).is_empty(),
        ),
        (
            "device_count",
            c.device_count(type_id) == peers.len() && c.device_count_total() == peers.len(),
        ),
        ("supports_collectives", c.supports_collectives()),
        ("properties_mut", c.clone().properties_mut().is_none()),
        ("load", Client::load(u32::MAX - s as u32).is_none()),
    ];
    match checks.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(format!("{what} of device {device} is wrong")),
        None => Ok(()),
    }
}
