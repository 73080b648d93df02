//! Collectives through NCCL (cudarc's `nccl` bindings, `libnccl` loaded at run time).
//!
//! One process drives every GPU, one actor thread per device, so each device creates its own
//! rank of a communicator with `ncclCommInitRank`; the ranks meet inside NCCL, which returns
//! once all of them have called it (their actors run concurrently, so no group call is needed).
//! A rank is created once per process for each (device list, GPU) and kept, like the context
//! and its compiled kernels: later devices of the same GPU (the conformance suite opens one per
//! case) reuse it without another rendezvous, and no rank is destroyed while a peer may still
//! need it. So one device per GPU may use a communicator at a time.
//!
//! Without `libnccl` the device reports no collectives: the runtime refuses them with a typed
//! `Unsupported` error and copies between clients by read-then-write.
//!
//! **Not covered:** NCCL waits for a peer that never enqueues its part without a timeout, so a
//! program that never calls a collective on one device leaves the others' streams waiting (the
//! simulator turns that case into `PeerTimeout`). Mismatched peers (sizes, types) are not
//! detected.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::{Mutex, OnceLock};

use cudarc::nccl::sys as nccl;
use lockstep::collective::CommunicatorId;
use lockstep::kernel::ElemType;
use lockstep::{CollectiveError, Device, DeviceError, DeviceId, ReduceOperation};

use super::{CudaBuffer, CudaDevice, CudaStream};
use crate::context::lock;
use lockstep::device::BufferSlice;

/// Whether `libnccl` can be loaded, checked once per process.
pub(crate) fn nccl_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library.
    *PRESENT.get_or_init(|| unsafe { nccl::is_culib_present() })
}

/// NCCL ranks of this process, by (device list, GPU ordinal), and the unique id of each list.
#[derive(Default)]
struct Ranks {
    ranks: BTreeMap<(Vec<u32>, u32), Rank>,
    ids: BTreeMap<Vec<u32>, nccl::ncclUniqueId>,
}

/// A communicator rank, never destroyed (see the module documentation).
#[derive(Clone, Copy, Debug)]
struct Rank(nccl::ncclComm_t);

// SAFETY: an opaque NCCL handle; it is used by one device's actor thread at a time.
unsafe impl Send for Rank {}

fn ranks() -> &'static Mutex<Ranks> {
    static RANKS: OnceLock<Mutex<Ranks>> = OnceLock::new();
    RANKS.get_or_init(Default::default)
}

/// This device's rank of a communicator.
#[derive(Debug)]
pub(crate) struct Communicator {
    raw: nccl::ncclComm_t,
    peers: Vec<u32>,
}

fn devices_of(peers: &[u32]) -> Vec<DeviceId> {
    peers
        .iter()
        .map(|&index| DeviceId {
            type_id: CudaDevice::TYPE_ID,
            index,
        })
        .collect()
}

fn failed(peers: &[u32], call: &str, result: nccl::ncclResult_t) -> DeviceError {
    DeviceError::Collective(CollectiveError::CommunicatorFailed {
        devices: devices_of(peers),
        reason: format!("{call} returned {result:?}"),
    })
}

fn check(peers: &[u32], call: &str, result: nccl::ncclResult_t) -> Result<(), DeviceError> {
    match result {
        nccl::ncclResult_t::ncclSuccess => Ok(()),
        other => Err(failed(peers, call, other)),
    }
}

fn data_type(elem: ElemType) -> nccl::ncclDataType_t {
    match elem {
        ElemType::U32 => nccl::ncclDataType_t::ncclUint32,
        ElemType::I32 => nccl::ncclDataType_t::ncclInt32,
        ElemType::F32 => nccl::ncclDataType_t::ncclFloat32,
    }
}

fn reduce_op(op: ReduceOperation) -> nccl::ncclRedOp_t {
    match op {
        ReduceOperation::Sum => nccl::ncclRedOp_t::ncclSum,
        ReduceOperation::Prod => nccl::ncclRedOp_t::ncclProd,
        ReduceOperation::Min => nccl::ncclRedOp_t::ncclMin,
        ReduceOperation::Max => nccl::ncclRedOp_t::ncclMax,
        ReduceOperation::Mean => nccl::ncclRedOp_t::ncclAvg,
    }
}

