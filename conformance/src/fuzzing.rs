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

type Client = ComputeClient<SimDevice>;

/// An allocation size.
#[derive(Arbitrary, Debug)]
pub enum Size {
    /// Up to 64 KiB: empty, one byte, and everything between.
    Small(u16),
    /// `2^(8 + shift % 11) + delta % 2`: a power of two from 256 B to 256 KiB, or one byte
    /// either side of it, where the default pools' slice classes (4 KiB, 256 KiB) end.
    Boundary {
        /// Picks the power of two: `2^(8 + shift % 11)`.
        shift: u8,
        /// Adds `delta % 2` bytes (-1, 0 or 1).
        delta: i8,
    },
    /// `usize::MAX - below`: a size whose rounding to the allocation unit overflows.
    Overflowing {
        /// Bytes below `usize::MAX`.
        below: u16,
    },
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

/// Where a write starts in a buffer of `size` bytes: mostly inside it, so that writes land.
#[derive(Arbitrary, Debug)]
pub enum Offset {
    /// `n % (size + 1)`: inside the buffer, or exactly at its end.
    Within(u32),
    /// `size + 1 + n`: past the end.
    Past(u16),
    /// `u64::MAX - n`: where `offset + len` overflows.
    Huge(u16),
}

impl Offset {
    fn bytes(&self, size: usize) -> u64 {
        match *self {
            Offset::Within(n) => n as u64 % (size as u64 + 1),
            Offset::Past(n) => size as u64 + 1 + n as u64,
            Offset::Huge(n) => u64::MAX - n as u64,
        }
    }
}

/// A write's length, given the `room` left between its offset and the buffer's end.
#[derive(Arbitrary, Debug)]
pub enum Len {
    /// `n % (room + 1)`: fits (an empty write included).
    Fits(u16),
    /// `room + 1 + n % 64`: one to 64 bytes too many.
    Over(u8),
}

impl Len {
    fn bytes(&self, room: usize) -> usize {
        match *self {
            Len::Fits(n) => n as usize % (room + 1),
            Len::Over(n) => room + 1 + n as usize % 64,
        }
    }
}

/// The element strides of a tensor read.
#[derive(Arbitrary, Debug)]
pub enum Strides {
    /// Row-major over the shape, as a dense tensor lies: the read mostly fits.
    Contiguous,
    /// Strides of 0 to 3 elements (up to 4): broadcasts and overlaps with a small extent.
    Small(Vec<u8>),
    /// Any strides (up to 4): broadcasts, overlaps, rank mismatches and extents past the end.
    Free(Vec<u16>),
}

impl Strides {
    fn elements(&self, shape: &[usize]) -> Vec<usize> {
        match self {
            Strides::Contiguous => lockstep::contiguous_strides(shape),
            Strides::Small(strides) => strides.iter().take(4).map(|&x| x as usize % 4).collect(),
            Strides::Free(strides) => strides.iter().take(4).map(|&x| x as usize).collect(),
        }
    }
}

/// One client call of a fuzz input, with operands the fuzzer draws freely; each is reduced to a
/// valid range or checked against the reference model. Operations alternate between two streams, by
/// position.
#[derive(Arbitrary, Debug)]
pub enum IoOp {
    /// `create` of `len` bytes counting up from `fill`, into `slot`.
    Create {
        /// The slot the handle goes to (modulo the slot count).
        slot: u8,
        /// Bytes created.
        len: u16,
        /// First byte of the data; each next byte is one more (wrapping).
        fill: u8,
    },
    /// `empty` of a [`Size`], into `slot`; an overflowing size must be refused as out of memory.
    Empty {
        /// The slot the handle goes to (modulo the slot count).
        slot: u8,
        /// The size asked for.
        size: Size,
    },
    /// `write_at` into the handle in `slot`, if any: must land when it fits and be refused with
    /// `OutOfRange` when it does not.
    Write {
        /// The slot written (modulo the slot count).
        slot: u8,
        /// Where the write starts.
        at: Offset,
        /// How many bytes it writes.
        len: Len,
        /// First byte of the data; each next byte is one more (wrapping).
        fill: u8,
    },
    /// `read_one` of the handle in `slot`, checked against the model.
    Read {
        /// The slot read (modulo the slot count).
        slot: u8,
    },
    /// `read_tensor_async` of the handle in `slot` with a drawn layout: the gathered bytes, or the
    /// error the layout calls for.
    ReadTensor {
        /// The slot read (modulo the slot count).
        slot: u8,
        /// Up to 4 dimensions, each taken modulo 9.
        shape: Vec<u8>,
        /// Element strides.
        strides: Strides,
        /// Element size in bytes, taken modulo 17 (0 must be refused).
        elem_size: u8,
    },
    /// `create_tensors` of up to 4 tensors, each read back with its strides; the first one's memory
    /// goes into `slot`.
    CreateTensors {
        /// The slot the first tensor's memory goes to (modulo the slot count).
        slot: u8,
        /// Per tensor: whether rows may be pitched (`Optimized`), up to 3 dimensions (each modulo
        /// 9) and the element size (`1 + elem % 16` bytes).
        tensors: Vec<(bool, Vec<u8>, u8)>,
    },
    /// `create_tensor` with data `extra % 3` bytes off the dense size: read back when the size is
    /// right, refused with `SizeMismatch` otherwise.
    CreateTensor {
        /// Up to 3 dimensions, each taken modulo 9.
        shape: Vec<u8>,
        /// Element size, `1 + elem_size % 16` bytes.
        elem_size: u8,
        /// Bytes added to the dense size, taken modulo 3 (so -2 to 2).
        extra: i8,
    },
    /// `write_tensor` into the handle in `slot`, if any, with a drawn layout and data `extra % 3`
    /// bytes off the dense size: lands where the strides say when nothing refuses it, else is
    /// refused with one of the errors that apply, writing nothing.
    WriteTensor {
        /// The slot written (modulo the slot count).
        slot: u8,
        /// Up to 4 dimensions, each taken modulo 9.
        shape: Vec<u8>,
        /// Element strides.
        strides: Strides,
        /// Element size in bytes, taken modulo 17 (0 must be refused).
        elem_size: u8,
        /// Bytes added to the dense size, taken modulo 3 (so -2 to 2).
        extra: i8,
        /// First byte of the data; each next byte is one more (wrapping).
        fill: u8,
    },
    /// Drops the handle in `slot`.
    Release {
        /// The slot emptied (modulo the slot count).
        slot: u8,
    },
    /// `sync` of the stream the operation's position picks.
    Sync {
        /// Ignored: the position picks the stream.
        stream: bool,
    },
}

/// What the model knows of a buffer's bytes: byte `i` is `values[i]` where `known[i]` is
/// 0xFF, and never written where it is 0. Compared eight bytes at a time: reads are checked
/// after every operation, and a byte-wise comparison was a quarter of the fuzzer's time.
struct Known {
    values: Vec<u8>,
    known: Vec<u8>,
}

impl Known {
    fn written(values: Vec<u8>) -> Self {
        let known = vec![0xFF; values.len()];
        Self { values, known }
    }

