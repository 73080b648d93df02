//! Worlds of simulated processes: in one seed in eight, besides its device workload, the
//! explorer draws a world of 2 to 4 processes ([`ProcessWorld`]), each running the real
//! rendezvous (`lockstep::distributed::bootstrap`) over the simulator's in-memory network
//! (`lockstep_sim::SimWorld`), then a few rounds of an all-reduce and a ring of `send_to` /
//! `receive_from` on its own client, whose device the world's hub joins under its global rank.
//!
//! Under `--faults`, three in four such worlds draw one fault ([`ProcessFault`]): a rank that
//! never starts, dies after sending its join, or comes last with another `WORLD_SIZE` or a rank
//! already taken; rank 0 dying before the id goes out, or failing to make it; a process that
//! ends, or whose device is lost, at a round. The model ([`expected`]) says what every process
//! must see: its rendezvous's exact outcome, then each step's exact values or exact errors (a
//! peer's collective with a dead rank ends in `PeerTimeout`, the rank whose device is lost gets
//! `DeviceLost`); nothing may hang. Each world runs twice: the outcomes, the network's events
//! and the devices' traces must be equal.
//!
//! **Determinism.** The processes take turns on the network (one runs at a time, picked by
//! virtual time then rank); after the rendezvous one thread drives every process's inline
//! client, a step at a time: every process enqueues its part, then every process waits, so
//! no wait blocks on a peer that is alive (a peer that is gone left the hub).
//!
//! **Architecture Invariant:** the process world is drawn from a random stream of its own: a
//! seed that draws none explores exactly what it did before.

mod model;
mod run;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

use lockstep::ReduceOperation;
use lockstep::distributed::RendezvousOptions;
use lockstep::kernel::ElemType;
use lockstep_sim::{Death, SimRank};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use model::{Seen, Step, expected};
pub use run::{ProcessRun, check, run};

#[cfg(test)]
use run::differs;

const MS: u64 = 1_000_000;
/// Processes start within this much virtual time of each other.
const START_SPREAD_NS: u64 = 20 * MS;
/// When a process that must join last (another `WORLD_SIZE`, a rank already taken) starts:
/// long after the others joined, long before the timeout.
const LATE_START_NS: u64 = 1_000 * MS;
/// The `MASTER_PORT` of every simulated world.
pub const PORT: u16 = 29500;

/// The rendezvous options of every simulated world: short, in virtual time.
pub const OPTIONS: RendezvousOptions = RendezvousOptions {
    timeout: Duration::from_millis(2_000),
    retry_interval: Duration::from_millis(10),
    join_frame_timeout: Duration::from_millis(500),
    verdict_margin: Duration::from_millis(200),
};

/// One fault of a world of processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessFault {
    /// Rank `rank` never starts.
    NeverJoins {
        /// The missing rank (0: nobody listens).
        rank: u32,
    },
    /// Rank `rank` (not 0) dies right after sending its join.
    DiesJoining {
        /// The rank that dies.
        rank: u32,
    },
    /// Rank 0 dies once every rank joined, before the id goes out.
    RankZeroDies,
    /// Rank 0's `make_id` fails.
    IdFails,
    /// Rank `rank` (not 0) comes last, with `WORLD_SIZE` one larger.
    WorldSizeMismatch {
        /// The mismatched rank.
        rank: u32,
    },
    /// A second process with `RANK=rank` comes last, and rank `missing` never starts.
    DuplicateRank {
        /// The rank claimed twice (not 0).
        rank: u32,
        /// The rank nobody claims (not 0, not `rank`).
        missing: u32,
    },
    /// Rank `rank`'s process ends after the rendezvous, before round `round`.
    Crashes {
        /// The rank that ends.
        rank: u32,
        /// The first round it misses.
        round: u32,
    },
    /// Rank `rank`'s device is lost at its first operation of round `round`.
    DeviceLost {
        /// The rank whose device is lost.
        rank: u32,
        /// The round it is lost in.
        round: u32,
    },
}

impl ProcessFault {
    /// Every class of outcome, as [`ProcessWorld::outcome`] names them.
    pub const OUTCOMES: [&'static str; 10] = [
        "fault-free",
        "a rank never joins",
        "rank 0 never starts",
        "a rank dies joining",
        "rank 0 dies",
        "the id fails",
        "world size mismatch",
        "duplicate rank",
        "a process ends",
        "a device is lost",
    ];

    fn draw(rng: &mut ChaCha8Rng, world_size: u32, rounds: u32) -> ProcessFault {
        let rank = |rng: &mut ChaCha8Rng| rng.random_range(0..world_size);
        let nonzero = |rng: &mut ChaCha8Rng| rng.random_range(1..world_size);
        let round = |rng: &mut ChaCha8Rng| rng.random_range(0..rounds);
        match rng.random_range(0..8) {
            0 => ProcessFault::NeverJoins { rank: rank(rng) },
            1 => ProcessFault::DiesJoining { rank: nonzero(rng) },
            2 => ProcessFault::RankZeroDies,
            3 => ProcessFault::IdFails,
            // A duplicate needs another rank to leave out: two ranks besides 0.
            4 if world_size >= 3 => {
                let rank = nonzero(rng);
                let others: Vec<u32> = (1..world_size).filter(|&m| m != rank).collect();
                let missing = others[rng.random_range(0..others.len())];
                ProcessFault::DuplicateRank { rank, missing }
            }
            4 | 5 => ProcessFault::WorldSizeMismatch { rank: nonzero(rng) },
            6 => ProcessFault::Crashes {
                rank: rank(rng),
                round: round(rng),
            },
            _ => ProcessFault::DeviceLost {
                rank: rank(rng),
                round: round(rng),
            },
        }
    }
}

