//! Collectives and copies between devices. An all-reduce's wait blocks until every device of
//! its list has enqueued its part, and the clients run inline on one thread: so every part is
//! enqueued before any device waits, as the explorer does, and only on streams that do not
//! capture (a part refused there would leave its peers waiting, as NCCL would).

use arbitrary::Arbitrary;
use lockstep::kernel::ElemType;
use lockstep::{
    CaptureError, CollectiveError, CopyDescriptor, Device, DeviceId, ReduceOperation, ServerError,
};
use lockstep_sim::SimDevice;

use super::data::{allocated, create_on, expected_tensor};
use super::kernel::Elem;
use super::ops::{Layout, stream};
use super::world::World;
use crate::fill;
use crate::model::Known;

/// An all-reduce over some devices of one cluster.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct AllReduceOp {
    cluster: u8,
    /// Bit `k`: the cluster's device `k` takes part (none set: all do).
    members: u8,
    /// Rotates the rank order.
    rotate: u8,
    stream: u8,
    elem: Elem,
    op: ReducePick,
    /// Elements, `len % 9`.
    len: u8,
    fill: u8,
    in_place: bool,
    /// The first member's result goes to this slot.
    keep: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum ReducePick {
    Sum,
    Prod,
    Min,
    Max,
    Mean,
}

impl ReducePick {
    fn op(self) -> ReduceOperation {
        match self {
            ReducePick::Sum => ReduceOperation::Sum,
            ReducePick::Prod => ReduceOperation::Prod,
            ReducePick::Min => ReduceOperation::Min,
            ReducePick::Max => ReduceOperation::Max,
            ReducePick::Mean => ReduceOperation::Mean,
        }
    }
}

pub(super) fn all_reduce(world: &mut World, op: &AllReduceOp) -> Result<(), String> {
    let cluster = &world.clusters[op.cluster as usize % world.clusters.len()];
    let mut members: Vec<usize> = (cluster.iter().enumerate())
        .filter(|(k, _)| op.members >> k & 1 == 1)
        .map(|(_, &d)| d)
        .collect();
    if members.is_empty() {
        members = cluster.clone();
    }
    let turn = op.rotate as usize % members.len();
    members.rotate_left(turn);
    let s = stream(op.stream);
    if members.iter().any(|&d| world.stream(d, s).capturing()) {
        return Ok(());
    }
    let (elem, reduce) = (op.elem.ty(), op.op.op());
    let len = (op.len % 9) as usize * elem.size_bytes();
    let devices: Vec<DeviceId> = members
        .iter()
        .map(|&d| world.client(d, s).peer_id())
        .collect();
    // Every buffer first: an allocation refused after a part was enqueued would leave the
    // others waiting.
    let mut parts = Vec::with_capacity(members.len());
    for (rank, &d) in members.iter().enumerate() {
        let data = fill(len, op.fill.wrapping_add(17 * rank as u8));
        let Some(src) = create_on(world, (d, s), data.clone(), "create")? else {
            return Ok(());
        };
        let c = world.client(d, s);
        let dst = if op.in_place {
            src.clone()
        } else {
            let Some(dst) = allocated(world, d, "empty", c.empty(len))? else {
                return Ok(());
            };
            dst
        };
        parts.push((d, src, dst, data));
    }
    for (d, src, dst, _) in &parts {
        let c = world.client(*d, s);
        c.all_reduce(src.clone(), dst.clone(), elem, devices.clone(), reduce)
            .map_err(|e| format!("all_reduce over {devices:?} refused on {d}: {e:?}"))?;
    }
    let inputs: Vec<&[u8]> = parts.iter().map(|p| p.3.as_slice()).collect();
    let expected = reference(&inputs, elem, reduce);
    for (d, _, dst, _) in &parts {
        let state = world.stream(*d, s);
        match world.client(*d, s).read_one(dst.clone()) {
            Ok(bytes) if expected.as_ref().is_some_and(|e| bytes[..] != e[..]) => {
                return Err(format!(
                    "all_reduce {reduce:?} of {elem} over {devices:?} gave {:?} on {d}, expected {expected:?}",
                    &bytes[..]
                ));
            }
            Ok(bytes) if bytes.len() != len => return Err("all_reduce changed the length".into()),
            Ok(_) => {}
            Err(err) => state.check_blocking("read of an all_reduce", &err)?,
        }
    }
    let (d, _, dst, _) = parts.swap_remove(0);
    let model = expected.map_or_else(|| Known::unwritten(len), Known::written);
    world.fill_slot(op.keep, d, dst, model);
    Ok(())
}

