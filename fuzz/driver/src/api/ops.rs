//! The operations of an `api` input and their operands, as the fuzzer draws them. Operands
//! are reduced to ranges where the interesting cases are dense (sizes near allocation
//! classes, counts near the device's maximum); each operation names a device by `dev`, a
//! stream by `stream` and a buffer by `slot`, all taken modulo their count.

use arbitrary::Arbitrary;

use super::kernel::KernelSpec;
use super::world::{STREAMS, World};
use super::{collective, data, graphs, kernel, launch, misc};
use crate::{Len, Offset, Strides};

/// An allocation size, small so that inputs stay fast.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum Size {
    /// Up to 255 bytes, empty included.
    Small(u8),
    /// `2^(8 + shift % 5) + delta % 2`: 256 B to 4 KiB, or one byte either side, where the
    /// default pools' smallest slice class ends.
    Boundary { shift: u8, delta: i8 },
    /// `usize::MAX - below`: a size whose rounding overflows, refused as out of memory.
    Overflowing { below: u8 },
}

impl Size {
    pub fn bytes(self) -> usize {
        match self {
            Size::Small(n) => n as usize,
            Size::Boundary { shift, delta } => {
                (1usize << (8 + shift % 5)).saturating_add_signed((delta % 2) as isize)
            }
            Size::Overflowing { below } => usize::MAX - below as usize,
        }
    }
}

/// A tensor's layout for a read or a write of a buffer.
#[derive(Arbitrary, Debug, Clone)]
pub(super) struct Layout {
    /// Up to 3 dimensions, each taken modulo 7.
    pub shape: Vec<u8>,
    pub strides: Strides,
    /// Element size in bytes, taken modulo 9 (0 must be refused).
    pub elem: u8,
}

impl Layout {
    /// The shape, strides and element size.
    pub fn resolve(&self) -> (Vec<usize>, Vec<usize>, usize) {
        let shape: Vec<usize> = self.shape.iter().take(3).map(|&d| d as usize % 7).collect();
        let strides = self.strides.elements(&shape);
        (shape, strides, self.elem as usize % 9)
    }
}

/// How a whole-buffer read is made.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum ReadHow {
    /// `read` (panics on failure: only on a stream the oracle knows to be healthy).
    Read,
    ReadOne,
    ReadAsync,
    /// `read_one_unchecked` (panics on failure, as `read`).
    Unchecked,
}

/// How a tensor read is made.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum TensorHow {
    /// `read_tensor` (panics on failure: only on a healthy stream).
    Read,
    Async,
    OneAsync,
    /// `read_one_unchecked_tensor` (panics on failure).
    Unchecked,
}

/// Where a lazy read's bytes go.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum LazyUse {
    /// `Bytes::materialize`.
    Materialize,
    /// `read_lazy_async`, then `materialize`.
    Async,
    /// `create` on device `dev`, into slot `into`.
    Create { dev: u8, into: u8 },
    /// `write_at` into slot `into` at `at`.
    Write { into: u8, at: Offset },
    /// `write_tensor` into slot `into`, dense.
    WriteTensor { into: u8 },
    /// `create_tensor` of the bytes as a 1-D tensor of bytes, into slot `into`.
    CreateTensor { into: u8 },
}

/// A call that names a handle of another device, refused with `WrongDevice`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(super) enum ForeignCall {
    Write,
    Read,
    ReadTensor,
    Resource,
    LazyWrite,
    AllReduce,
    ToClient,
}

