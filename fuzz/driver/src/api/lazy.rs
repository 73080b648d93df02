//! Lazy reads: `read_lazy` knows its length at once and reads at first access, on the source's
//! stream. A read that fails (a layout that does not fit, a capture window, a pending failure)
//! must be the error of whatever accesses the bytes: `materialize`, or a `create` or write of
//! them on any device; never a panic.

use lockstep::{Bytes, CopyDescriptor, IoError, ServerError, block_on};

use super::data::{allocated, check_tensor, expected_tensor, maybe_wrote, same_refusal};
use super::ops::{Layout, LazyUse};
use super::world::World;
use crate::model::Known;

/// Where a lazy read came from: its stream (whose state decides what the read may return)
/// and what the read must give.
struct Source {
    device: usize,
    stream: usize,
    expected: Result<Known, IoError>,
}

pub(super) fn lazy(
    world: &mut World,
    slot: u8,
    s: usize,
    layout: &Layout,
    then: LazyUse,
) -> Result<(), String> {
    let Some(slot) = world.slot(slot) else {
        return Ok(());
    };
    let (shape, strides, elem) = layout.resolve();
    let source = Source {
        device: slot.device,
        stream: s,
        expected: expected_tensor(&slot.bytes, (&shape, &strides, elem)),
    };
    // Shapes of at most 3 dimensions below 7 and elements of at most 8 bytes: no overflow.
    let len = shape.iter().product::<usize>() * elem;
    let descriptor = CopyDescriptor::new(slot.handle.clone(), shape, strides, elem);
    let c = world.client(source.device, s);
    let bytes = match then {
        LazyUse::Async => block_on(c.read_lazy_async(descriptor))
            .map_err(|e| format!("read_lazy_async is ready with the bytes: {e:?}"))?,
        _ => c.read_lazy(descriptor),
    };
    if bytes.len() != len {
        return Err(format!("a lazy read of {len} bytes says {}", bytes.len()));
    }
    match then {
        LazyUse::Materialize | LazyUse::Async => {
            let state = world.stream(source.device, s);
            let read = bytes.materialize();
            check_tensor(state, &source.expected, read.as_ref().map(|b| *b))
        }
        LazyUse::Create { dev, into } => {
            create(world, &source, bytes, (world.device(dev), into), false)
        }
        LazyUse::CreateTensor { into } => {
            create(world, &source, bytes, (source.device, into), true)
        }
        LazyUse::Write { into, at } => {
            let Some(target) = world.slot(into) else {
                return Ok(());
            };
            let offset = at.bytes(target.bytes.len());
            write(world, &source, bytes, into, Some(offset))
        }
        LazyUse::WriteTensor { into } => write(world, &source, bytes, into, None),
    }
}

impl Source {
    /// Checks `err`, which a failed read of this source gave to a call: the layout's refusal,
    /// or what the source stream's state excuses.
    fn check_failure(&self, world: &World, what: &str, err: &ServerError) -> Result<(), String> {
        if let (ServerError::Io(got), Err(want)) = (err, &self.expected)
            && same_refusal(got, want)
        {
            return Ok(());
        }
        let state = world.stream(self.device, self.stream);
        state.check_blocking(what, err)
    }

    /// The bytes the read gave, when it could succeed: the source stream does not capture.
    fn model(&self, world: &World) -> Option<&Known> {
        let capturing = world.stream(self.device, self.stream).capturing();
        self.expected.as_ref().ok().filter(|_| !capturing)
    }
}

/// `create` of the lazy bytes on `target` (or `create_tensor` of them as one row of bytes,
/// which may pad the row with zeros): a new buffer holding what the read gave, or the read's
/// error.
fn create(
    world: &mut World,
    source: &Source,
    bytes: Bytes,
    (target, into): (usize, u8),
    tensor: bool,
) -> Result<(), String> {
    let c = world.client(target, source.stream);
    let result = if tensor {
        let len = bytes.len();
        c.create_tensor(bytes, &[len], 1)
            .map(|layout| layout.memory)
    } else {
        c.create(bytes)
    };
    let handle = match result {
        Ok(handle) => handle,
        Err(ServerError::OutOfMemory(_)) => {
            return allocated(world, target, "create of a lazy read", result).map(|_| ());
        }
        Err(err) => return source.check_failure(world, "create of a lazy read", &err),
    };
    let Some(model) = source.model(world).cloned() else {
        return Err("a create of a lazy read that must fail succeeded".into());
    };
    let size = handle.size() as usize;
    if size < model.len() {
        return Err(format!(
            "a create of {} lazy bytes holds {size}",
            model.len()
        ));
    }
    let mut known = Known::written(vec![0; size]);
    known.copy_from(0, &model);
    if maybe_wrote(world, target, source.stream) {
        known = Known::unwritten(size);
    }
    world.fill_slot(into, target, handle, known);
    Ok(())
}

/// `write_at` (at `offset`) or a dense `write_tensor` (`None`) of the lazy bytes into slot
/// `into`: refused with `OutOfRange` when they do not fit, else the read's bytes land, or the
/// write fails with `LazyReadFailed` carrying the read's error. An empty `write_at` writes
/// nothing and never reads.
fn write(
    world: &mut World,
    source: &Source,
    bytes: Bytes,
    into: u8,
    offset: Option<u64>,
) -> Result<(), String> {
    let Some(target) = world.slot(into) else {
        return Ok(());
    };
    let (device, len) = (target.device, bytes.len());
    let c = world.client(device, source.stream);
    let result = match offset {
        Some(offset) => c.write_at(&target.handle, offset, bytes),
        None => {
            let dense = CopyDescriptor::new(target.handle.clone(), vec![len], vec![1], 1);
            c.write_tensor(dense, bytes)
        }
    };
    let offset = offset.unwrap_or(0);
    let fits = offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= target.bytes.len() as u64);
    match result {
        Err(IoError::OutOfRange { .. }) if !fits => Ok(()),
        Err(IoError::LazyReadFailed { source: err }) if fits => {
            source.check_failure(world, "write of a lazy read", &err)
        }
        Ok(()) if fits && len == 0 => Ok(()),
        Ok(()) if fits => {
            let Some(model) = source.model(world).cloned() else {
                return Err("a write of a lazy read that must fail succeeded".into());
            };
            super::data::land_model(world, into, device, source.stream, offset as usize, &model);
            Ok(())
        }
        result => Err(format!(
            "write of a {len}-byte lazy read at {offset}: fits={fits}, got {result:?}"
        )),
    }
}