/// The all-reduce of `inputs` (in rank order) where the reference is exact: integer sums,
/// products (wrapping), minima and maxima.
fn reference(inputs: &[&[u8]], elem: ElemType, op: ReduceOperation) -> Option<Vec<u8>> {
    let words = |bytes: &[u8]| -> Vec<u32> {
        bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
            .collect()
    };
    let fold: fn(u32, u32) -> u32 = match (elem, op) {
        (ElemType::U32 | ElemType::I32, ReduceOperation::Sum) => u32::wrapping_add,
        (ElemType::U32 | ElemType::I32, ReduceOperation::Prod) => u32::wrapping_mul,
        (ElemType::U32, ReduceOperation::Min) => u32::min,
        (ElemType::U32, ReduceOperation::Max) => u32::max,
        (ElemType::I32, ReduceOperation::Min) => |a, b| (a as i32).min(b as i32) as u32,
        (ElemType::I32, ReduceOperation::Max) => |a, b| (a as i32).max(b as i32) as u32,
        _ => return None,
    };
    let mut acc = words(inputs[0]);
    for input in &inputs[1..] {
        for (a, b) in acc.iter_mut().zip(words(input)) {
            *a = fold(*a, b);
        }
    }
    Some(acc.iter().flat_map(|w| w.to_le_bytes()).collect())
}

/// A collective call that its contract refuses at the call, enqueuing nothing.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct RefusedOp {
    dev: u8,
    stream: u8,
    kind: RefusedKind,
    /// For the device-list refusals: `ensure_init_collective` instead of `all_reduce`.
    init: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum RefusedKind {
    /// This device twice.
    Twice,
    /// A list without this device (its cluster's other devices, or none).
    Absent,
    /// A device past the cluster.
    Missing,
    /// A device of another backend.
    OtherBackend,
    /// 6 bytes of `u32`s.
    NotWhole,
    /// A source of 8 bytes, a destination of 12.
    SizeMismatch,
}

pub(super) fn refused(world: &mut World, op: &RefusedOp) -> Result<(), String> {
    let (device, s) = (world.device(op.dev), stream(op.stream));
    let cluster = &world.clusters[world.devices[device].cluster];
    let c = world.client(device, s);
    let me = c.peer_id();
    let id = |index: u32| DeviceId { index, ..me };
    let list = match op.kind {
        RefusedKind::Twice => vec![me, me],
        RefusedKind::Absent => (0..cluster.len() as u32)
            .map(id)
            .filter(|&d| d != me)
            .collect(),
        RefusedKind::Missing => vec![me, id(cluster.len() as u32)],
        RefusedKind::OtherBackend => vec![
            me,
            DeviceId {
                type_id: SimDevice::TYPE_ID ^ 1,
                index: 0,
            },
        ],
        RefusedKind::NotWhole | RefusedKind::SizeMismatch => vec![me],
    };
    let sizes = match op.kind {
        RefusedKind::NotWhole => (6, 6),
        RefusedKind::SizeMismatch => (8, 12),
        _ => (4, 4),
    };
    let lists_only = !matches!(op.kind, RefusedKind::NotWhole | RefusedKind::SizeMismatch);
    let result = if op.init && lists_only {
        c.ensure_init_collective(list)
    } else {
        let Some(src) = create_on(world, (device, s), fill(sizes.0, 1), "create")? else {
            return Ok(());
        };
        let c = world.client(device, s);
        let Some(dst) = allocated(world, device, "empty", c.empty(sizes.1))? else {
            return Ok(());
        };
        c.all_reduce(src, dst, ElemType::U32, list, ReduceOperation::Sum)
    };
    let refused = match (&result, op.kind) {
        (
            Err(ServerError::Io(lockstep::IoError::SizeMismatch { .. })),
            RefusedKind::SizeMismatch,
        ) => true,
        (Err(ServerError::Collective { error, .. }), kind) => matches!(
            (error, kind),
            (CollectiveError::Mismatch { .. }, RefusedKind::NotWhole)
                | (
                    CollectiveError::NotInCommunicator { .. },
                    RefusedKind::Absent
                )
                | (
                    CollectiveError::InvalidDevices { .. },
                    RefusedKind::Twice | RefusedKind::Missing | RefusedKind::OtherBackend
                )
        ),
        _ => false,
    };
    if refused {
        Ok(())
    } else {
        Err(format!("{:?}: {result:?}", op.kind))
    }
}