/// One operation of an input.
#[derive(Arbitrary, Debug)]
pub(super) enum Op {
    /// `create` (or `create_from_slice`) of `len % 1025` bytes counting up from `fill`.
    Create {
        slot: u8,
        dev: u8,
        stream: u8,
        len: u16,
        fill: u8,
        from_slice: bool,
    },
    /// `empty` of a [`Size`].
    Empty {
        slot: u8,
        dev: u8,
        stream: u8,
        size: Size,
    },
    /// `write_at` (or `write`, at 0) into a slot.
    Write {
        slot: u8,
        stream: u8,
        at: Offset,
        len: Len,
        fill: u8,
        whole: bool,
    },
    /// A read of a slot (and of `other`, if it is of the same device), checked.
    Read {
        slot: u8,
        other: Option<u8>,
        stream: u8,
        how: ReadHow,
    },
    /// A tensor read of a slot with a drawn layout.
    ReadTensor {
        slot: u8,
        stream: u8,
        layout: Layout,
        how: TensorHow,
    },
    /// `create_tensor`, `create_tensor_from_slice` or `empty_tensor` (`how % 3`) with data
    /// `extra % 3` bytes off the dense size, into a slot.
    CreateTensor {
        slot: u8,
        dev: u8,
        stream: u8,
        shape: Vec<u8>,
        elem: u8,
        extra: i8,
        how: u8,
    },
    /// `create_tensors`, `create_tensors_from_slices` or `empty_tensors` (`how % 3`) of up to
    /// 3 tensors, read back; the first two views go to `slot` and the next slot.
    CreateTensors {
        slot: u8,
        dev: u8,
        stream: u8,
        tensors: Vec<(bool, Vec<u8>, u8)>,
        how: u8,
    },
    /// `write_tensor` (or `write_tensors` of it twice) into a slot.
    WriteTensor {
        slot: u8,
        stream: u8,
        layout: Layout,
        extra: i8,
        fill: u8,
        twice: bool,
    },
    /// Drops a slot's handle.
    Release { slot: u8 },
    /// A call on device `dev` with a slot's handle of another device.
    Foreign {
        slot: u8,
        dev: u8,
        call: ForeignCall,
    },
    /// `read_lazy` of a slot with a drawn layout, then a use of the bytes.
    Lazy {
        slot: u8,
        stream: u8,
        layout: Layout,
        then: LazyUse,
    },
    /// `staging` of host bytes, checked unchanged, then created into a slot.
    Staging {
        slot: u8,
        dev: u8,
        stream: u8,
        lens: Vec<u8>,
        file_only: bool,
    },
    /// Builds a kernel from the grammar into a kernel slot.
    Build { kernel: u8, spec: KernelSpec },
    /// Launches a built kernel.
    Launch(launch::LaunchOp),
    /// A counting kernel's launch, its count static or dynamic.
    Count(launch::CountOp),
    /// Two views of one packing bound to one launch, and one view bound twice.
    Packed(launch::PackedOp),
    /// `graph_prepare`.
    Prepare { dev: u8, stream: u8 },
    /// `start_capture`.
    StartCapture { dev: u8, stream: u8 },
    /// `stop_capture`, the graph into a graph slot.
    StopCapture { dev: u8, stream: u8, graph: u8 },
    /// `Graph::replay` of a graph slot.
    Replay { graph: u8 },
    /// Drops a graph slot.
    DropGraph { graph: u8 },
    /// `flush`, `sync`, `sync_all` or `sync_collective` (`which % 4`).
    Sync { dev: u8, stream: u8, which: u8 },
    /// A memory call: usage, report, pools, budget, cleanup, mode, persistent window.
    Memory(misc::MemoryOp),
    /// A profiling call.
    Profile(misc::ProfileOp),
    /// An all-reduce over some devices of a cluster.
    AllReduce(collective::AllReduceOp),
    /// A collective call refused at the call.
    Refused(collective::RefusedOp),
    /// `to_client` or `to_client_tensor` of a slot to device `dev`.
    ToClient(collective::ToClientOp),
    /// `send_to` and `receive_from` between devices of one cluster.
    SendRecv(collective::SendRecvOp),
    /// `get_resource` of a slot, and `Resource::with_buffer`.
    Resource { slot: u8, stream: u8, hold: bool },
    /// `exclusive` with a closure that computes.
    Exclusive { dev: u8, stream: u8, value: u32 },
    /// The device's description, enumeration and registry.
    Inspect { dev: u8, stream: u8 },
}

/// The stream `pick` names.
pub(super) fn stream(pick: u8) -> usize {
    pick as usize % STREAMS
}

/// Makes `op`'s calls on `world` and checks them.
pub(super) fn step(world: &mut World, op: &Op) -> Result<(), String> {
    match op {
        Op::Create { .. }
        | Op::Empty { .. }
        | Op::Write { .. }
        | Op::Read { .. }
        | Op::ReadTensor { .. }
        | Op::CreateTensor { .. }
        | Op::CreateTensors { .. }
        | Op::WriteTensor { .. }
        | Op::Release { .. }
        | Op::Foreign { .. }
        | Op::Lazy { .. }
        | Op::Staging { .. } => data::step(world, op),
        Op::Build { kernel: slot, spec } => kernel::build(world, *slot, spec),
        Op::Launch(l) => launch::launch(world, l),
        Op::Count(c) => launch::count(world, c),
        Op::Packed(p) => launch::packed(world, p),
        Op::Prepare { .. }
        | Op::StartCapture { .. }
        | Op::StopCapture { .. }
        | Op::Replay { .. }
        | Op::DropGraph { .. }
        | Op::Sync { .. } => graphs::step(world, op),
        Op::Memory(m) => misc::memory(world, m),
        Op::Profile(p) => misc::profile(world, p),
        Op::AllReduce(a) => collective::all_reduce(world, a),
        Op::Refused(r) => collective::refused(world, r),
        Op::ToClient(t) => collective::to_client(world, t),
        Op::SendRecv(s) => collective::send_recv(world, s),
        Op::Resource { .. } | Op::Exclusive { .. } | Op::Inspect { .. } => misc::step(world, op),
    }
}
