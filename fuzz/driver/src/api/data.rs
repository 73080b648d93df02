//! Allocation and transfer calls, checked against the byte model: what `create` and `write`
//! put, `read` and its tensor and lazy forms must give back, unless the stream's capture
//! window or a pending failure excuses an error.

use lockstep::{
    Bytes, CopyDescriptor, Handle, IoError, MemoryLayoutDescriptor, MemoryLayoutStrategy,
    ServerError, block_on,
};

use super::ops::{ForeignCall, Layout, Op, ReadHow, Size, TensorHow, stream};
use super::world::{SLOTS, StreamState, World};
use crate::model::{Known, element_offset, nests};
use crate::{dims, fill};

/// Largest `create` of an input, in bytes.
const MAX_CREATE: usize = 1024;

pub(super) fn step(world: &mut World, op: &Op) -> Result<(), String> {
    match *op {
        Op::Create {
            slot,
            dev,
            stream: s,
            len,
            fill: f,
            from_slice,
        } => create(
            world,
            (slot, world.device(dev), stream(s)),
            len,
            f,
            from_slice,
        ),
        Op::Empty {
            slot,
            dev,
            stream: s,
            size,
        } => empty(world, (slot, world.device(dev), stream(s)), size),
        Op::Write {
            slot,
            stream: s,
            at,
            len,
            fill: f,
            whole,
        } => {
            let Some(target) = world.slot(slot) else {
                return Ok(());
            };
            let size = target.bytes.len();
            let offset = if whole { 0 } else { at.bytes(size) };
            let room = (size as u64).saturating_sub(offset) as usize;
            write(world, slot, stream(s), offset, &fill(len.bytes(room), f))
        }
        Op::Read {
            slot,
            other,
            stream: s,
            how,
        } => read(world, slot, other, stream(s), how),
        Op::ReadTensor {
            slot,
            stream: s,
            ref layout,
            how,
        } => read_tensor(world, slot, stream(s), layout, how),
        Op::CreateTensor {
            slot,
            dev,
            stream: s,
            ref shape,
            elem,
            extra,
            how,
        } => {
            let at = (slot, world.device(dev), stream(s));
            let tensor = (dims(shape, 3), 1 + elem as usize % 16);
            create_tensor(world, at, tensor, extra as isize % 3, how % 3)
        }
        Op::CreateTensors {
            slot,
            dev,
            stream: s,
            ref tensors,
            how,
        } => create_tensors(
            world,
            (slot, world.device(dev), stream(s)),
            tensors,
            how % 3,
        ),
        Op::WriteTensor {
            slot,
            stream: s,
            ref layout,
            extra,
            fill: f,
            twice,
        } => write_tensor(world, slot, stream(s), layout, (extra, f), twice),
        Op::Release { slot } => {
            world.slots[slot as usize % SLOTS] = None;
            Ok(())
        }
        Op::Foreign { slot, dev, call } => foreign(world, slot, dev, call),
        Op::Lazy {
            slot,
            stream: s,
            ref layout,
            then,
        } => super::lazy::lazy(world, slot, stream(s), layout, then),
        Op::Staging {
            slot,
            dev,
            stream: s,
            ref lens,
            file_only,
        } => staging(world, (slot, world.device(dev), stream(s)), lens, file_only),
        _ => unreachable!("ops::step routes only data operations here"),
    }
}

/// A new buffer's handle: `None` when the allocation was refused as out of memory and the
/// device's budget or pools allow that (the operation then stops).
pub(super) fn allocated(
    world: &World,
    device: usize,
    what: &str,
    result: Result<Handle, ServerError>,
) -> Result<Option<Handle>, String> {
    match result {
        Ok(handle) => Ok(Some(handle)),
        Err(ServerError::OutOfMemory(_)) if world.devices[device].limited => Ok(None),
        Err(err) => Err(format!("{what}: {err:?}")),
    }
}

