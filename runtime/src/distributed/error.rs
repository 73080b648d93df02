//! Why a rendezvous failed, as every rank reports it.

use thiserror::Error;

use super::env::EnvError;

/// The most missing ranks a timeout names: past it, [`BootstrapError::ManyRanksTimeout`]
/// names the first ones and counts them all, so the refusal fits in a frame and rank 0 never
/// lists a huge world's ranks.
pub const MAX_LISTED_MISSING: usize = 64;

/// A failed rendezvous. Rank 0 sends the failures it decides (a timeout, a world-size mismatch,
/// a duplicate rank) to every rank that joined, so those ranks return the same value; any other
/// failure of rank 0 reaches them as [`BootstrapError::Aborted`] with its message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BootstrapError {
    /// A variable of [`WorldEnv`](super::WorldEnv) is missing or malformed; no connection was
    /// made. Start the process with `lockstep launch` or torchrun, or set the variable.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Rank 0 could not listen for the rendezvous (the port in use, or not allowed). Pick a
    /// free `MASTER_PORT`, or stop the process holding it.
    #[error("rank 0 cannot listen on port {port} for the rendezvous: {reason}")]
    Listen {
        /// `MASTER_PORT`.
        port: u16,
        /// The operating system's error.
        reason: String,
    },
    /// A rank other than 0 could not connect to rank 0 within the timeout: rank 0 is dead, did
    /// not start in time, or `MASTER_ADDR`/`MASTER_PORT` name the wrong place; or this rank
    /// came after its world completed without it (a second process with a `RANK` that had
    /// joined, say), when rank 0 no longer listens.
    #[error(
        "rank 0 at {addr} is unreachable: {attempts} connection attempts in {timeout_ms} ms failed, the last with: {reason}"
    )]
    Unreachable {
        /// `MASTER_ADDR:MASTER_PORT`.
        addr: String,
        /// How many connections were tried, one every
        /// [`RendezvousOptions::retry_interval`](super::RendezvousOptions::retry_interval).
        attempts: u32,
        /// The timeout that ran out, in milliseconds.
        timeout_ms: u64,
        /// The last connection attempt's error.
        reason: String,
    },
    /// Rank 0's timeout ran out before every rank joined (a rank crashed, was never started,
    /// or points at another `MASTER_ADDR`/`MASTER_PORT`). Rank 0 returns it and sends it to
    /// every rank that joined, which return it too.
    #[error(
        "rendezvous timed out after {timeout_ms} ms: {} of a world of {world_size} never joined",
        ranks(missing)
    )]
    RankTimeout {
        /// The world's size, rank 0's `WORLD_SIZE`.
        world_size: u32,
        /// The ranks that never joined, ascending: all of them, at most
        /// [`MAX_LISTED_MISSING`].
        missing: Vec<u32>,
        /// Rank 0's timeout, in milliseconds.
        timeout_ms: u64,
    },
    /// [`RankTimeout`](Self::RankTimeout) when more than [`MAX_LISTED_MISSING`] ranks never
    /// joined (a whole host or job step missing): the first ones are named, all are counted.
    /// Rank 0 returns it and sends it to every rank that joined, which return it too.
    #[error(
        "rendezvous timed out after {timeout_ms} ms: {missing_count} ranks of a world of {world_size} never joined, the first {} listed: {first_missing:?}",
        first_missing.len()
    )]
    ManyRanksTimeout {
        /// The world's size, rank 0's `WORLD_SIZE`.
        world_size: u32,
        /// The lowest ranks that never joined, ascending: exactly [`MAX_LISTED_MISSING`].
        first_missing: Vec<u32>,
        /// How many ranks never joined, more than [`MAX_LISTED_MISSING`].
        missing_count: u32,
        /// Rank 0's timeout, in milliseconds.
        timeout_ms: u64,
    },
    /// A rank joined but rank 0 neither replied nor closed the connection within the timeout
    /// and the [`verdict_margin`](super::RendezvousOptions::verdict_margin): rank 0 is alive
    /// but stuck, or another program listens on `MASTER_PORT`.
    #[error("rank 0 at {addr} sent no reply within {timeout_ms} ms of rank {rank} joining")]
    ReplyTimeout {
        /// Rank 0's address, `MASTER_ADDR:MASTER_PORT`.
        addr: String,
        /// The rank that waited.
        rank: u32,
        /// How long it waited after joining at most, in milliseconds (the timeout and the
        /// margin).
        timeout_ms: u64,
    },
    /// A rank's `WORLD_SIZE` differs from rank 0's: the processes were started with different
    /// settings. Every rank that joined returns it; start all of them with one `WORLD_SIZE`.
    #[error(
        "world size mismatch: rank {rank} has WORLD_SIZE={actual}, rank 0 has WORLD_SIZE={expected}"
    )]
    WorldSizeMismatch {
        /// The rank whose `WORLD_SIZE` differs.
        rank: u32,
        /// Rank 0's `WORLD_SIZE`.
        expected: u32,
        /// That rank's `WORLD_SIZE`.
        actual: u32,
    },
    /// Two joins claimed one rank (two processes with one `RANK`), or a join claimed rank 0,
    /// which is rank 0's own. Every rank that joined returns it; give each process its own
    /// `RANK` in `0..WORLD_SIZE`. Seen only while rank 0 waits for joins: a duplicate that
    /// comes after the world completed finds rank 0 no longer listening and returns
    /// [`Unreachable`](Self::Unreachable).
    #[error("rank {rank} joined twice: two processes have RANK={rank}")]
    DuplicateRank {
        /// The rank claimed twice.
        rank: u32,
    },
    /// Rank 0 closed the connection after this rank joined and before it sent the id: rank 0
    /// died (its own error, if it printed one, says why).
    #[error("rank 0 at {addr} closed the connection before rank {rank} had the communicator id")]
    RankZeroClosed {
        /// Rank 0's address, `MASTER_ADDR:MASTER_PORT`.
        addr: String,
        /// The rank that was waiting.
        rank: u32,
    },
    /// The peer speaks another version of the rendezvous protocol: the processes run
    /// different builds of Lockstep; run one build everywhere. Rank 0 returns it, and the
    /// ranks that joined get it as [`Aborted`](Self::Aborted) with its message.
    #[error(
        "rendezvous protocol version mismatch: this process speaks version {ours}, {peer} speaks {theirs}"
    )]
    VersionMismatch {
        /// The peer's address.
        peer: String,
        /// This build's [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION).
        ours: u16,
        /// The peer's version.
        theirs: u16,
    },
    /// A rendezvous frame of this version that is not the message expected there (truncated,
    /// an unknown kind, a rank outside its world): a bug or a corrupted connection.
    #[error("malformed rendezvous message from {peer}: {reason}")]
    Protocol {
        /// Who sent it.
        peer: String,
        /// What is wrong with it, for a person to read.
        reason: String,
    },
    /// The connection failed (reset, a send that timed out); the rendezvous cannot go on.
    #[error("rendezvous I/O with {peer} failed while {during}: {reason}")]
    Io {
        /// The other end.
        peer: String,
        /// What this process was doing, e.g. `"sending its join"`.
        during: &'static str,
        /// The operating system's error.
        reason: String,
    },
    /// Rank 0 failed for a reason the wire carries only as text (a version mismatch, a
    /// malformed join, a failed [`Id`](Self::Id) or [`Io`](Self::Io)); rank 0's own error
    /// has the details.
    #[error("rank 0 aborted the rendezvous: {reason}")]
    Aborted {
        /// Rank 0's error message.
        reason: String,
    },
    /// Rank 0's `make_id` failed (on CUDA, NCCL could not make its unique id), made an id over
    /// [`MAX_ID_BYTES`](super::MAX_ID_BYTES), which no frame carries, or made it after the
    /// joined ranks stopped waiting (past rank 0's deadline and the verdict margin); rank 0
    /// returns it and the other ranks get [`Aborted`](Self::Aborted) (or, having stopped
    /// waiting, [`ReplyTimeout`](Self::ReplyTimeout)).
    #[error("rank 0 could not make the communicator id: {reason}")]
    Id {
        /// What `make_id` returned.
        reason: String,
    },
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
