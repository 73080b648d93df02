//! Why a rendezvous failed, as every rank reports it.

use thiserror::Error;

use super::env::EnvError;

/// A failed rendezvous. Rank 0 sends the failures it decides (a timeout, a world-size mismatch,
/// a duplicate rank) to every rank that joined, so those ranks return the same value; any other
/// failure of rank 0 reaches them as [`BootstrapError::Aborted`] with its message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BootstrapError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error("rank 0 cannot listen on port {port} for the rendezvous: {reason}")]
    Listen { port: u16, reason: String },
    #[error(
        "rank 0 at {addr} is unreachable: {attempts} connection attempts in {timeout_ms} ms failed, the last with: {reason}"
    )]
    Unreachable {
        addr: String,
        attempts: u32,
        timeout_ms: u64,
        reason: String,
    },
    #[error(
        "rendezvous timed out after {timeout_ms} ms: {} of a world of {world_size} never joined",
        ranks(missing)
    )]
    RankTimeout {
        world_size: u32,
        missing: Vec<u32>,
        timeout_ms: u64,
    },
    #[error("rank 0 at {addr} sent no reply within {timeout_ms} ms of rank {rank} joining")]
    ReplyTimeout {
        addr: String,
        rank: u32,
        timeout_ms: u64,
    },
    #[error(
        "world size mismatch: rank {rank} has WORLD_SIZE={actual}, rank 0 has WORLD_SIZE={expected}"
    )]
    WorldSizeMismatch {
        rank: u32,
        expected: u32,
        actual: u32,
    },
    #[error("rank {rank} joined twice: two processes have RANK={rank}")]
    DuplicateRank { rank: u32 },
    #[error("rank 0 at {addr} closed the connection before rank {rank} had the communicator id")]
    RankZeroClosed { addr: String, rank: u32 },
    #[error(
        "rendezvous protocol version mismatch: this process speaks version {ours}, {peer} speaks {theirs}"
    )]
    VersionMismatch {
        peer: String,
        ours: u16,
        theirs: u16,
    },
    #[error("malformed rendezvous message from {peer}: {reason}")]
    Protocol { peer: String, reason: String },
    #[error("rendezvous I/O with {peer} failed while {during}: {reason}")]
    Io {
        peer: String,
        during: &'static str,
        reason: String,
    },
    #[error("rank 0 aborted the rendezvous: {reason}")]
    Aborted { reason: String },
    #[error("rank 0 could not make the communicator id: {reason}")]
    Id { reason: String },
}

/// `rank 2` or `ranks [2, 3]`.
fn ranks(missing: &[u32]) -> String {
    match missing {
        [one] => format!("rank {one}"),
        many => format!("ranks {many:?}"),
    }
}

/// A duration in whole milliseconds, saturated, for messages.
pub(super) fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