/// `create` of `data` on stream `s` of `device`, for the driver's own buffers: `None` when
/// refused as out of memory where that is allowed. Inside a capture window the create's write
/// may fail `stop_capture`: it is noted.
pub(super) fn create_on(
    world: &mut World,
    (device, s): (usize, usize),
    data: Vec<u8>,
    what: &str,
) -> Result<Option<Handle>, String> {
    let result = world.client(device, s).create(Bytes::from(data));
    let handle = allocated(world, device, what, result)?;
    if handle.is_some() {
        world.stream_mut(device, s).note_write(false);
    }
    Ok(handle)
}

/// Notes that stream `s` of `device` may have written (a create's initial data): inside a
/// capture window that write may be refused. Returns whether the stream captures, so that
/// the model then takes the bytes as unknown.
pub(super) fn maybe_wrote(world: &mut World, device: usize, s: usize) -> bool {
    let state = world.stream_mut(device, s);
    state.note_write(false);
    state.capturing()
}

/// The model of `data` created on stream `s` of `device` (see [`maybe_wrote`]).
pub(super) fn created(world: &mut World, device: usize, s: usize, data: Vec<u8>) -> Known {
    if maybe_wrote(world, device, s) {
        Known::unwritten(data.len())
    } else {
        Known::written(data)
    }
}

fn create(
    world: &mut World,
    (slot, device, s): (u8, usize, usize),
    len: u16,
    f: u8,
    from_slice: bool,
) -> Result<(), String> {
    let data = fill(len as usize % (MAX_CREATE + 1), f);
    let c = world.client(device, s);
    let result = if from_slice {
        c.create_from_slice(&data)
    } else {
        c.create(Bytes::from(data.clone()))
    };
    let Some(handle) = allocated(world, device, "create", result)? else {
        return Ok(());
    };
    let bytes = created(world, device, s, data);
    world.fill_slot(slot, device, handle, bytes);
    Ok(())
}

fn empty(
    world: &mut World,
    (slot, device, s): (u8, usize, usize),
    size: Size,
) -> Result<(), String> {
    let result = world.client(device, s).empty(size.bytes());
    match (result, size) {
        (Ok(handle), Size::Small(_) | Size::Boundary { .. }) => {
            world.fill_slot(slot, device, handle, Known::unwritten(size.bytes()));
            Ok(())
        }
        (Err(ServerError::OutOfMemory(_)), Size::Overflowing { .. }) => Ok(()),
        (Err(ServerError::OutOfMemory(_)), _) if world.devices[device].limited => Ok(()),
        (result, _) => Err(format!("empty({}): got {result:?}", size.bytes())),
    }
}

/// `write_at` of `data` at `offset` of a slot: lands when it fits (inside a capture window it
/// is refused late, so the bytes are then unknown), refused with `OutOfRange` otherwise.
fn write(world: &mut World, slot: u8, s: usize, offset: u64, data: &[u8]) -> Result<(), String> {
    let Some(target) = world.slot(slot) else {
        return Ok(());
    };
    let device = target.device;
    let fits = offset
        .checked_add(data.len() as u64)
        .is_some_and(|end| end <= target.bytes.len() as u64);
    let c = world.client(device, s);
    let result = if offset == 0 {
        c.write(&target.handle, Bytes::from(data.to_vec()))
    } else {
        c.write_at(&target.handle, offset, Bytes::from(data.to_vec()))
    };
    match (result, fits) {
        (Ok(()), true) => {
            land(world, slot, device, s, offset as usize, data);
            Ok(())
        }
        (Err(IoError::OutOfRange { .. }), false) => Ok(()),
        (result, _) => Err(format!("write_at {offset}: fits={fits}, got {result:?}")),
    }
}

/// The model of a write of `data` at `offset` of a slot that the runtime accepted on stream
/// `s` of `device`.
pub(super) fn land(
    world: &mut World,
    slot: u8,
    device: usize,
    s: usize,
    offset: usize,
    data: &[u8],
) {
    if data.is_empty() {
        return;
    }
    let capturing = world.stream(device, s).capturing();
    world.stream_mut(device, s).note_write(true);
    let target = world.slot_mut(slot).expect("the caller wrote to this slot");
    if capturing {
        target.bytes.forget(offset, data.len());
    } else {
        target.bytes.write(offset, data);
    }
}

