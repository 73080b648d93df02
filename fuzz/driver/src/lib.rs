//! The logic of the `fuzz/` targets, kept here so that `cargo test` replays the checked-in
//! corpora on stable.
//!
//! - `io` ([`run`], this module): the read/write paths under arbitrary input. Every call must
//!   return the right bytes or a typed error that the reference model predicts: never a panic,
//!   never a hang, never a wrong byte. Sizes reach the classes where allocation goes wrong
//!   ([`Size`]): empty, one byte, slice and page boundaries ±1, and sizes whose rounding
//!   overflows.
//! - `api` ([`api::run`]): every public client call and the kernel builder, on simulated
//!   clusters, each call checked by an oracle; see [`api`].
//! - `recording` ([`recording::run`]): the recording reader on arbitrary bytes; see
//!   [`recording`].
//!
//! Clients run inline ([`ComputeClient::inline`]): one input is a few dozen calls, and an
//! actor thread per input cost more than the calls.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use arbitrary::{Arbitrary, Unstructured};
use lockstep::{ComputeClient, Handle, ServerOptions, StreamId};
use lockstep_sim::{SimConfig, SimDevice};

pub mod api;
mod calls;
mod model;
pub mod recording;

use calls::{create, create_tensor, create_tensors, empty, read, read_tensor, write, write_tensor};
use model::Known;

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
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Offset {
    /// `n % (size + 1)`: inside the buffer, or exactly at its end.
    Within(u32),
    /// `size + 1 + n`: past the end.
    Past(u16),
    /// `u64::MAX - n`: where `offset + len` overflows.
    Huge(u16),
}

impl Offset {
    pub(crate) fn bytes(&self, size: usize) -> u64 {
        match *self {
            Offset::Within(n) => n as u64 % (size as u64 + 1),
            Offset::Past(n) => size as u64 + 1 + n as u64,
            Offset::Huge(n) => u64::MAX - n as u64,
        }
    }
}

/// A write's length, given the `room` left between its offset and the buffer's end.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Len {
    /// `n % (room + 1)`: fits (an empty write included).
    Fits(u16),
    /// `room + 1 + n % 64`: one to 64 bytes too many.
    Over(u8),
}

impl Len {
    pub(crate) fn bytes(&self, room: usize) -> usize {
        match *self {
            Len::Fits(n) => n as usize % (room + 1),
            Len::Over(n) => room + 1 + n as usize % 64,
        }
    }
}

/// The element strides of a tensor read.
#[derive(Arbitrary, Debug, Clone)]
pub enum Strides {
    /// Row-major over the shape, as a dense tensor lies: the read mostly fits.
    Contiguous,
    /// Strides of 0 to 3 elements (up to 4): broadcasts and overlaps with a small extent.
    Small(Vec<u8>),
    /// Any strides (up to 4): broadcasts, overlaps, rank mismatches and extents past the end.
    Free(Vec<u16>),
}

impl Strides {
    pub(crate) fn elements(&self, shape: &[usize]) -> Vec<usize> {
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

/// A drawn shape: its first `rank` dimensions, each taken modulo 9.
fn dims(drawn: &[u8], rank: usize) -> Vec<usize> {
    drawn.iter().take(rank).map(|&d| d as usize % 9).collect()
}

/// `len` bytes counting up from `fill` (wrapping).
pub(crate) fn fill(len: usize, fill: u8) -> Vec<u8> {
    (0..len).map(|i| fill.wrapping_add(i as u8)).collect()
}

/// Makes `op`'s call on `c` and checks it against the model of `slots`.
fn step(c: &Client, slots: &mut [Option<Slot>], op: &IoOp) -> Result<(), String> {
    let slot_of = |s: u8| s as usize % SLOTS;
    match op {
        IoOp::Create { slot, len, fill: f } => {
            slots[slot_of(*slot)] = Some(create(c, fill(*len as usize, *f))?);
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
                read(c, s)?;
            }
        }
        IoOp::ReadTensor {
            slot,
            shape,
            strides,
            elem_size,
        } => {
            if let Some(s) = &slots[slot_of(*slot)] {
                let shape = dims(shape, 4);
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
            let shape = dims(shape, 3);
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
                let shape = dims(shape, 4);
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