/// `to_client` (or `to_client_tensor` of a drawn layout) of a slot to device `dev`.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct ToClientOp {
    slot: u8,
    dev: u8,
    stream: u8,
    dst_stream: u8,
    elem: Elem,
    tensor: Option<Layout>,
    into: u8,
}

/// The copy must hold the source's bytes (dense, for a tensor) on the destination device, by
/// whichever path: a send and a receive between peers of one cluster, or through the host
/// between clusters. Refused at the call for a layout that does not fit or a length that is not
/// whole elements.
pub(super) fn to_client(world: &mut World, op: &ToClientOp) -> Result<(), String> {
    let Some(source) = world.slot(op.slot) else {
        return Ok(());
    };
    let (a, b) = (source.device, world.device(op.dev));
    let (s, ds) = (stream(op.stream), stream(op.dst_stream));
    let (shape, strides, elem_size) = match &op.tensor {
        Some(layout) => layout.resolve(),
        None => (vec![source.bytes.len()], vec![1], 1),
    };
    let expected = expected_tensor(&source.bytes, (&shape, &strides, elem_size));
    let len = shape.iter().product::<usize>() * elem_size;
    let elem = op.elem.ty();
    let (c, dst) = (world.client(a, s), world.client(b, ds));
    let result = match op.tensor {
        Some(_) => {
            let (shape, strides) = (shape.clone(), strides.clone());
            let descriptor = CopyDescriptor::new(source.handle.clone(), shape, strides, elem_size);
            c.to_client_tensor(descriptor, dst, elem)
        }
        None => c.to_client(source.handle.clone(), dst, elem),
    };
    let whole = len % elem.size_bytes() == 0;
    // A copy between two devices of one cluster moves by a send and a receive, both halves
    // or neither: refused at the call while either stream captures.
    let peers = a != b && world.devices[a].cluster == world.devices[b].cluster;
    let peer_path = peers && len > 0 && dense(&shape, &strides);
    let capturing = world.stream(a, s).capturing() || world.stream(b, ds).capturing();
    let refused = peer_path && capturing;
    let handle = match (result, &expected) {
        (
            Err(ServerError::Capture(CaptureError::Refused {
                operation: "to_client",
                ..
            })),
            Ok(_),
        ) if whole && refused => {
            return Ok(());
        }
        (Ok(handle), Ok(_)) if whole && !refused => handle,
        (Err(ServerError::Io(got)), Err(want)) if super::data::same_refusal(&got, want) => {
            return Ok(());
        }
        (
            Err(ServerError::Collective {
                error: CollectiveError::Mismatch { .. },
                ..
            }),
            Ok(_),
        ) if !whole => {
            return Ok(());
        }
        (Err(ServerError::OutOfMemory(_)), Ok(_)) if world.devices[b].limited => return Ok(()),
        (Err(err), Ok(_)) if whole => {
            return world.stream(a, s).check_blocking("to_client's read", &err);
        }
        (result, expected) => {
            return Err(format!(
                "to_client of {len} bytes of {elem}: expected {expected:?}, got {result:?}"
            ));
        }
    };
    let model = expected.expect("matched Ok above");
    if handle.device() != dst.device_id() || handle.size() != len as u64 {
        return Err(format!("to_client gave {handle:?} for {len} bytes"));
    }
    copied(world, (b, ds), handle, model, op.into)
}

