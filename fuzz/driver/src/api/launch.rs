//! Launches: of drawn kernels, whose refusal at the call the oracle predicts from the
//! arguments (in the order `ComputeClient::launch` checks them); of a counting kernel, whose
//! invocations must be exactly what its count asks (none for a zero, or for a dynamic count
//! above the device's maximum); and of a copy between two views of one packed allocation.

use std::cell::RefCell;
use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use lockstep::kernel::{Access, Axis, ElemType, Kernel, KernelBuilder, Scalar};
use lockstep::{
    Bytes, CubeCount, Handle, IoError, KernelArguments, MemoryLayoutDescriptor,
    MemoryLayoutStrategy, dry_run,
};

use super::data::create_on;
use super::kernel::{Built, Elem};
use super::ops::stream;
use super::world::{Capture, KERNELS, World};

/// Most invocations a counting launch may run: larger counts are not launched (one launch
/// of the device's maximum count along one axis of a one-invocation workgroup still is).
const COUNT_CAP: u128 = 1 << 16;

/// A launch of a built kernel.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct LaunchOp {
    kernel: u8,
    /// The device: below 16, `dev` (likely another than the buffers'); else the first bound
    /// buffer's.
    dev: u8,
    stream: u8,
    count: Count,
    /// Slots of the bindings (an empty slot binds a fresh 64-byte buffer).
    args: [u8; 4],
    /// Below 224, as many bindings as declared; else `n % 6`.
    arity: u8,
    params: [Param; 2],
    /// Below 224, as many parameters as declared; else `n % 4`.
    param_arity: u8,
    mode: Mode,
}

/// A static count, or the same counts read from a buffer.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Count {
    /// `[1 + n % 2, 1, 1]`.
    Small(u8),
    /// A zero along one axis: a no-op.
    Zero(u8),
    /// The device's maximum plus one along one axis: refused when static.
    Above(u8),
}

impl Count {
    fn dims(self, max: [u32; 3]) -> [u32; 3] {
        let mut dims = [1, 1, 1];
        match self {
            Count::Small(n) => dims[0] = 1 + u32::from(n % 2),
            Count::Zero(axis) => dims[axis as usize % 3] = 0,
            Count::Above(axis) => {
                let axis = axis as usize % 3;
                dims[axis] = max[axis].saturating_add(1);
            }
        }
        dims
    }
}

/// A parameter's value.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Param {
    /// Of the declared type, from these bits.
    Declared(u32),
    /// Of any type: refused when it is not the declared one.
    Any(Elem, u32),
}

/// How the launch is made.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Mode {
    Plain,
    /// Inside `dry_run`: nothing executes, memory keeps its bytes.
    Dry,
    /// After `compile`.
    Compiled,
    /// With the count read from a buffer.
    Dynamic,
}

/// Why the oracle expects a launch to be refused at the call.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    Kernel,
    Launch,
    WrongDevice,
}

/// A launch's arguments, as bound.
struct Bound {
    device: usize,
    handles: Vec<Handle>,
    /// The slot each handle came from, if any.
    slots: Vec<Option<u64>>,
    params: Vec<Scalar>,
}

