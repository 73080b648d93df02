//! Each checked call of the fuzzed programs: the call, and the outcome the model predicts for
//! it (the bytes, or one of the refusals its contract lists).

use lockstep::{
    Bytes, CopyDescriptor, IoError, MemoryLayoutDescriptor, MemoryLayoutStrategy, ServerError,
};

use super::model::{Known, element_offset, nests};
use super::{Client, Size, Slot, dims, fill};

/// `create` of `data`: always served; the slot then holds exactly `data`.
pub(super) fn create(c: &Client, data: Vec<u8>) -> Result<Slot, String> {
    let handle = c
        .create(Bytes::from(data.clone()))
        .map_err(|e| format!("create: {e}"))?;
    Ok(Slot {
        handle,
        bytes: Known::written(data),
    })
}

/// `read_one` of the whole slot: every byte the model knows reads as it knows it.
pub(super) fn read(c: &Client, s: &Slot) -> Result<(), String> {
    let bytes = c
        .read_one(s.handle.clone())
        .map_err(|e| format!("read: {e}"))?;
    s.bytes.check(&bytes)
}

/// `empty` of `size` into `slot`: served unless the size overflows, then refused as out of
/// memory.
pub(super) fn empty(c: &Client, slot: &mut Option<Slot>, size: &Size) -> Result<(), String> {
    match (c.empty(size.bytes()), size) {
        (Ok(handle), Size::Small(_) | Size::Boundary { .. }) => {
            *slot = Some(Slot {
                handle,
                bytes: Known::unwritten(size.bytes()),
            });
            Ok(())
        }
        (Err(ServerError::OutOfMemory(_)), Size::Overflowing { .. }) => Ok(()),
        (result, _) => Err(format!("empty({}): got {result:?}", size.bytes())),
    }
}

/// `write_at` of `data` at `offset` of `s`: lands when it fits, refused with `OutOfRange`
/// otherwise.
pub(super) fn write(c: &Client, s: &mut Slot, offset: u64, data: &[u8]) -> Result<(), String> {
    let end = offset.checked_add(data.len() as u64);
    let fits = end.is_some_and(|end| end <= s.bytes.len() as u64);
    match (
        c.write_at(&s.handle, offset, Bytes::from(data.to_vec())),
        fits,
    ) {
        (Ok(()), true) => {
            s.bytes.write(offset as usize, data);
            Ok(())
        }
        (Err(IoError::OutOfRange { .. }), false) => Ok(()),
        (result, _) => Err(format!("write_at: fits={fits}, got {result:?}")),
    }
}

/// `read_tensor_async` of `s` with `shape`, `strides` and `elem` bytes an element: the
/// gathered bytes, or the error the layout calls for.
pub(super) fn read_tensor(
    c: &Client,
    s: &Slot,
    shape: &[usize],
    strides: &[usize],
    elem: usize,
) -> Result<(), String> {
    let descriptor = CopyDescriptor::new(s.handle.clone(), shape.to_vec(), strides.to_vec(), elem);
    let result = lockstep::block_on(c.read_tensor_async(vec![descriptor]));
    match (result, lockstep::extent_bytes(shape, strides, elem)) {
        (Ok(mut bytes), Ok(extent)) if extent as usize <= s.bytes.len() => {
            s.bytes.gather(shape, strides, elem).check(&bytes.remove(0))
        }
        (Err(ServerError::Io(IoError::OutOfRange { .. })), Ok(extent))
            if extent as usize > s.bytes.len() =>
        {
            Ok(())
        }
        (Err(ServerError::Io(IoError::InvalidLayout { .. })), Err(_)) => Ok(()),
        (result, extent) => Err(format!("read_tensor: extent {extent:?}, got {result:?}")),
    }
}

