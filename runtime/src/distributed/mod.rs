//! Beyond one process: the rendezvous that gives every process of a world the same
//! communicator id, from the variables torchrun and `lockstep launch` set.
//!
//! Each process reads `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` and `MASTER_PORT`
//! ([`WorldEnv`]). Rank 0 listens on `MASTER_PORT`; every other rank connects to
//! `MASTER_ADDR:MASTER_PORT` (retrying, since rank 0 may start later) and sends a join with its
//! rank and world size. Once every rank has joined, rank 0 makes the id (NCCL's unique id on
//! CUDA) and sends it to all of them at once; each process then opens its communicator rank on
//! its local GPU. Messages are tiny versioned frames (`frame.rs`).
//!
//! The decisions are state machines without I/O (`rendezvous.rs`: [`RankZero`], [`Joiner`]),
//! driven by blocking loops (`bootstrap.rs`) over a [`Transport`]: TCP ([`Tcp`]) between real
//! processes, an in-memory network with virtual time in the simulator (`lockstep_sim::SimWorld`
//! runs simulated processes over `lockstep_sim::SimNetwork`, one at a time, the next picked by
//! virtual time then rank, so a world's outcome and events depend on its processes alone). So
//! the same logic, and the same errors, hold for both; the simulator's tests give every failure
//! mode below its exact outcome on every rank, and `lockstep explore` draws such worlds.
//!
//! **Naming.** Across processes, a device is named by the global rank of the process that
//! drives it: `DeviceId { type_id, index: rank }`, and the world's devices are
//! `0..world_size` ([`world_devices`]). A communicator's device list is a list of global ranks,
//! and the one a world has is the world's, in rank order ([`check_world_list`]).
//!
//! **Failure modes.** Every failure is a typed [`BootstrapError`], and every wait is bounded:
//! rank 0 waits [`RendezvousOptions::timeout`] from its start, another rank tries to connect
//! for the timeout from its start, then waits for the reply the timeout and
//! [`RendezvousOptions::verdict_margin`] from its connection (rank 0 was listening then, so
//! the rank hears rank 0's verdict even when rank 0 started long after it):
//! - a variable missing or malformed: [`EnvError`], before any connection;
//! - rank 0 not listening (dead, not started within the timeout, a wrong address): the others
//!   retry, then return [`BootstrapError::Unreachable`]; rank 0 unable to listen (the port in
//!   use): [`BootstrapError::Listen`];
//! - a rank that never joins: rank 0 returns [`BootstrapError::RankTimeout`] naming the
//!   missing ranks, and sends it to every rank that joined, which return it too (past
//!   [`MAX_LISTED_MISSING`] missing ranks, [`BootstrapError::ManyRanksTimeout`] names the first
//!   ones and counts them all);
//! - a rank with another `WORLD_SIZE` ([`BootstrapError::WorldSizeMismatch`]), a rank that joins
//!   twice (two processes with one `RANK`, or a join claiming rank 0:
//!   [`BootstrapError::DuplicateRank`]), a peer of another protocol version
//!   ([`BootstrapError::VersionMismatch`]): the first such join aborts the rendezvous, and rank
//!   0 and every rank that joined return the same error (a version mismatch reaches them as
//!   [`BootstrapError::Aborted`] with its message). Ranks that had not joined yet find rank 0
//!   gone and return [`BootstrapError::Unreachable`]. Only a join rank 0 still waits for is
//!   checked: a second process with a `RANK` that joins after the world completed finds no
//!   one listening, like a rank whose rank 0 died, so it retries until its timeout and
//!   returns [`BootstrapError::Unreachable`], not [`BootstrapError::DuplicateRank`], while
//!   the world it meant to join goes on without it;
//! - rank 0 dying after a rank joined: that rank returns [`BootstrapError::RankZeroClosed`];
//!   rank 0 alive but silent: [`BootstrapError::ReplyTimeout`];
//! - rank 0 deciding late: it decides by its deadline (a connection's first frame is awaited
//!   no later, and an accept failing for the moment is retried no later), and an id made
//!   after the joined ranks' margin ran out is sent to none: rank 0 returns
//!   [`BootstrapError::Id`], ranks still waiting get it as [`BootstrapError::Aborted`], the
//!   others [`BootstrapError::ReplyTimeout`]. No rank goes on with an id another gave up on;
//! - a connection that sends no rendezvous frame (a port scan, another program) is dropped
//!   and ignored.
//!
//! Not covered: a rank that dies after it joined is not noticed by the rendezvous; its peers
//! find out at their first collective with it (NCCL's join times out with `PeerTimeout`; in the
//! simulator, the dead process leaves the world's hub and its peers fail with `PeerTimeout`).

mod bootstrap;
mod env;
mod error;
mod frame;
mod naming;
mod rendezvous;
mod tcp;
mod transport;

#[cfg(test)]
mod tests;

pub use bootstrap::{RendezvousOptions, World, bootstrap, join, serve};
pub use env::{EnvError, WorldEnv};
pub use error::{BootstrapError, MAX_LISTED_MISSING};
pub use frame::{MAX_FRAME_BYTES, MAX_ID_BYTES, Message, PROTOCOL_VERSION, Undecodable};
pub use naming::{check_world_list, world_devices};
pub use rendezvous::{Admission, Joiner, RankZero, refusal};
pub use tcp::{Tcp, TcpLink, TcpRendezvousListener};
pub use transport::{Link, Listener, Received, Transport};

/// Reads the process's environment and runs its rendezvous over TCP with the default options.
///
/// # Errors
/// [`BootstrapError`], [`BootstrapError::Env`] for the variables.
pub fn bootstrap_from_env(
    make_id: impl FnOnce() -> Result<Vec<u8>, String>,
) -> Result<World, BootstrapError> {
    let env = WorldEnv::from_env()?;
    bootstrap(&Tcp::default(), &env, RendezvousOptions::default(), make_id)
}
