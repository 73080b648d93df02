//! The read/write paths under arbitrary input: the logic of the `fuzz/` targets, kept here so
//! that `cargo test` replays the checked-in corpus on stable.
//!
//! Every call must return the right bytes or a typed error that the reference model predicts:
//! never a panic, never a hang, never a wrong byte. Sizes reach the classes where allocation
//! goes wrong ([`Size`]): empty, one byte, slice and page boundaries ±1, and sizes whose
//! rounding overflows. The client runs inline ([`ComputeClient::inline`]): one input is a few
//! dozen calls, and an actor thread per input cost more than the calls.

use arbitrary::{Arbitrary, Unstructured};
use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, Handle, IoError, MemoryLayoutDescriptor,
    MemoryLayoutStrategy, ServerError, ServerOptions, StreamId,
};
use lockstep_sim::{SimConfig, SimDevice};

const SLOTS: usize = 4;

/// An allocation size.
#[derive(Arbitrary, Debug)]
pub enum Size {
    /// Up to 64 KiB: empty, one byte, and everything between.
    Small(u16),
    /// `2^(8 + shift % 11) + delta % 2`: a power of two from 256 B to 256 KiB, or one byte
    /// either side of it, where the default pools' slice classes (4 KiB, 256 KiB) end.
    Boundary { shift: u8, delta: i8 },
    /// `usize::MAX - below`: a size whose rounding to the allocation unit overflows.
    Overflowing { below: u16 },
}

impl Size {
    fn bytes(&self) -> usize {
        match self {
            Size::Small(n) => *n as usize,
            Size::Boundary { shift, delta } => {
                (1usize << (8 + shift % 11)).saturating_add_signed((delta % 2) as isize)
            }
            Size::Overflowing { below } => usize::MAX - *below as usize,
        }
    }
}

#[derive(Arbitrary, Debug)]
pub enum IoOp {
    Create {
        slot: u8,
        len: u16,
        fill: u8,
    },
    Empty {
        slot: u8,
        size: Size,
    },
    Write {
        slot: u8,
        offset: u32,
        len: u16,
        fill: u8,
    },
    Read {
        slot: u8,
    },
    ReadTensor {
        slot: u8,
        shape: Vec<u8>,
        strides: Vec<u16>,
        elem_size: u8,
    },
    CreateTensors {
        slot: u8,
        tensors: Vec<(bool, Vec<u8>, u8)>,
    },
    CreateTensor {
        shape: Vec<u8>,
        elem_size: u8,
        extra: i8,
    },
    Release {
        slot: u8,
    },
    Sync {
        stream: bool,
    },
}

/// A slot's handle and what the model knows of its bytes (`None`: never written).
struct Slot {
    handle: Handle,
    bytes: Vec<Option<u8>>,
}

/// Runs the program `data` decodes to on a fresh simulator, checking every result.
///
/// # Panics
/// On any disagreement with the model: that is what the fuzzer looks for.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(seed) = u64::arbitrary(&mut u) else {
        return;
    };
    let Ok(ops) = Vec::<IoOp>::arbitrary(&mut u) else {
        return;
    };
    let client = ComputeClient::inline(
        SimDevice::new(SimConfig::new(seed)),
        ServerOptions::default(),
    );
    let streams: Vec<_> = (0..2)
        .map(|i| {
            let mut c = client.clone();
            c.set_stream(StreamId(i));
            c
        })
        .collect();
    let mut slots: Vec<Option<Slot>> = (0..SLOTS).map(|_| None).collect();
    for (index, op) in ops.iter().enumerate() {
        let c = &streams[index % 2];
        step(c, &mut slots, op).unwrap_or_else(|why| panic!("op #{index} {op:?}: {why}"));
    }
}