pub(super) fn launch(world: &mut World, op: &LaunchOp) -> Result<(), String> {
    let Some(built) = &world.kernels[op.kernel as usize % KERNELS] else {
        return Ok(());
    };
    let (kernel, built) = (built.kernel.clone(), summary(built));
    let Some(bound) = bind(world, op, &built)? else {
        return Ok(());
    };
    let s = stream(op.stream);
    let c = world.client(bound.device, s);
    let dims = op.count.dims(c.properties().max_workgroups);
    let count = match op.mode {
        Mode::Dynamic => {
            let counts: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
            let Some(h) = create_on(world, (bound.device, s), counts, "create counts")? else {
                return Ok(());
            };
            CubeCount::Dynamic(h)
        }
        _ => CubeCount::Static(dims[0], dims[1], dims[2]),
    };
    let expected = refusal(world, &built, &bound, &count);
    if matches!(op.mode, Mode::Compiled) {
        compile(world, bound.device, s, &kernel, &built)?;
    }
    let args = KernelArguments {
        bindings: bound.handles.clone(),
        params: bound.params.clone(),
    };
    let c = world.client(bound.device, s);
    let result = match op.mode {
        Mode::Dry => dry_run(|| c.launch(&kernel, count.clone(), args)),
        _ => c.launch(&kernel, count.clone(), args),
    };
    match (result, expected) {
        (Ok(()), None) => {
            let runs = !matches!(count, CubeCount::Static(..)) || !dims.contains(&0);
            if runs && !matches!(op.mode, Mode::Dry) {
                launched(world, bound.device, s, &built, &bound.slots);
            }
            Ok(())
        }
        (Err(IoError::InvalidKernel(_)), Some(Refusal::Kernel))
        | (Err(IoError::InvalidLaunch { .. }), Some(Refusal::Launch))
        | (Err(IoError::WrongDevice { .. }), Some(Refusal::WrongDevice)) => Ok(()),
        (result, expected) => Err(format!(
            "launch of {:?} with counts {dims:?}: expected {expected:?}, got {result:?}",
            built.bindings
        )),
    }
}

/// What a launch needs of a built kernel.
struct Summary {
    bindings: Vec<(ElemType, Access)>,
    params: Vec<ElemType>,
    shared_bytes: u64,
    uses_half: bool,
}

fn summary(built: &Built) -> Summary {
    Summary {
        bindings: built.bindings.clone(),
        params: built.params.clone(),
        shared_bytes: built.shared_bytes,
        uses_half: built.uses_half,
    }
}

/// The arguments `op` draws for `built`; `None` when a fresh buffer cannot be allocated.
fn bind(world: &mut World, op: &LaunchOp, built: &Summary) -> Result<Option<Bound>, String> {
    let arity = if op.arity < 224 {
        built.bindings.len()
    } else {
        op.arity as usize % 6
    };
    let first = op
        .args
        .iter()
        .find_map(|&a| world.slot(a))
        .map(|s| s.device);
    let device = match first {
        Some(device) if op.dev >= 16 => device,
        _ => world.device(op.dev),
    };
    let mut handles = Vec::with_capacity(arity);
    let mut slots = Vec::with_capacity(arity);
    for k in 0..arity {
        match world.slot(op.args[k % 4]) {
            Some(slot) => {
                handles.push(slot.handle.clone());
                slots.push(Some(slot.id));
            }
            None => {
                let at = (device, stream(op.stream));
                let Some(h) = create_on(world, at, vec![0; 64], "create a binding")? else {
                    return Ok(None);
                };
                handles.push(h);
                slots.push(None);
            }
        }
    }
    let param_arity = if op.param_arity < 224 {
        built.params.len()
    } else {
        op.param_arity as usize % 4
    };
    let params = (0..param_arity)
        .map(|k| match (op.params[k % 2], built.params.get(k)) {
            (Param::Declared(bits), Some(&elem)) => Scalar::from_bits(elem, bits),
            (Param::Declared(bits), None) => Scalar::U32(bits),
            (Param::Any(elem, bits), _) => Scalar::from_bits(elem.ty(), bits),
        })
        .collect();
    Ok(Some(Bound {
        device,
        handles,
        slots,
        params,
    }))
}