    fn unwritten(len: usize) -> Self {
        Self {
            values: vec![0; len],
            known: vec![0; len],
        }
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.values[offset..offset + data.len()].copy_from_slice(data);
        self.known[offset..offset + data.len()].fill(0xFF);
    }

    /// The elements `shape` and `strides` select (row-major), dense.
    fn gather(&self, shape: &[usize], strides: &[usize], elem: usize) -> Known {
        let count: usize = shape.iter().product();
        let mut out = Known {
            values: Vec::with_capacity(count * elem),
            known: Vec::with_capacity(count * elem),
        };
        for linear in 0..count {
            let at = element_offset(linear, shape, strides) * elem;
            out.values.extend_from_slice(&self.values[at..at + elem]);
            out.known.extend_from_slice(&self.known[at..at + elem]);
        }
        out
    }

    /// `actual` must hold every known byte.
    fn check(&self, actual: &[u8]) -> Result<(), String> {
        if actual.len() != self.len() {
            return Err(format!(
                "read {} bytes, handle holds {}",
                actual.len(),
                self.len()
            ));
        }
        let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().expect("8-byte chunk"));
        let differ = |(a, (v, k)): (&[u8], (&[u8], &[u8]))| (word(a) ^ word(v)) & word(k) != 0;
        let mut chunks = actual
            .chunks_exact(8)
            .zip(self.values.chunks_exact(8).zip(self.known.chunks_exact(8)));
        let tail = actual.len() - actual.len() % 8;
        let suspect = chunks.position(differ).map_or(tail, |c| 8 * c);
        match (suspect..actual.len()).find(|&i| self.known[i] != 0 && actual[i] != self.values[i]) {
            Some(at) => Err(format!(
                "byte {at} is {}, model says {}",
                actual[at], self.values[at]
            )),
            None => Ok(()),
        }
    }
}