/// Whether a tensor of `shape` laid out with `strides` is dense row-major (dimensions of one
/// element may have any stride): what a copy between peers moves as it is.
fn dense(shape: &[usize], strides: &[usize]) -> bool {
    let contiguous = lockstep::contiguous_strides(shape);
    (shape.iter().zip(strides).zip(&contiguous))
        .all(|((&dim, &stride), &c)| dim <= 1 || stride == c)
}

/// A copy landed on stream `ds` of device `b`: read back there, it holds `model`; inside a
/// capture window the copy's write may be refused (and its receive fails the stream).
fn copied(
    world: &mut World,
    (b, ds): (usize, usize),
    handle: lockstep::Handle,
    model: Known,
    into: u8,
) -> Result<(), String> {
    let state = world.stream_mut(b, ds);
    if state.capturing() {
        state.note_write(false);
        state.dirty = true;
        world.fill_slot(into, b, handle, Known::unwritten(model.len()));
        return Ok(());
    }
    match world.client(b, ds).read_one(handle.clone()) {
        Ok(bytes) => model
            .check(&bytes)
            .map_err(|why| format!("a copy between devices: {why}"))?,
        Err(err) => world.stream(b, ds).check_blocking("read of a copy", &err)?,
    }
    world.fill_slot(into, b, handle, model);
    Ok(())
}

/// `send_to` and `receive_from` between two devices of one cluster.
#[derive(Arbitrary, Debug)]
pub(in crate::api) struct SendRecvOp {
    slot: u8,
    /// The receiving device, by its index in the cluster.
    to: u8,
    stream: u8,
    dst_stream: u8,
    /// 0: to itself (refused); 1: to a device past the cluster (refused); else a peer.
    kind: u8,
    into: u8,
}

pub(super) fn send_recv(world: &mut World, op: &SendRecvOp) -> Result<(), String> {
    let Some(source) = world.slot(op.slot) else {
        return Ok(());
    };
    let a = source.device;
    let (s, ds) = (stream(op.stream), stream(op.dst_stream));
    let cluster = world.clusters[world.devices[a].cluster].clone();
    let c = world.client(a, s);
    let me = c.peer_id();
    let refusal = match op.kind {
        0 => Some(me),
        1 => Some(DeviceId {
            index: cluster.len() as u32,
            ..me
        }),
        _ => None,
    };
    if let Some(to) = refusal {
        return match c.send_to(source.handle.clone(), to) {
            Err(ServerError::Collective {
                error:
                    CollectiveError::InvalidDevices { .. } | CollectiveError::NotInCommunicator { .. },
                ..
            }) => Ok(()),
            result => Err(format!("send_to {to}: {result:?}")),
        };
    }
    let b = cluster[op.to as usize % cluster.len()];
    let skip = a == b
        || world.devices[b].limited
        || world.stream(a, s).capturing()
        || world.stream(b, ds).capturing();
    if skip {
        return Ok(());
    }
    let (to, len) = (world.client(b, ds).peer_id(), source.bytes.len());
    let model = source.bytes.clone();
    c.send_to(source.handle.clone(), to)
        .map_err(|e| format!("send_to {to}: {e:?}"))?;
    let handle = world
        .client(b, ds)
        .receive_from(me, len)
        .map_err(|e| format!("receive_from {me}: {e:?}"))?;
    copied(world, (b, ds), handle, model, op.into)
}