/// The first refusal `ComputeClient::launch` must give, in its order: the kernel against the
/// device, the argument counts and types, each binding (its device, whole elements, aliasing
/// a writable binding), then the count.
fn refusal(world: &World, built: &Summary, bound: &Bound, count: &CubeCount) -> Option<Refusal> {
    let device = &world.devices[bound.device];
    let properties = device.clients()[0].properties();
    if (built.uses_half && !device.half_floats)
        || built.shared_bytes > properties.max_shared_memory_bytes
    {
        return Some(Refusal::Kernel);
    }
    let params_match = bound.params.len() == built.params.len()
        && bound
            .params
            .iter()
            .zip(&built.params)
            .all(|(p, &e)| p.elem_type() == e);
    if bound.handles.len() != built.bindings.len() || !params_match {
        return Some(Refusal::Launch);
    }
    let id = device.clients()[0].device_id();
    for (k, (handle, &(elem, access))) in bound.handles.iter().zip(&built.bindings).enumerate() {
        if handle.device() != id {
            return Some(Refusal::WrongDevice);
        }
        if handle.size() % elem.size_bytes() as u64 != 0 {
            return Some(Refusal::Launch);
        }
        let aliased = (0..k).any(|j| {
            let writable = access == Access::ReadWrite || built.bindings[j].1 == Access::ReadWrite;
            bound.slots[j].is_some()
                && bound.slots[j] == bound.slots[k]
                && handle.size() > 0
                && writable
        });
        if aliased {
            return Some(Refusal::Launch);
        }
    }
    match count {
        CubeCount::Static(x, y, z) if ![x, y, z].contains(&&0) => {
            let above = [*x, *y, *z]
                .iter()
                .zip(properties.max_workgroups)
                .any(|(&c, max)| c > max);
            above.then_some(Refusal::Launch)
        }
        CubeCount::Dynamic(h) if h.device() != id => Some(Refusal::WrongDevice),
        _ => None,
    }
}

/// `compile` of `kernel` before its launch: `Ok`, unless the device cannot run it (types it
/// lacks, more shared memory than it has), which is the compiler's error.
fn compile(
    world: &World,
    device: usize,
    s: usize,
    kernel: &Kernel,
    built: &Summary,
) -> Result<(), String> {
    let c = world.client(device, s);
    let unfit = (built.uses_half && !world.devices[device].half_floats)
        || built.shared_bytes > c.properties().max_shared_memory_bytes;
    match c.compile(kernel) {
        Ok(()) if !unfit => Ok(()),
        Err(lockstep::ServerError::Device {
            error: lockstep::DeviceError::Compile { .. },
            ..
        }) if unfit => Ok(()),
        result => Err(format!(
            "compile (the device cannot run it: {unfit}): {result:?}"
        )),
    }
}

/// A drawn kernel's launch was accepted: the buffers it may write hold unknown bytes, and its
/// stream may fail (an access out of range); inside a capture window it only records.
fn launched(world: &mut World, device: usize, s: usize, built: &Summary, slots: &[Option<u64>]) {
    let writes: Vec<u64> = (slots.iter().zip(&built.bindings))
        .filter(|(_, (_, access))| *access == Access::ReadWrite)
        .filter_map(|(slot, _)| *slot)
        .collect();
    world.forget(&writes);
    let state = world.stream_mut(device, s);
    match &mut state.capture {
        Capture::Capturing {
            writes: captured, ..
        } => captured.extend(writes),
        _ => state.dirty = true,
    }
}

/// A counting kernel's launch: every invocation adds 1 to a counter.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct CountOp {
    dev: u8,
    stream: u8,
    counts: [CountClass; 3],
    /// The workgroup size, from [`COUNT_WORKGROUPS`].
    workgroup: u8,
    dynamic: bool,
    /// Below 16, the count buffer holds 8 bytes: refused with `OutOfRange`.
    short: u8,
    dry: bool,
}

/// A workgroup count along one axis, from boundary classes. `u32::MAX` is drawn three times
/// as often as the others: counts whose product overflows are what a simulator that runs
/// counts above its maximum fails on at once (a count just above it runs for long).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum CountClass {
    Zero,
    /// `1 + n % 3`.
    Small(u8),
    /// The device's maximum.
    Max,
    /// The maximum plus one.
    Above,
    Huge,
    Huge2,
    Huge3,
    Any(u32),
}