/// `create_tensors` of up to four drawn tensors, each read back with its strides; returns the
/// first one's memory as a slot, its model the elements where the strides put them and zeroed
/// padding elsewhere.
pub(super) fn create_tensors(
    c: &Client,
    tensors: &[(bool, Vec<u8>, u8)],
) -> Result<Option<Slot>, String> {
    let descriptors: Vec<MemoryLayoutDescriptor> = tensors
        .iter()
        .take(4)
        .map(|(optimized, shape, elem)| {
            let strategy = if *optimized {
                MemoryLayoutStrategy::Optimized
            } else {
                MemoryLayoutStrategy::Contiguous
            };
            let shape = dims(shape, 3);
            MemoryLayoutDescriptor::new(strategy, shape, 1 + *elem as usize % 16)
        })
        .collect();
    let data: Vec<Vec<u8>> = descriptors
        .iter()
        .enumerate()
        .map(|(i, d)| fill(d.shape.iter().product::<usize>() * d.elem_size, i as u8))
        .collect();
    let inputs = descriptors
        .iter()
        .cloned()
        .zip(data.iter().map(|d| Bytes::from(d.clone())))
        .collect();
    let layouts = c
        .create_tensors(inputs)
        .map_err(|e| format!("create_tensors: {e}"))?;
    for ((d, layout), expected) in descriptors.iter().zip(&layouts).zip(&data) {
        let descriptor = CopyDescriptor::new(
            layout.memory.clone(),
            d.shape.clone(),
            layout.strides.clone(),
            d.elem_size,
        );
        let bytes = c.read_tensor(vec![descriptor]).remove(0);
        if bytes[..] != expected[..] {
            return Err(format!(
                "tensor {d:?} with strides {:?} read back wrong",
                layout.strides
            ));
        }
    }
    let (Some(first), Some(d)) = (layouts.into_iter().next(), descriptors.first()) else {
        return Ok(None);
    };
    let mut bytes = Known::written(vec![0; first.memory.size() as usize]);
    for (linear, elem) in data[0].chunks_exact(d.elem_size).enumerate() {
        let offset = element_offset(linear, &d.shape, &first.strides);
        bytes.write(offset * d.elem_size, elem);
    }
    Ok(Some(Slot {
        handle: first.memory,
        bytes,
    }))
}

/// `create_tensor` of `shape` with data `extra` bytes off the dense size: reads back as
/// written when the size is right, refused with `SizeMismatch` otherwise.
pub(super) fn create_tensor(
    c: &Client,
    shape: &[usize],
    elem: usize,
    extra: isize,
) -> Result<(), String> {
    let dense = shape.iter().product::<usize>() * elem;
    let len = (dense as isize + extra).max(0) as usize;
    let data = fill(len, 3);
    match (
        c.create_tensor(Bytes::from(data.clone()), shape, elem),
        len == dense,
    ) {
        (Ok(layout), true) => {
            let descriptor = CopyDescriptor::new(
                layout.memory.clone(),
                shape.to_vec(),
                layout.strides.clone(),
                elem,
            );
            if c.read_tensor(vec![descriptor]).remove(0)[..] != data[..] {
                return Err("create_tensor then read_tensor differs".into());
            }
            Ok(())
        }
        (Err(ServerError::Io(IoError::SizeMismatch { .. })), false) => Ok(()),
        (result, ok) => Err(format!("create_tensor: sizes match={ok}, got {result:?}")),
    }
}

/// `write_tensor` of `data` into `s` laid out as `shape`, `strides` and `elem` bytes an
/// element. The contract's refusals: `InvalidLayout` for a bad layout (ranks that differ, a
/// zero element size, an extent that overflows) or one whose strides do not nest,
/// `SizeMismatch` for data of the wrong size, `OutOfRange` for an extent past the handle. With
/// none of them, the write must land, element `i` of `data` where the strides put it (the
/// elements at distinct places); with several, any one of them may be the refusal.
pub(super) fn write_tensor(
    c: &Client,
    s: &mut Slot,
    (shape, strides, elem): (&[usize], &[usize], usize),
    data: &[u8],
) -> Result<(), String> {
    let extent = lockstep::extent_bytes(shape, strides, elem);
    let bad_layout = extent.is_err() || !nests(shape, strides);
    let wrong_size = data.len() != shape.iter().product::<usize>() * elem;
    let past_end = extent.is_ok_and(|e| e > s.bytes.len() as u64);
    let descriptor = CopyDescriptor::new(s.handle.clone(), shape.to_vec(), strides.to_vec(), elem);
    match c.write_tensor(descriptor, Bytes::from(data.to_vec())) {
        Ok(()) if !(bad_layout || wrong_size || past_end) => {
            let mut places = std::collections::BTreeSet::new();
            for (linear, value) in data.chunks_exact(elem.max(1)).enumerate() {
                let at = element_offset(linear, shape, strides) * elem;
                if !places.insert(at) {
                    return Err(format!(
                        "write_tensor of {shape:?} with strides {strides:?} put two elements at byte {at}"
                    ));
                }
                s.bytes.write(at, value);
            }
            Ok(())
        }
        Err(IoError::InvalidLayout { .. }) if bad_layout => Ok(()),
        Err(IoError::SizeMismatch { .. }) if wrong_size => Ok(()),
        Err(IoError::OutOfRange { .. }) if past_end => Ok(()),
        result => Err(format!(
            "write_tensor of {shape:?} with strides {strides:?}, {elem}-byte elements, {} bytes into {}: bad layout {bad_layout}, wrong size {wrong_size}, past the end {past_end}; got {result:?}",
            data.len(),
            s.bytes.len()
        )),
    }
}
