//! `world stall` and `world vanish`: a rank that stops taking part after one all-reduce, seen
//! from the others, which must get a typed error instead of waiting for ever.
//!
//! Every rank all-reduces once (checked exactly), then the last rank stops: with `stall` it
//! stays alive and enqueues nothing more (for three timeouts, then exits); with `vanish` its
//! process exits at once. Every other rank enqueues a second all-reduce and synchronises:
//! - `stall`: it fails with `PeerTimeout` for sequence 1, naming the first other rank (a
//!   process sees only its own progress), no sooner than the collective timeout and well
//!   before three of them;
//! - `vanish`: it fails with `PeerTimeout`, `CommunicatorFailed` (NCCL saw the peer's
//!   connections close) or `DeviceLost` (the peer's memory went away under a kernel) within
//!   the same bound, whichever the transport reports first;
//!
//! and a third all-reduce then fails without waiting (`CommunicatorFailed`: the world's
//! communicator was aborted, and meeting again needs a new rendezvous; or `DeviceLost`).

use std::time::{Duration, Instant};

use lockstep::kernel::ElemType;
use lockstep::{Bytes, CollectiveError, DeviceId, ReduceOperation, ServerError};

use super::{Client, ensure, exact, read_u32};

/// The collective timeout of these checks: long enough for NCCL to join, short enough to wait
/// for three times.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// How the last rank stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Alive, enqueueing nothing more.
    Stall,
    /// Its process exits.
    Vanish,
}

/// Runs the check on this rank; see the module documentation.
pub fn check(client: &Client, stop: Stop) -> Result<(), String> {
    let world = client.enumerate_all_devices();
    let (rank, size) = (client.peer_id().index, world.len() as u32);
    ensure(size >= 2, || {
        format!("a world of {size} has no peer to stop: launch at least 2 processes")
    })?;
    let words: Vec<u32> = (0..1024).map(|i| rank + i).collect();
    let src = client
        .create(Bytes::from_elems(&words))
        .map_err(|e| e.to_string())?;
    let dst = client.empty(words.len() * 4).map_err(|e| e.to_string())?;
    let reduce = || all_reduce_and_sync(client, &src, &dst, &world);
    reduce().map_err(|e| format!("the first all-reduce: {e}"))?;
    exact("sum", &read_u32(client, dst.clone())?, |i| {
        size * i + size * (size - 1) / 2
    })?;

    if rank == size - 1 {
        if stop == Stop::Stall {
            std::thread::sleep(TIMEOUT * 3);
        }
        println!("rank {rank} of {size}: stopped ({stop:?}) after one exact all-reduce");
        return Ok(());
    }

    let started = Instant::now();
    let second = reduce();
    let waited = started.elapsed();
    let first_other = world[usize::from(rank == 0)];
    ensure(expected_failure(&second, stop, first_other), || {
        format!("the all-reduce behind the stopped rank returned {second:?}")
    })?;
    let bound = TIMEOUT * 3;
    ensure(waited < bound, || {
        format!("it failed after {waited:?}, not within {bound:?}")
    })?;
    ensure(stop == Stop::Vanish || waited >= TIMEOUT, || {
        format!("it timed out after {waited:?}, before the timeout of {TIMEOUT:?}")
    })?;

    let started = Instant::now();
    let third = reduce();
    let waited_again = started.elapsed();
    ensure(aborted(&third), || {
        format!("the all-reduce after the abort returned {third:?}")
    })?;
    ensure(waited_again < TIMEOUT, || {
        format!("the all-reduce after the abort waited {waited_again:?}")
    })?;
    println!(
        "rank {rank} of {size}: behind the {stop:?} rank, failed after {waited:.1?} ({}), then at once ({})",
        kind(&second),
        kind(&third)
    );
    Ok(())
}

/// One sum all-reduce of `src` into `dst` over `world`, then the stream's sync: the first
/// error of either.
fn all_reduce_and_sync(
    client: &Client,
    src: &lockstep::Handle,
    dst: &lockstep::Handle,
    world: &[DeviceId],
) -> Result<(), ServerError> {
    let (src, dst) = (src.clone(), dst.clone());
    client.all_reduce(
        src,
        dst,
        ElemType::U32,
        world.to_vec(),
        ReduceOperation::Sum,
    )?;
    client.sync()
}

fn collective_error(result: &Result<(), ServerError>) -> Option<&CollectiveError> {
    match result {
        Err(ServerError::Collective { error, .. }) => Some(error),
        _ => None,
    }
}

/// Whether the all-reduce behind the stopped rank failed as `stop` allows.
fn expected_failure(result: &Result<(), ServerError>, stop: Stop, first_other: DeviceId) -> bool {
    let timed_out = matches!(
        collective_error(result),
        Some(CollectiveError::PeerTimeout { sequence: 1, peer, timeout_ns, .. })
            if *peer == first_other && *timeout_ns == TIMEOUT.as_nanos() as u64
    );
    match stop {
        Stop::Stall => timed_out,
        Stop::Vanish => timed_out || aborted(result),
    }
}

/// Whether `result` is the failure of an aborted communicator or of a lost device.
fn aborted(result: &Result<(), ServerError>) -> bool {
    matches!(
        collective_error(result),
        Some(CollectiveError::CommunicatorFailed { .. })
    ) || matches!(result, Err(ServerError::DeviceLost { .. }))
}

/// The failure's variant, for the report.
fn kind(result: &Result<(), ServerError>) -> &'static str {
    match (result, collective_error(result)) {
        (_, Some(CollectiveError::PeerTimeout { .. })) => "PeerTimeout",
        (_, Some(CollectiveError::CommunicatorFailed { .. })) => "CommunicatorFailed",
        (Err(ServerError::DeviceLost { .. }), _) => "DeviceLost",
        _ => "another result",
    }
}