impl CountClass {
    fn value(self, max: u32) -> u32 {
        match self {
            CountClass::Zero => 0,
            CountClass::Small(n) => 1 + u32::from(n % 3),
            CountClass::Max => max,
            CountClass::Above => max.saturating_add(1),
            CountClass::Huge | CountClass::Huge2 | CountClass::Huge3 => u32::MAX,
            CountClass::Any(n) => n,
        }
    }
}

/// Workgroup sizes of the counting kernel.
const COUNT_WORKGROUPS: [[u32; 3]; 5] = [[1, 1, 1], [2, 1, 1], [4, 2, 1], [64, 1, 1], [2, 2, 2]];

thread_local! {
    /// The driver's own kernels, by name and workgroup size: built once per thread, not per
    /// input (hashing a kernel costs more than a launch).
    static FIXED: RefCell<BTreeMap<(&'static str, [u32; 3]), Kernel>> = const { RefCell::new(BTreeMap::new()) };
}

/// The driver's kernel `name` (`count`: every invocation adds 1 to a counter; `copy`: `dst[i] =
/// src[i]` where both have an element `i`) of workgroup size `size`.
fn fixed(name: &'static str, size: [u32; 3]) -> Result<Kernel, String> {
    if let Some(kernel) = FIXED.with_borrow(|fixed| fixed.get(&(name, size)).cloned()) {
        return Ok(kernel);
    }
    let mut k = KernelBuilder::new(name, size);
    match name {
        "count" => {
            let counter = k.binding(ElemType::U32, Access::ReadWrite);
            k.atomic_add(counter, 0u32, 1u32);
        }
        _ => {
            let src = k.binding(ElemType::U32, Access::Read);
            let dst = k.binding(ElemType::U32, Access::ReadWrite);
            let i = k.global_id(Axis::X);
            k.if_(i.lt(dst.len()).and(i.lt(src.len())), |k| {
                k.store(dst, i, src.load(i))
            });
        }
    }
    let kernel = k
        .build()
        .map_err(|e| format!("the driver's `{name}` kernel: {e}"))?;
    FIXED.with_borrow_mut(|fixed| fixed.insert((name, size), kernel.clone()));
    Ok(kernel)
}

/// Counts exactly as many invocations as the count asks: `x * y * z * workgroup` when every
/// count is 1 to the device's maximum, none when one is zero or (dynamic) above it; a static
/// count above it is refused at the call.
pub(super) fn count(world: &mut World, op: &CountOp) -> Result<(), String> {
    let (device, s) = (world.device(op.dev), stream(op.stream));
    let size = COUNT_WORKGROUPS[op.workgroup as usize % COUNT_WORKGROUPS.len()];
    let max = world.client(device, s).properties().max_workgroups;
    let dims: Vec<u32> = (op.counts.iter().zip(max))
        .map(|(c, max)| c.value(max))
        .collect();
    let in_range = dims.iter().zip(max).all(|(&d, max)| (1..=max).contains(&d));
    let total =
        dims.iter().map(|&d| u128::from(d)).product::<u128>() * super::kernel::invocations(size);
    if in_range && total > COUNT_CAP {
        return Ok(());
    }
    let kernel = fixed("count", size)?;
    let c = world.client(device, s).clone();
    let Some(counter) = create_on(world, (device, s), vec![0; 4], "create a counter")? else {
        return Ok(());
    };
    let short = op.dynamic && op.short < 16;
    let count = if op.dynamic {
        let mut bytes: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        bytes.truncate(if short { 8 } else { 12 });
        let Some(h) = create_on(world, (device, s), bytes, "create counts")? else {
            return Ok(());
        };
        CubeCount::Dynamic(h)
    } else {
        CubeCount::Static(dims[0], dims[1], dims[2])
    };
    let args = KernelArguments::new().binding(&counter);
    let result = if op.dry {
        dry_run(|| c.launch(&kernel, count, args))
    } else {
        c.launch(&kernel, count, args)
    };
    let above = dims.iter().zip(max).any(|(&d, max)| d > max);
    // `launch` checks a static count (a zero is a no-op, above the maximum is refused) and a
    // dynamic count's buffer (12 bytes at least); the counts of a dynamic one only run.
    let refused_static = !op.dynamic && above && !dims.contains(&0);
    match result {
        Ok(()) if !short && !refused_static => {}
        Err(IoError::OutOfRange { .. }) if short => return Ok(()),
        Err(IoError::InvalidLaunch { .. }) if refused_static => return Ok(()),
        result => {
            return Err(format!(
                "count {dims:?} (dynamic {}): {result:?}",
                op.dynamic
            ));
        }
    }
    let expected = if in_range && !op.dry { total as u32 } else { 0 };
    check_counter(world, device, s, counter, expected, &dims)
}

/// Reads the counter, unless the stream captures (the launch then only recorded).
fn check_counter(
    world: &World,
    device: usize,
    s: usize,
    counter: Handle,
    expected: u32,
    dims: &[u32],
) -> Result<(), String> {
    let state = world.stream(device, s);
    if state.capturing() {
        return Ok(());
    }
    match world.client(device, s).read_one(counter) {
        Ok(bytes) if bytes[..] == expected.to_le_bytes() => Ok(()),
        Ok(bytes) => Err(format!(
            "count {dims:?} ran {:?} invocations, expected {expected}",
            bytes.to_elems::<u32>()
        )),
        Err(err) => state.check_blocking("read of a counter", &err),
    }
}

/// Two views of one packed allocation.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct PackedOp {
    dev: u8,
    stream: u8,
    /// The views' lengths in `u32`s: `1 + n % 16`.
    lens: [u8; 2],
    /// Which view is bound twice.
    twice: bool,
}