impl CudaDevice {
    /// The device count of the driver, or 1 (this device) if it cannot say.
    pub(super) fn gpu_count() -> u32 {
        cudarc::driver::result::device::get_count()
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1)
    }

    pub(super) fn nccl_create(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        self.ctx.bind()?;
        let ordinal = self.ctx.ordinal();
        let position = peers.iter().position(|&p| p == ordinal).ok_or_else(|| {
            DeviceError::ExecutionFault {
                operation: "create_communicator".to_owned(),
                reason: format!(
                    "the runtime broke the contract: GPU {ordinal} is not in {peers:?}"
                ),
            }
        })?;
        let key = (peers.to_vec(), ordinal);
        let known = lock(ranks()).ranks.get(&key).copied();
        let rank = match known {
            Some(rank) => rank,
            None => {
                let unique = Self::unique_id(peers)?;
                let mut raw = MaybeUninit::uninit();
                // SAFETY: blocks until every rank has called it with the same id; the context
                // of this GPU is current, which is the device NCCL binds the rank to.
                let result = unsafe {
                    nccl::ncclCommInitRank(
                        raw.as_mut_ptr(),
                        peers.len() as i32,
                        unique,
                        position as i32,
                    )
                };
                check(peers, "ncclCommInitRank", result)?;
                // SAFETY: initialised by the successful call above.
                let rank = Rank(unsafe { raw.assume_init() });
                lock(ranks()).ranks.insert(key, rank);
                rank
            }
        };
        self.communicators.insert(
            id,
            Communicator {
                raw: rank.0,
                peers: peers.to_vec(),
            },
        );
        Ok(())
    }

    /// The unique id every rank of `peers` joins, made by the first to ask.
    fn unique_id(peers: &[u32]) -> Result<nccl::ncclUniqueId, DeviceError> {
        let mut table = lock(ranks());
        if let Some(unique) = table.ids.get(peers) {
            return Ok(*unique);
        }
        let mut unique = MaybeUninit::uninit();
        // SAFETY: writes the id into `unique` on success.
        let result = unsafe { nccl::ncclGetUniqueId(unique.as_mut_ptr()) };
        check(peers, "ncclGetUniqueId", result)?;
        // SAFETY: initialised by the successful call above.
        let unique = unsafe { unique.assume_init() };
        table.ids.insert(peers.to_vec(), unique);
        Ok(unique)
    }

    /// The communicator and raw stream a collective runs on.
    fn collective_on(
        &self,
        stream: CudaStream,
        comm: CommunicatorId,
        operation: &str,
    ) -> Result<(&Communicator, nccl::cudaStream_t), DeviceError> {
        let raw = self.uncaptured(stream, operation)?;
        let communicator =
            self.communicators
                .get(&comm)
                .ok_or_else(|| DeviceError::ExecutionFault {
                    operation: operation.to_owned(),
                    reason: format!("the runtime broke the contract: no communicator {comm:?}"),
                })?;
        Ok((communicator, raw.cast()))
    }

    pub(super) fn nccl_all_reduce(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        dst: BufferSlice<'_, CudaBuffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        let (communicator, raw) = self.collective_on(stream, comm, "all_reduce")?;
        let count = (src.len / elem.size_bytes() as u64) as usize;
        // SAFETY: both ranges lie inside live allocations of this context (the runtime checks
        // them and keeps them alive until the stream passes this point).
        let result = unsafe {
            nccl::ncclAllReduce(
                src.buffer.at(src.offset) as *const c_void,
                dst.buffer.at(dst.offset) as *mut c_void,
                count,
                data_type(elem),
                reduce_op(op),
                communicator.raw,
                raw,
            )
        };
        check(&communicator.peers, "ncclAllReduce", result)
    }

    pub(super) fn nccl_send(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let (communicator, raw) = self.collective_on(stream, comm, "send")?;
        // SAFETY: as for `ncclAllReduce`.
        let result = unsafe {
            nccl::ncclSend(
                src.buffer.at(src.offset) as *const c_void,
                src.len as usize,
                nccl::ncclDataType_t::ncclUint8,
                peer as i32,
                communicator.raw,
                raw,
            )
        };
        check(&communicator.peers, "ncclSend", result)
    }

    pub(super) fn nccl_recv(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        let (communicator, raw) = self.collective_on(stream, comm, "recv")?;
        // SAFETY: as for `ncclAllReduce`.
        let result = unsafe {
            nccl::ncclRecv(
                dst.buffer.at(dst.offset) as *mut c_void,
                dst.len as usize,
                nccl::ncclDataType_t::ncclUint8,
                peer as i32,
                communicator.raw,
                raw,
            )
        };
        check(&communicator.peers, "ncclRecv", result)
    }
}