/// [`land`] of bytes the model knows only in part (a copy of another buffer).
pub(super) fn land_model(
    world: &mut World,
    slot: u8,
    device: usize,
    s: usize,
    offset: usize,
    model: &Known,
) {
    if model.len() == 0 {
        return;
    }
    let capturing = world.stream(device, s).capturing();
    world.stream_mut(device, s).note_write(true);
    let target = world.slot_mut(slot).expect("the caller wrote to this slot");
    if capturing {
        target.bytes.forget(offset, model.len());
    } else {
        target.bytes.copy_from(offset, model);
    }
}

/// Whether the panicking forms of a read may be used: the stream neither captures nor holds a
/// failure.
fn healthy(state: &StreamState) -> bool {
    !state.dirty && !state.capturing()
}

fn read(world: &World, slot: u8, other: Option<u8>, s: usize, how: ReadHow) -> Result<(), String> {
    let Some(first) = world.slot(slot) else {
        return Ok(());
    };
    let mut slots = vec![first];
    slots.extend(
        other
            .and_then(|o| world.slot(o))
            .filter(|o| o.device == first.device),
    );
    let handles: Vec<Handle> = slots.iter().map(|s| s.handle.clone()).collect();
    let state = world.stream(first.device, s);
    let c = world.client(first.device, s);
    let result = match how {
        ReadHow::Read if healthy(state) => Ok(c.read(handles)),
        ReadHow::Unchecked if healthy(state) => Ok(handles
            .into_iter()
            .map(|h| c.read_one_unchecked(h))
            .collect()),
        ReadHow::ReadAsync => block_on(c.read_async(handles)),
        _ => handles.into_iter().map(|h| c.read_one(h)).collect(),
    };
    match result {
        Ok(_) if state.capturing() => Err("a read inside a capture window returned bytes".into()),
        Ok(bytes) => slots
            .iter()
            .zip(&bytes)
            .try_for_each(|(slot, bytes)| slot.bytes.check(bytes)),
        Err(err) => state.check_blocking("read", &err),
    }
}

/// What a tensor read of `model` with `shape`, `strides` and `elem` must give: the gathered
/// bytes, or the refusal the layout calls for.
pub(super) fn expected_tensor(
    model: &Known,
    (shape, strides, elem): (&[usize], &[usize], usize),
) -> Result<Known, IoError> {
    let extent = lockstep::extent_bytes(shape, strides, elem)?;
    if extent > model.len() as u64 {
        return Err(IoError::OutOfRange {
            offset: 0,
            len: extent,
            size: model.len() as u64,
        });
    }
    Ok(model.gather(shape, strides, elem))
}

/// Checks a tensor read's `result` against `expected`, on stream state `state`.
pub(super) fn check_tensor(
    state: &StreamState,
    expected: &Result<Known, IoError>,
    result: Result<&[u8], &ServerError>,
) -> Result<(), String> {
    match (result, expected) {
        (Ok(_), Ok(_)) if state.capturing() => {
            Err("a tensor read while capturing gave bytes".into())
        }
        (Ok(bytes), Ok(model)) => model.check(bytes),
        (Err(ServerError::Io(got)), Err(want)) if same_refusal(got, want) => Ok(()),
        (Err(err), Ok(_)) => state.check_blocking("tensor read", err),
        (result, expected) => Err(format!(
            "tensor read: expected {expected:?}, got {result:?}"
        )),
    }
}

/// Whether two refusals are of one kind.
pub(super) fn same_refusal(got: &IoError, want: &IoError) -> bool {
    std::mem::discriminant(got) == std::mem::discriminant(want)
}