fn fill(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

fn expect_equal(actual: &[u8], model: &[Option<u8>]) -> Result<(), String> {
    if actual.len() != model.len() {
        return Err(format!(
            "read {} bytes, handle holds {}",
            actual.len(),
            model.len()
        ));
    }
    match actual
        .iter()
        .zip(model)
        .position(|(a, m)| m.is_some_and(|m| m != *a))
    {
        Some(at) => Err(format!(
            "byte {at} is {}, model says {:?}",
            actual[at], model[at]
        )),
        None => Ok(()),
    }
}

/// The model's gather: element `i` (row-major over `shape`) is at `sum(index * stride)`.
fn model_gather(
    model: &[Option<u8>],
    shape: &[usize],
    strides: &[usize],
    elem: usize,
) -> Vec<Option<u8>> {
    let count: usize = shape.iter().product();
    let mut out = Vec::with_capacity(count * elem);
    for linear in 0..count {
        let mut rest = linear;
        let mut offset = 0;
        for (dim, stride) in shape.iter().zip(strides).rev() {
            offset += (rest % dim) * stride;
            rest /= dim;
        }
        out.extend_from_slice(&model[offset * elem..(offset + 1) * elem]);
    }
    out
}

fn step(c: &ComputeClient<SimDevice>, slots: &mut [Option<Slot>], op: &IoOp) -> Result<(), String> {
    let slot_of = |s: u8| s as usize % SLOTS;
    match op {
        IoOp::Create { slot, len, fill: f } => {
            let data = fill(*len as usize, *f);
            let handle = c
                .create(Bytes::from(data.clone()))
                .map_err(|e| format!("create: {e}"))?;
            slots[slot_of(*slot)] = Some(Slot {
                handle,
                bytes: data.into_iter().map(Some).collect(),
            });
        }
        IoOp::Empty { slot, size } => match (c.empty(size.bytes()), size) {
            (Ok(handle), Size::Small(_) | Size::Boundary { .. }) => {
                slots[slot_of(*slot)] = Some(Slot {
                    handle,
                    bytes: vec![None; size.bytes()],
                });
            }
            (Err(ServerError::OutOfMemory(_)), Size::Overflowing { .. }) => {}
            (result, _) => {
                return Err(format!("empty({}): got {result:?}", size.bytes()));
            }
        },
        IoOp::Write {
            slot,
            offset,
            len,
            fill: f,
        } => {
            let Some(s) = &mut slots[slot_of(*slot)] else {
                return Ok(());
            };
            let data = fill(*len as usize, *f);
            let fits = *offset as usize + data.len() <= s.bytes.len();
            match (
                c.write_at(&s.handle, *offset as u64, Bytes::from(data.clone())),
                fits,
            ) {
                (Ok(()), true) => {
                    for (i, b) in data.into_iter().enumerate() {
                        s.bytes[*offset as usize + i] = Some(b);
                    }
                }
                (Err(IoError::OutOfRange { .. }), false) => {}
                (result, _) => return Err(format!("write_at: fits={fits}, got {result:?}")),
            }
        }
        IoOp::Read { slot } => {
            let Some(s) = &slots[slot_of(*slot)] else {
                return Ok(());
            };
            let bytes = c
                .read_one(s.handle.clone())
                .map_err(|e| format!("read: {e}"))?;
            expect_equal(&bytes, &s.bytes)?;
        }
        IoOp::ReadTensor {
            slot,
            shape,
            strides,
            elem_size,
        } => {
            let Some(s) = &slots[slot_of(*slot)] else {
                return Ok(());
            };
            let shape: Vec<usize> = shape.iter().take(4).map(|&d| d as usize % 9).collect();
            let strides: Vec<usize> = strides.iter().take(4).map(|&x| x as usize).collect();
            let elem = *elem_size as usize % 17;
            let descriptor =
                CopyDescriptor::new(s.handle.clone(), shape.clone(), strides.clone(), elem);
            let result = lockstep::block_on(c.read_tensor_async(vec![descriptor]));
            let extent = lockstep::extent_bytes(&shape, &strides, elem);
            match (result, extent) {
                (Ok(mut bytes), Ok(extent)) if extent as usize <= s.bytes.len() => {
                    expect_equal(
                        &bytes.remove(0),
                        &model_gather(&s.bytes, &shape, &strides, elem),
                    )?;
                }
                (Err(ServerError::Io(IoError::OutOfRange { .. })), Ok(extent))
                    if extent as usize > s.bytes.len() => {}
                (Err(ServerError::Io(IoError::InvalidLayout { .. })), Err(_)) => {}
                (result, extent) => {
                    return Err(format!("read_tensor: extent {extent:?}, got {result:?}"));
                }
            }
        }
        IoOp::CreateTensors { slot, tensors } => {
            let descriptors: Vec<MemoryLayoutDescriptor> = tensors
                .iter()
                .take(4)
                .map(|(optimized, shape, elem)| {
                    let strategy = if *optimized {
                        MemoryLayoutStrategy::Optimized
                    } else {
                        MemoryLayoutStrategy::Contiguous
                    };
                    let shape = shape.iter().take(3).map(|&d| d as usize % 9).collect();
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
            // The first tensor's whole memory joins the model: its elements where the strides
            // put them, zeroed padding elsewhere.
            if let (Some(first), Some(d)) = (layouts.into_iter().next(), descriptors.first()) {
                let mut bytes = vec![Some(0u8); first.memory.size() as usize];
                for (linear, elem) in data[0].chunks_exact(d.elem_size).enumerate() {
                    let mut rest = linear;
                    let mut offset = 0;
                    for (dim, stride) in d.shape.iter().zip(&first.strides).rev() {
                        offset += (rest % dim) * stride;
                        rest /= dim;
                    }
                    for (i, &b) in elem.iter().enumerate() {
                        bytes[offset * d.elem_size + i] = Some(b);
                    }
                }
                slots[slot_of(*slot)] = Some(Slot {
                    handle: first.memory,
                    bytes,
                });
            }
        }
        IoOp::CreateTensor {
            shape,
            elem_size,
            extra,
        } => {
            let shape: Vec<usize> = shape.iter().take(3).map(|&d| d as usize % 9).collect();
            let elem = 1 + *elem_size as usize % 16;
            let dense = shape.iter().product::<usize>() * elem;
            let len = (dense as isize + *extra as isize % 3).max(0) as usize;
            let data = fill(len, 3);
            match (
                c.create_tensor(Bytes::from(data.clone()), &shape, elem),
                len == dense,
            ) {
                (Ok(layout), true) => {
                    let descriptor = CopyDescriptor::new(
                        layout.memory.clone(),
                        shape.clone(),
                        layout.strides.clone(),
                        elem,
                    );
                    if c.read_tensor(vec![descriptor]).remove(0)[..] != data[..] {
                        return Err("create_tensor then read_tensor differs".into());
                    }
                }
                (Err(ServerError::Io(IoError::SizeMismatch { .. })), false) => {}
                (result, ok) => {
                    return Err(format!("create_tensor: sizes match={ok}, got {result:?}"));
                }
            }
        }
        IoOp::Release { slot } => slots[slot_of(*slot)] = None,
        IoOp::Sync { stream: _ } => c.sync().map_err(|e| format!("sync: {e}"))?,
    }
    Ok(())
}
