//! What every process of a [`ProcessWorld`] must see: its rendezvous's exact outcome, then
//! each step's exact values or exact errors.

use std::fmt;

use lockstep::distributed::{BootstrapError, World, world_devices};
use lockstep::{CollectiveError, Device, ServerError, StreamId};
use lockstep_sim::{COLLECTIVE_TIMEOUT_NS, CONNECT_NS, Rendezvous, SIM_HOST, SimDevice, SimWorld};

use super::{OPTIONS, PORT, ProcessFault, ProcessWorld};

/// A step of a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Every rank all-reduces its input over the world.
    AllReduce,
    /// Every rank sends to the next rank and receives from the previous one.
    Ring,
}

/// One thing a process saw; a process's list is compared whole with the model's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// Its rendezvous ended so.
    Rendezvous(Rendezvous),
    /// A step gave exactly the reference's bytes.
    Exact {
        /// The round, from 0.
        round: u32,
        /// The step.
        step: Step,
    },
    /// A step failed with these errors, oldest first (the calls and the waits of the step).
    Failed {
        /// The round, from 0.
        round: u32,
        /// The step.
        step: Step,
        /// Every error, in the order the client returned them.
        errors: Vec<ServerError>,
    },
    /// A step's bytes differ from the reference's (never expected).
    Wrong {
        /// The round, from 0.
        round: u32,
        /// The step.
        step: Step,
        /// The reference's and the read's words.
        detail: String,
    },
    /// The process ended before this round, as its fault scripted.
    Ended {
        /// The first round it missed.
        round: u32,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::AllReduce => "all-reduce",
            Step::Ring => "ring",
        })
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seen::Rendezvous(Rendezvous::Joined(world)) => {
                write!(f, "rendezvous: rank {} of {}", world.rank, world.world_size)
            }
            Seen::Rendezvous(Rendezvous::Failed(error)) => write!(f, "rendezvous: {error}"),
            Seen::Rendezvous(Rendezvous::Died) => f.write_str("rendezvous: died"),
            Seen::Exact { round, step } => write!(f, "round {round} {step}: exact"),
            Seen::Failed {
                round,
                step,
                errors,
            } => {
                let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                write!(f, "round {round} {step}: {}", errors.join("; "))
            }
            Seen::Wrong {
                round,
                step,
                detail,
            } => write!(f, "round {round} {step}: wrong bytes: {detail}"),
            Seen::Ended { round } => write!(f, "round {round}: the process ended"),
        }
    }
}

/// The stream every process runs round `round` on.
pub(super) fn round_stream(round: u32) -> StreamId {
    StreamId(u64::from(round))
}

/// What each process (in [`ProcessWorld::processes`]'s order) must see.
pub fn expected(world: &ProcessWorld) -> Vec<Vec<Seen>> {
    let rendezvous = rendezvous(world);
    let joined = rendezvous
        .iter()
        .filter(|r| matches!(r, Rendezvous::Joined(_)))
        .count();
    let mut seen: Vec<Vec<Seen>> = rendezvous
        .into_iter()
        .map(|r| vec![Seen::Rendezvous(r)])
        .collect();
    if joined == 0 {
        return seen;
    }
    // Every process is rank `index`: only worlds whose processes are ranks 0.. in order form.
    let gone = match world.fault {
        Some(ProcessFault::DiesJoining { rank }) => Some((rank, 0)),
        Some(ProcessFault::Crashes { rank, round } | ProcessFault::DeviceLost { rank, round }) => {
            Some((rank, round))
        }
        _ => None,
    };
    for (rank, seen) in (0..).zip(&mut seen) {
        if !matches!(seen[0], Seen::Rendezvous(Rendezvous::Joined(_))) {
            continue;
        }
        for round in 0..world.rounds {
            if !round_of(world, rank, round, gone, seen) {
                break;
            }
        }
    }
    seen
}