fn read_tensor(
    world: &World,
    slot: u8,
    s: usize,
    layout: &Layout,
    how: TensorHow,
) -> Result<(), String> {
    let Some(source) = world.slot(slot) else {
        return Ok(());
    };
    let (shape, strides, elem) = layout.resolve();
    let expected = expected_tensor(&source.bytes, (&shape, &strides, elem));
    let state = world.stream(source.device, s);
    let c = world.client(source.device, s);
    let descriptor = CopyDescriptor::new(source.handle.clone(), shape, strides, elem);
    // The panicking forms only where nothing can fail.
    let safe = healthy(state) && expected.is_ok();
    let result = match how {
        TensorHow::Read if safe => Ok(c.read_tensor(vec![descriptor]).remove(0)),
        TensorHow::Unchecked if safe => Ok(c.read_one_unchecked_tensor(descriptor)),
        TensorHow::OneAsync => block_on(c.read_one_tensor_async(descriptor)),
        _ => block_on(c.read_tensor_async(vec![descriptor])).map(|mut b| b.remove(0)),
    };
    check_tensor(state, &expected, result.as_deref())
}

/// The model of a tensor of `shape` (dense `data`) created with `strides`: the elements where
/// the strides put them, zeroed padding elsewhere.
fn scattered(size: usize, data: &[u8], shape: &[usize], strides: &[usize], elem: usize) -> Known {
    let mut bytes = Known::written(vec![0; size]);
    for (linear, value) in data.chunks_exact(elem).enumerate() {
        bytes.write(element_offset(linear, shape, strides) * elem, value);
    }
    bytes
}

/// Checks that `strides` lay out `shape` inside `size` bytes without two elements at one place.
fn check_layout(size: u64, shape: &[usize], strides: &[usize], elem: usize) -> Result<(), String> {
    let extent = lockstep::extent_bytes(shape, strides, elem).map_err(|e| format!("{e}"))?;
    if extent > size || !nests(shape, strides) {
        return Err(format!(
            "layout {shape:?} with strides {strides:?} of {elem}-byte elements does not fit {size} bytes or overlaps"
        ));
    }
    Ok(())
}

fn create_tensor(
    world: &mut World,
    (slot, device, s): (u8, usize, usize),
    (shape, elem): (Vec<usize>, usize),
    extra: isize,
    how: u8,
) -> Result<(), String> {
    let dense = shape.iter().product::<usize>() * elem;
    let data = fill((dense as isize + extra).max(0) as usize, 3);
    let c = world.client(device, s);
    let result = match how {
        0 => c.create_tensor(Bytes::from(data.clone()), &shape, elem),
        1 => c.create_tensor_from_slice(&data, &shape, elem),
        _ => c.empty_tensor(&shape, elem),
    };
    let sized = how == 2 || data.len() == dense;
    let layout = match result {
        Ok(layout) if sized => layout,
        Err(ServerError::Io(IoError::SizeMismatch { .. })) if !sized => return Ok(()),
        Err(ServerError::OutOfMemory(_)) if world.devices[device].limited => return Ok(()),
        result => return Err(format!("create_tensor: sized={sized}, got {result:?}")),
    };
    let size = layout.memory.size();
    check_layout(size, &shape, &layout.strides, elem)?;
    let bytes = if how == 2 || maybe_wrote(world, device, s) {
        Known::unwritten(size as usize)
    } else {
        scattered(size as usize, &data, &shape, &layout.strides, elem)
    };
    world.fill_slot(slot, device, layout.memory, bytes);
    Ok(())
}