/// `write_tensor` of `data` into `s` laid out as `shape`, `strides` and `elem` bytes an
/// element. The contract's refusals: `InvalidLayout` for a bad layout (ranks that differ, a
/// zero element size, an extent that overflows) or one whose strides do not nest,
/// `SizeMismatch` for data of the wrong size, `OutOfRange` for an extent past the handle. With
/// none of them, the write must land, element `i` of `data` where the strides put it (the
/// elements at distinct places); with several, any one of them may be the refusal.
fn write_tensor(
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

/// The contract's rule for a layout a write may use: taken by increasing stride, each
/// dimension's stride reaches past everything the dimensions before it span. Dimensions of one
/// element place nothing twice, and an empty tensor has no elements.
fn nests(shape: &[usize], strides: &[usize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut dims: Vec<(usize, usize)> = strides
        .iter()
        .zip(shape)
        .filter(|&(_, &dim)| dim > 1)
        .map(|(&stride, &dim)| (stride, dim))
        .collect();
    dims.sort_unstable();
    let mut reach = 0usize;
    dims.into_iter().all(|(stride, dim)| {
        let nested = stride > reach;
        reach = reach.saturating_add(stride.saturating_mul(dim - 1));
        nested
    })
}

/// Where element `linear` (row-major over `shape`) lies, in elements: `sum(index * stride)`.
fn element_offset(linear: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut rest = linear;
    let mut offset = 0;
    for (dim, stride) in shape.iter().zip(strides).rev() {
        offset += (rest % dim) * stride;
        rest /= dim;
    }
    offset
}

/// A slot's handle and what the model knows of its bytes.
struct Slot {
    handle: Handle,
    bytes: Known,
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

/// Makes `op`'s call on `c` and checks it against the model of `slots`.
fn step(c: &Client, slots: &mut [Option<Slot>], op: &IoOp) -> Result<(), String> {
    let slot_of = |s: u8| s as usize % SLOTS;
    match op {
        IoOp::Create { slot, len, fill: f } => {
            let data = fill(*len as usize, *f);
            let handle = c
                .create(Bytes::from(data.clone()))
                .map_err(|e| format!("create: {e}"))?;
            slots[slot_of(*slot)] = Some(Slot {
                handle,
                bytes: Known::written(data),
            });
        }
        IoOp::Empty { slot, size } => empty(c, &mut slots[slot_of(*slot)], size)?,
        IoOp::Write {
            slot,
            at,
            len,
            fill: f,
        } => {
            if let Some(s) = &mut slots[slot_of(*slot)] {
                let offset = at.bytes(s.bytes.len());
                let room = (s.bytes.len() as u64).saturating_sub(offset) as usize;
                write(c, s, offset, &fill(len.bytes(room), *f))?;
            }
        }
        IoOp::Read { slot } => {
            if let Some(s) = &slots[slot_of(*slot)] {
                let bytes = c
                    .read_one(s.handle.clone())
                    .map_err(|e| format!("read: {e}"))?;
                s.bytes.check(&bytes)?;
            }
        }
        IoOp::ReadTensor {
            slot,
            shape,
            strides,
            elem_size,
        } => {
            if let Some(s) = &slots[slot_of(*slot)] {
                let shape: Vec<usize> = shape.iter().take(4).map(|&d| d as usize % 9).collect();
                let strides = strides.elements(&shape);
                read_tensor(c, s, &shape, &strides, *elem_size as usize % 17)?;
            }
        }
        IoOp::CreateTensors { slot, tensors } => {
            if let Some(first) = create_tensors(c, tensors)? {
                slots[slot_of(*slot)] = Some(first);
            }
        }
        IoOp::CreateTensor {
            shape,
            elem_size,
            extra,
        } => {
            let shape: Vec<usize> = shape.iter().take(3).map(|&d| d as usize % 9).collect();
            create_tensor(c, &shape, 1 + *elem_size as usize % 16, *extra as isize % 3)?;
        }
        IoOp::WriteTensor {
            slot,
            shape,
            strides,
            elem_size,
            extra,
            fill: f,
        } => {
            if let Some(s) = &mut slots[slot_of(*slot)] {
                let shape: Vec<usize> = shape.iter().take(4).map(|&d| d as usize % 9).collect();
                let strides = strides.elements(&shape);
                let elem = *elem_size as usize % 17;
                let dense = shape.iter().product::<usize>() * elem;
                let data = fill((dense as isize + *extra as isize % 3).max(0) as usize, *f);
                write_tensor(c, s, (&shape, &strides, elem), &data)?;
            }
        }
        IoOp::Release { slot } => slots[slot_of(*slot)] = None,
        IoOp::Sync { stream: _ } => c.sync().map_err(|e| format!("sync: {e}"))?,
    }
    Ok(())
}

/// `empty` of `size` into `slot`: served unless the size overflows, then refused as out of
/// memory.
fn empty(c: &Client, slot: &mut Option<Slot>, size: &Size) -> Result<(), String> {
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
fn write(c: &Client, s: &mut Slot, offset: u64, data: &[u8]) -> Result<(), String> {
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
fn read_tensor(
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
fn create_tensors(c: &Client, tensors: &[(bool, Vec<u8>, u8)]) -> Result<Option<Slot>, String> {
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
fn create_tensor(c: &Client, shape: &[usize], elem: usize, extra: isize) -> Result<(), String> {
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