/// Adds what rank `rank` sees in `round`; false once it has ended.
fn round_of(
    world: &ProcessWorld,
    rank: u32,
    round: u32,
    gone: Option<(u32, u32)>,
    seen: &mut Vec<Seen>,
) -> bool {
    let dead = gone
        .filter(|&(_, from)| round >= from)
        .map(|(dead, _)| dead);
    if dead == Some(rank) {
        match world.fault {
            Some(ProcessFault::DeviceLost { .. }) => {
                let reason = format!(
                    "injected device loss before `write` on {} [injected fault #0] (seed {})",
                    round_stream(round),
                    world.device_seed(rank)
                );
                let errors = vec![ServerError::DeviceLost { reason }];
                seen.push(Seen::Failed {
                    round,
                    step: Step::AllReduce,
                    errors,
                });
            }
            _ => seen.push(Seen::Ended { round }),
        }
        return false;
    }
    let previous = (rank + world.world_size - 1) % world.world_size;
    for (step, waits_for_dead) in [
        (Step::AllReduce, dead.is_some()),
        (Step::Ring, dead == Some(previous)),
    ] {
        seen.push(match dead.filter(|_| waits_for_dead) {
            Some(dead) => Seen::Failed {
                round,
                step,
                errors: vec![peer_timeout(world, round, dead)],
            },
            None => Seen::Exact { round, step },
        });
    }
    true
}

/// The failure of collective number `round` (each round has one all-reduce, and one receive
/// from each rank's previous one) waiting for rank `dead`.
fn peer_timeout(world: &ProcessWorld, round: u32, dead: u32) -> ServerError {
    let devices = world_devices(SimDevice::TYPE_ID, world.world_size);
    ServerError::Collective {
        stream: round_stream(round),
        error: CollectiveError::PeerTimeout {
            peer: devices[dead as usize],
            devices,
            sequence: u64::from(round),
            timeout_ns: COLLECTIVE_TIMEOUT_NS,
        },
    }
}

/// Each process's rendezvous: every fault but the ones after it fails the whole world alike.
fn rendezvous(world: &ProcessWorld) -> Vec<Rendezvous> {
    let processes = world.processes();
    let size = world.world_size;
    let timeout_ms = OPTIONS.timeout.as_millis() as u64;
    let all = |error: BootstrapError| vec![Rendezvous::Failed(error); processes.len()];
    match world.fault {
        Some(ProcessFault::NeverJoins { rank: 0 }) => {
            // Each attempt is a refused round trip and a pause, until the next would end past
            // the timeout.
            let retry_ns = OPTIONS.retry_interval.as_nanos() as u64;
            let timeout_ns = OPTIONS.timeout.as_nanos() as u64;
            all(BootstrapError::Unreachable {
                addr: format!("{SIM_HOST}:{PORT}"),
                attempts: timeout_ns.div_ceil(CONNECT_NS + retry_ns) as u32,
                timeout_ms,
                reason: "connection refused".to_owned(),
            })
        }
        Some(ProcessFault::NeverJoins { rank }) => all(BootstrapError::RankTimeout {
            world_size: size,
            missing: vec![rank],
            timeout_ms,
        }),
        Some(ProcessFault::RankZeroDies) => (0..size)
            .map(|rank| match rank {
                0 => Rendezvous::Died,
                _ => Rendezvous::Failed(BootstrapError::RankZeroClosed {
                    addr: format!("{SIM_HOST}:{PORT}"),
                    rank,
                }),
            })
            .collect(),
        Some(ProcessFault::IdFails) => {
            let id = BootstrapError::Id {
                reason: world.id_failure(),
            };
            let mut outcomes = all(BootstrapError::Aborted {
                reason: id.to_string(),
            });
            outcomes[0] = Rendezvous::Failed(id);
            outcomes
        }
        Some(ProcessFault::WorldSizeMismatch { rank }) => all(BootstrapError::WorldSizeMismatch {
            rank,
            expected: size,
            actual: size + 1,
        }),
        Some(ProcessFault::DuplicateRank { rank, .. }) => {
            all(BootstrapError::DuplicateRank { rank })
        }
        _ => (0..size)
            .map(|rank| match world.fault {
                Some(ProcessFault::DiesJoining { rank: dead }) if dead == rank => Rendezvous::Died,
                _ => Rendezvous::Joined(World {
                    rank,
                    world_size: size,
                    local_rank: rank,
                    id: SimWorld::id(size),
                }),
            })
            .collect(),
    }
}