/// Copies view 0 into view 1 of one packing: the views share no byte, so one launch takes
/// them together, one of them writable; one view bound twice, once writable, is refused.
pub(super) fn packed(world: &mut World, op: &PackedOp) -> Result<(), String> {
    let (device, s) = (world.device(op.dev), stream(op.stream));
    let lens = op.lens.map(|n| 1 + n as usize % 16);
    let values: Vec<Vec<u32>> = (0..2)
        .map(|v| (0..lens[v] as u32).map(|i| 100 * v as u32 + i).collect())
        .collect();
    let kernel = fixed("copy", [16, 1, 1])?;
    let c = world.client(device, s).clone();
    let tensors = (0..2)
        .map(|v| {
            let layout =
                MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![lens[v]], 4);
            (layout, Bytes::from_elems(&values[v]))
        })
        .collect();
    let views = match c.create_tensors(tensors) {
        Ok(views) => {
            world.stream_mut(device, s).note_write(false);
            views
        }
        Err(lockstep::ServerError::OutOfMemory(_)) if world.devices[device].limited => {
            return Ok(());
        }
        Err(err) => return Err(format!("create_tensors of two views: {err:?}")),
    };
    let (src, dst) = (&views[0].memory, &views[1].memory);
    let grid = CubeCount::Static(1, 1, 1);
    let both = KernelArguments::new().binding(src).binding(dst);
    c.launch(&kernel, grid.clone(), both)
        .map_err(|e| format!("two views sharing no byte refused: {e:?}"))?;
    let view = if op.twice { dst } else { src };
    match c.launch(
        &kernel,
        grid,
        KernelArguments::new().binding(view).binding(view),
    ) {
        Err(IoError::InvalidLaunch { .. }) => {}
        result => return Err(format!("one view bound twice, once writable: {result:?}")),
    }
    let state = world.stream(device, s);
    if state.capturing() {
        return Ok(());
    }
    let copied = lens[0].min(lens[1]);
    let mut expected = values[1].clone();
    expected[..copied].copy_from_slice(&values[0][..copied]);
    match c.read_one(dst.clone()) {
        Ok(bytes) if bytes.to_elems::<u32>() == expected => Ok(()),
        Ok(bytes) => Err(format!(
            "copy between views gave {:?}, expected {expected:?}",
            bytes.to_elems::<u32>()
        )),
        Err(err) => state.check_blocking("read of a packed view", &err),
    }
}