/// A world of simulated processes a seed drew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessWorld {
    /// The seed it was drawn from (its devices' seeds and data derive from it).
    pub seed: u64,
    /// `WORLD_SIZE`.
    pub world_size: u32,
    /// When each rank starts, in virtual nanoseconds.
    pub starts_ns: Vec<u64>,
    /// Rounds of the workload: an all-reduce, then a ring of sends.
    pub rounds: u32,
    /// The all-reduce's element type.
    pub elem: ElemType,
    /// The all-reduce's operation.
    pub op: ReduceOperation,
    /// Elements of every buffer.
    pub elems: usize,
    /// Its fault, if it has one.
    pub fault: Option<ProcessFault>,
}

impl ProcessWorld {
    /// The world of processes of `seed`, in one seed in eight; faulty (three in four) only
    /// with `faults`. Drawn from a random stream of its own.
    pub fn draw(seed: u64, faults: bool) -> Option<ProcessWorld> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e0c_e55e_5000_5eed);
        if !rng.random_ratio(1, 8) {
            return None;
        }
        let world_size = rng.random_range(2..=4);
        let starts_ns = (0..world_size)
            .map(|_| rng.random_range(0..START_SPREAD_NS))
            .collect();
        let rounds = rng.random_range(1..=3);
        let elem = [ElemType::U32, ElemType::I32, ElemType::F32][rng.random_range(0..3)];
        let op = [
            ReduceOperation::Sum,
            ReduceOperation::Prod,
            ReduceOperation::Min,
            ReduceOperation::Max,
            ReduceOperation::Mean,
        ][rng.random_range(0..5)];
        let elems = rng.random_range(1..=16);
        let fault = (faults && !rng.random_ratio(1, 4))
            .then(|| ProcessFault::draw(&mut rng, world_size, rounds));
        Some(ProcessWorld {
            seed,
            world_size,
            starts_ns,
            rounds,
            elem,
            op,
            elems,
            fault,
        })
    }

    /// The processes to start, in order: ranks `0..world_size` (less a missing one), then a
    /// duplicate, if any.
    pub fn processes(&self) -> Vec<SimRank> {
        let process = |rank: u32, world_size: u32, start_ns: u64| {
            SimRank::healthy(rank, world_size, PORT, start_ns)
        };
        let mut processes: Vec<SimRank> = (0..self.world_size)
            .map(|rank| process(rank, self.world_size, self.starts_ns[rank as usize]))
            .collect();
        match self.fault {
            Some(ProcessFault::NeverJoins { rank }) => {
                processes.remove(rank as usize);
            }
            Some(ProcessFault::DiesJoining { rank }) => {
                processes[rank as usize].death = Some(Death::AfterSend(1));
            }
            Some(ProcessFault::RankZeroDies) => processes[0].death = Some(Death::AtSend(1)),
            Some(ProcessFault::IdFails) => processes[0].id_failure = Some(self.id_failure()),
            Some(ProcessFault::WorldSizeMismatch { rank }) => {
                processes[rank as usize] = process(rank, self.world_size + 1, LATE_START_NS);
            }
            Some(ProcessFault::DuplicateRank { rank, missing }) => {
                processes.remove(missing as usize);
                processes.push(process(rank, self.world_size, LATE_START_NS));
            }
            Some(ProcessFault::Crashes { .. } | ProcessFault::DeviceLost { .. }) | None => {}
        }
        processes
    }

    /// What rank 0's failing `make_id` says.
    fn id_failure(&self) -> String {
        format!("injected: no communicator id (seed {})", self.seed)
    }

    /// The seed of rank `rank`'s device.
    fn device_seed(&self, rank: u32) -> u64 {
        self.seed ^ u64::from(rank + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// The class of outcome this world explores, one of [`ProcessFault::OUTCOMES`].
    pub fn outcome(&self) -> &'static str {
        let class = match self.fault {
            None => 0,
            Some(ProcessFault::NeverJoins { rank: 0 }) => 2,
            Some(ProcessFault::NeverJoins { .. }) => 1,
            Some(ProcessFault::DiesJoining { .. }) => 3,
            Some(ProcessFault::RankZeroDies) => 4,
            Some(ProcessFault::IdFails) => 5,
            Some(ProcessFault::WorldSizeMismatch { .. }) => 6,
            Some(ProcessFault::DuplicateRank { .. }) => 7,
            Some(ProcessFault::Crashes { .. }) => 8,
            Some(ProcessFault::DeviceLost { .. }) => 9,
        };
        ProcessFault::OUTCOMES[class]
    }
}

impl fmt::Display for ProcessWorld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let starts: Vec<String> = self
            .starts_ns
            .iter()
            .map(|ns| format!("{:.3} ms", *ns as f64 / MS as f64))
            .collect();
        let fault = match self.fault {
            Some(fault) => format!("{fault:?}"),
            None => "none".to_owned(),
        };
        write!(
            f,
            "processes: world of {}, starting at [{}], {} rounds of {} x {} {}, fault: {fault}",
            self.world_size,
            starts.join(", "),
            self.rounds,
            self.elems,
            self.elem,
            self.op
        )
    }
}