fn create_tensors(
    world: &mut World,
    (slot, device, s): (u8, usize, usize),
    tensors: &[(bool, Vec<u8>, u8)],
    how: u8,
) -> Result<(), String> {
    let descriptors: Vec<MemoryLayoutDescriptor> = tensors
        .iter()
        .take(3)
        .map(|(optimized, shape, elem)| {
            let strategy = if *optimized {
                MemoryLayoutStrategy::Optimized
            } else {
                MemoryLayoutStrategy::Contiguous
            };
            MemoryLayoutDescriptor::new(strategy, dims(shape, 3), 1 + *elem as usize % 8)
        })
        .collect();
    let data: Vec<Vec<u8>> = (descriptors.iter().enumerate())
        .map(|(i, d)| fill(d.shape.iter().product::<usize>() * d.elem_size, i as u8))
        .collect();
    let c = world.client(device, s);
    let result = match how {
        0 => c.create_tensors(
            (descriptors.iter().cloned())
                .zip(data.iter().map(|d| Bytes::from(d.clone())))
                .collect(),
        ),
        1 => c.create_tensors_from_slices(
            (descriptors.iter().cloned())
                .zip(data.iter().map(Vec::as_slice))
                .collect(),
        ),
        _ => c.empty_tensors(descriptors.clone()),
    };
    let layouts = match result {
        Ok(layouts) if layouts.len() == descriptors.len() => layouts,
        Err(ServerError::OutOfMemory(_)) if world.devices[device].limited => return Ok(()),
        result => return Err(format!("create_tensors of {descriptors:?}: got {result:?}")),
    };
    let unknown = how == 2 || maybe_wrote(world, device, s);
    let mut models = Vec::with_capacity(layouts.len());
    for ((d, layout), data) in descriptors.iter().zip(&layouts).zip(&data) {
        let size = layout.memory.size();
        check_layout(size, &d.shape, &layout.strides, d.elem_size)?;
        models.push(if unknown {
            Known::unwritten(size as usize)
        } else {
            scattered(size as usize, data, &d.shape, &layout.strides, d.elem_size)
        });
    }
    if !unknown && healthy(world.stream(device, s)) {
        let read = (layouts.iter().zip(&descriptors))
            .map(|(l, d)| {
                let (shape, strides) = (d.shape.clone(), l.strides.clone());
                CopyDescriptor::new(l.memory.clone(), shape, strides, d.elem_size)
            })
            .collect();
        let bytes = world.client(device, s).read_tensor(read);
        if let Some(k) = (0..data.len()).find(|&k| bytes[k][..] != data[k][..]) {
            return Err(format!("tensor {k} of {descriptors:?} read back wrong"));
        }
    }
    for (k, (layout, model)) in layouts.into_iter().zip(models).take(2).enumerate() {
        world.fill_slot(slot.wrapping_add(k as u8), device, layout.memory, model);
    }
    Ok(())
}

/// `write_tensor` (or `write_tensors` of the tensor twice, the second with the next fill)
/// into a slot. The contract's refusals: `InvalidLayout` for a bad layout (ranks that differ,
/// a zero element size, an extent that overflows) or strides that do not nest, `SizeMismatch`
/// for data of the wrong size, `OutOfRange` for an extent past the handle; with several, any
/// one of them. With none, the writes land in order, element `i` where the strides put it.
fn write_tensor(
    world: &mut World,
    slot: u8,
    s: usize,
    layout: &Layout,
    (extra, f): (i8, u8),
    twice: bool,
) -> Result<(), String> {
    let Some(target) = world.slot(slot) else {
        return Ok(());
    };
    let device = target.device;
    let (shape, strides, elem) = layout.resolve();
    let extent = lockstep::extent_bytes(&shape, &strides, elem);
    let bad_layout = extent.is_err() || !nests(&shape, &strides);
    let dense = shape.iter().product::<usize>() * elem;
    let data = fill((dense as isize + extra as isize % 3).max(0) as usize, f);
    let wrong_size = data.len() != dense;
    let past_end = extent.is_ok_and(|e| e > target.bytes.len() as u64);
    let descriptor =
        CopyDescriptor::new(target.handle.clone(), shape.clone(), strides.clone(), elem);
    let writes = if twice {
        vec![data.clone(), fill(data.len(), f.wrapping_add(1))]
    } else {
        vec![data]
    };
    let c = world.client(device, s);
    let result = if twice {
        let tensors = writes
            .iter()
            .map(|d| (descriptor.clone(), Bytes::from(d.clone())));
        c.write_tensors(tensors.collect())
    } else {
        c.write_tensor(descriptor, Bytes::from(writes[0].clone()))
    };
    match result {
        Ok(()) if !(bad_layout || wrong_size || past_end) => {
            for data in &writes {
                for (linear, value) in data.chunks_exact(elem.max(1)).enumerate() {
                    let at = element_offset(linear, &shape, &strides) * elem;
                    land(world, slot, device, s, at, value);
                }
            }
            Ok(())
        }
        Err(IoError::InvalidLayout { .. }) if bad_layout => Ok(()),
        Err(IoError::SizeMismatch { .. }) if wrong_size => Ok(()),
        Err(IoError::OutOfRange { .. }) if past_end => Ok(()),
        result => Err(format!(
            "write_tensor of {shape:?} with strides {strides:?}, {elem}-byte elements: bad layout {bad_layout}, wrong size {wrong_size}, past the end {past_end}; got {result:?}"
        )),
    }
}

