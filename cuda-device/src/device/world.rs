//! A CUDA device as one rank of a world of processes (`lockstep::distributed`).
//!
//! [`CudaDevice::from_world_env`] runs the rendezvous of the process's environment (torchrun's
//! or `lockstep launch`'s variables): rank 0 makes NCCL's unique id, every rank receives it,
//! and the device opens GPU `LOCAL_RANK`. The device then names itself by its global rank
//! (`ordinal()` is `RANK`, `device_count()` is `WORLD_SIZE`), so a client's
//! `enumerate_devices`, `peer_id` and device lists speak of the world's ranks.
//!
//! Its one communicator is the world's: the device list `[0, 1, …, WORLD_SIZE-1]` in rank
//! order, NCCL rank = global rank, joined at the first collective (NCCL meets the other
//! processes there, bounded by the collective timeout). Other lists are refused with
//! `CollectiveError::InvalidDevices`: a sub-communicator would need an id of its own. Once
//! the world's communicator is aborted (a peer timed out), its collectives fail with
//! `CommunicatorFailed`: meeting again needs a new rendezvous.

use std::ffi::c_char;
use std::mem::MaybeUninit;

use cudarc::nccl::sys as nccl;
use lockstep::distributed::{
    BootstrapError, RendezvousOptions, Tcp, WorldEnv, bootstrap, check_world_list,
};
use lockstep::{Device, DeviceError};
use thiserror::Error;

use super::CudaDevice;
use super::nccl::nccl_present;

/// This process's place in its world, and the id of the world's communicator.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorldMember {
    pub(crate) rank: u32,
    pub(crate) world_size: u32,
    pub(crate) id: nccl::ncclUniqueId,
}

/// Why a process could not join its world.
#[derive(Debug, Error)]
pub enum JoinWorldError {
    /// The rendezvous failed (bad variables included): its variant says which rank saw what.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// The rendezvous succeeded but GPU `LOCAL_RANK` cannot be opened (no such GPU on this
    /// host, or no driver). The other ranks find out at the first collective, which times out.
    #[error("rank {rank} cannot open its GPU (LOCAL_RANK={local_rank}): {source}")]
    Device {
        /// This process's global rank.
        rank: u32,
        /// The GPU it tried to open.
        local_rank: u32,
        /// Why the GPU cannot be opened.
        source: DeviceError,
    },
    /// Rank 0's id is not NCCL's size: rank 0 is not a CUDA rank (the GPU-free
    /// `rendezvous-probe`, say, whose ids are text). Start every rank from one CUDA program.
    #[error("rank 0 sent a communicator id of {len} bytes; NCCL's has {expected}")]
    IdSize {
        /// The id's length in bytes.
        len: usize,
        /// NCCL's id length in bytes (128).
        expected: usize,
    },
}

impl CudaDevice {
    /// Joins the world of this process's environment on GPU `LOCAL_RANK`, with the default
    /// rendezvous options. See the module documentation.
    ///
    /// # Errors
    /// [`JoinWorldError`]: the rendezvous's [`BootstrapError`] (bad variables included), or
    /// the GPU that cannot be opened.
    pub fn from_world_env() -> Result<Self, JoinWorldError> {
        let env = WorldEnv::from_env().map_err(BootstrapError::from)?;
        Self::join_world(&env, RendezvousOptions::default())
    }

    /// Joins the world `env` describes, over TCP with `options`.
    ///
    /// # Errors
    /// As [`from_world_env`](Self::from_world_env).
    pub fn join_world(env: &WorldEnv, options: RendezvousOptions) -> Result<Self, JoinWorldError> {
        let world = bootstrap(&Tcp::default(), env, options, unique_id_bytes)?;
        let id = id_from_bytes(&world.id)?;
        let device =
            CudaDevice::new(world.local_rank).map_err(|source| JoinWorldError::Device {
                rank: world.rank,
                local_rank: world.local_rank,
                source,
            })?;
        Ok(device.in_world(WorldMember {
            rank: world.rank,
            world_size: world.world_size,
            id,
        }))
    }

    /// The id this device names itself by: its global rank in a world, else its GPU ordinal.
    pub(super) fn member(&self) -> u32 {
        self.world.map_or_else(|| self.ctx.ordinal(), |w| w.rank)
    }

    /// How many devices its communicators may span: the world's ranks, else the GPUs.
    pub(super) fn member_count(&self) -> u32 {
        self.world
            .map_or_else(Self::gpu_count, |world| world.world_size)
    }

    /// In a world, refuses a device list other than the world's in rank order.
    pub(super) fn check_world_list(&self, peers: &[u32]) -> Result<(), DeviceError> {
        let Some(world) = self.world else {
            return Ok(());
        };
        check_world_list(Self::TYPE_ID, world.world_size, peers).map_err(DeviceError::Collective)
    }
}

/// NCCL's unique id as bytes, for rank 0 to send.
fn unique_id_bytes() -> Result<Vec<u8>, String> {
    if !nccl_present() {
        return Err("libnccl cannot be loaded".to_owned());
    }
    let mut unique = MaybeUninit::uninit();
    // SAFETY: writes the id into `unique` on success.
    let result = unsafe { nccl::ncclGetUniqueId(unique.as_mut_ptr()) };
    if result != nccl::ncclResult_t::ncclSuccess {
        return Err(format!("ncclGetUniqueId returned {result:?}"));
    }
    // SAFETY: initialised by the successful call above.
    let unique: nccl::ncclUniqueId = unsafe { unique.assume_init() };
    Ok(unique.internal.iter().map(|&c| c as u8).collect())
}

fn id_from_bytes(bytes: &[u8]) -> Result<nccl::ncclUniqueId, JoinWorldError> {
    let mut id = nccl::ncclUniqueId { internal: [0; 128] };
    if bytes.len() != id.internal.len() {
        return Err(JoinWorldError::IdSize {
            len: bytes.len(),
            expected: id.internal.len(),
        });
    }
    for (slot, &byte) in id.internal.iter_mut().zip(bytes) {
        *slot = byte as c_char;
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_of_the_wrong_size_is_refused() {
        let error = id_from_bytes(b"probe-id-2").unwrap_err();
        insta::assert_snapshot!(error, @"rank 0 sent a communicator id of 10 bytes; NCCL's has 128");
        let id = id_from_bytes(&[7; 128]).unwrap();
        assert!(id.internal.iter().all(|&c| c == 7));
    }
}