/// A call on device `dev` (another than the slot's) with the slot's handle: refused with
/// `WrongDevice` before anything is enqueued.
fn foreign(world: &World, slot: u8, dev: u8, call: ForeignCall) -> Result<(), String> {
    let Some(source) = world.slot(slot) else {
        return Ok(());
    };
    let count = world.devices.len();
    if count < 2 {
        return Ok(());
    }
    let mut other = world.device(dev);
    if other == source.device {
        other = (other + 1) % count;
    }
    let (c, h) = (world.client(other, 0), source.handle.clone());
    let dense = || CopyDescriptor::new(h.clone(), vec![h.size() as usize], vec![1], 1);
    let u32s = lockstep::kernel::ElemType::U32;
    let err = match call {
        ForeignCall::Write => {
            return match c.write_at(&h, 0, Bytes::from(vec![1])) {
                Err(IoError::WrongDevice { .. }) => Ok(()),
                result => Err(format!("foreign write: {result:?}")),
            };
        }
        ForeignCall::Read => c.read_one(h.clone()).err(),
        ForeignCall::ReadTensor => block_on(c.read_tensor_async(vec![dense()])).err(),
        ForeignCall::Resource => c.get_resource(h.clone()).err(),
        ForeignCall::LazyWrite => c.read_lazy(dense()).materialize().err(),
        ForeignCall::AllReduce => {
            let own = vec![c.peer_id()];
            c.all_reduce(
                h.clone(),
                h.clone(),
                u32s,
                own,
                lockstep::ReduceOperation::Sum,
            )
            .err()
        }
        ForeignCall::ToClient => c
            .to_client(h.clone(), world.client(source.device, 0), u32s)
            .err(),
    };
    match err {
        Some(ServerError::Io(IoError::WrongDevice { .. })) => Ok(()),
        err => Err(format!("foreign {call:?}: {err:?}")),
    }
}

/// `staging` of up to 3 buffers of host bytes (a no-op on the simulator, which pins
/// nothing): the bytes must be unchanged; the first is then created into a slot.
fn staging(
    world: &mut World,
    (slot, device, s): (u8, usize, usize),
    lens: &[u8],
    file_only: bool,
) -> Result<(), String> {
    let data: Vec<Vec<u8>> = (lens.iter().take(3).enumerate())
        .map(|(i, &len)| fill(len as usize, i as u8))
        .collect();
    let mut bytes: Vec<Bytes> = data.iter().map(|d| Bytes::from(d.clone())).collect();
    let c = world.client(device, s);
    c.staging(bytes.iter_mut(), file_only)
        .map_err(|e| format!("staging: {e:?}"))?;
    if bytes.iter().zip(&data).any(|(b, d)| b[..] != d[..]) {
        return Err("staging changed the bytes".into());
    }
    let Some(first) = bytes.into_iter().next() else {
        return Ok(());
    };
    let Some(handle) = allocated(world, device, "create of staged bytes", c.create(first))? else {
        return Ok(());
    };
    let model = created(world, device, s, data[0].clone());
    world.fill_slot(slot, device, handle, model);
    Ok(())
}
