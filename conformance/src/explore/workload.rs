//! A world's workload: what each host thread does, and the deterministic order in which the
//! threads take turns.

use lockstep::ReduceOperation;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::world::World;

/// Buffer slots shared by every thread.
pub const SLOTS: usize = 6;
/// Tensor-group slots shared by every thread.
pub const TENSOR_SLOTS: usize = 2;
/// Most `u32` elements of a buffer (up to 256 KiB: small, medium and exclusive pool sizes).
pub const MAX_ELEMS: usize = 1 << 16;

/// Which stream an action runs on: a pinned one (`StreamId(i)`), or the calling thread's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    Pinned(usize),
    Thread,
}

/// A launch of one of the world's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    pub kernel: usize,
    pub dst: usize,
    pub src: usize,
    pub k: u32,
}

/// One client operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// `create` with `len` elements drawn from `fill`.
    Create {
        slot: usize,
        len: usize,
        fill: u64,
    },
    /// `empty`, then a write of the whole buffer (what users do with `empty`).
    EmptyThenFill {
        slot: usize,
        len: usize,
        fill: u64,
    },
    /// `write_at` of `len` elements at element `offset` (both clipped to the buffer).
    Write {
        slot: usize,
        offset: usize,
        len: usize,
        fill: u64,
    },
    Launch(LaunchSpec),
    /// `read_one`.
    Read {
        slot: usize,
    },
    /// `read_async` of two slots, awaited together.
    ReadPair {
        a: usize,
        b: usize,
    },
    /// `create_tensors` of 1–3 shapes, packed into one allocation.
    CreateTensors {
        slot: usize,
        shapes: Vec<Vec<usize>>,
        fill: u64,
    },
    /// `read_tensor` of every tensor of the group.
    ReadTensors {
        slot: usize,
    },
    /// `read_lazy`: the copy runs at first access, in a later [`Action::Materialize`].
    ReadLazy {
        slot: usize,
    },
    /// First access of the oldest lazy read.
    Materialize,
    /// A launch inside `profile`; its duration must resolve.
    Profile(LaunchSpec),
    /// A launch inside `dry_run`: compiled and validated, never executed.
    DryRun(LaunchSpec),
    Release {
        slot: usize,
    },
    ReleaseTensors {
        slot: usize,
    },
    Flush,
    Sync,
    /// A checked kernel that stores out of range: a `KernelFault` (fault-free worlds only).
    Overrun {
        slot: usize,
        past_end: u32,
    },
    /// `graph_prepare`, a warm-up of the launches, then capture of the same launches.
    Capture {
        launches: Vec<LaunchSpec>,
    },
    Replay,
    DropGraph,
    /// An in-place `all_reduce` of `slot` with a fresh buffer on every peer device (`fill`).
    AllReduce {
        slot: usize,
        op: ReduceOperation,
        fill: u64,
    },
    /// `to_client` of `slot` to peer `peer`, read back there.
    ToPeer {
        slot: usize,
        peer: usize,
    },
    /// `to_client` of a fresh buffer of peer `peer` into `slot`.
    FromPeer {
        slot: usize,
        peer: usize,
        len: usize,
        fill: u64,
    },
    /// `install_memory_pools` with the default preset mid-run.
    Install,
    Cleanup,
    /// `memory_usage` must answer.
    Usage,
}

/// An action and the stream it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub on: On,
    pub action: Action,
}

/// What every thread does, and the order of turns: `schedule[n]` is the thread that performs
/// the `n`-th operation of the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub threads: Vec<Vec<Step>>,
    pub schedule: Vec<usize>,
}

impl Workload {
    pub fn draw(world: &World) -> Workload {
        let mut rng = ChaCha8Rng::seed_from_u64(world.seed.rotate_left(17) ^ 0xa5a5);
        let threads: Vec<Vec<Step>> = (0..world.threads)
            .map(|_| {
                (0..world.ops_per_thread)
                    .map(|_| draw_step(world, &mut rng))
                    .collect()
            })
            .collect();
        let mut remaining: Vec<usize> = threads.iter().map(Vec::len).collect();
        let mut schedule = Vec::with_capacity(remaining.iter().sum());
        loop {
            let live: Vec<usize> = (0..remaining.len()).filter(|&t| remaining[t] > 0).collect();
            let Some(&t) = live.choose(&mut rng) else {
                break;
            };
            remaining[t] -= 1;
            schedule.push(t);
        }
        Workload { threads, schedule }
    }

    /// Every step with its thread, in the order the threads perform them.
    pub fn in_order(&self) -> impl Iterator<Item = (usize, &Step)> {
        let mut next = vec![0; self.threads.len()];
        self.schedule.iter().map(move |&t| {
            next[t] += 1;
            (t, &self.threads[t][next[t] - 1])
        })
    }

    pub fn len(&self) -> usize {
        self.schedule.len()
    }

    pub fn is_empty(&self) -> bool {
        self.schedule.is_empty()
    }
}

fn elems(rng: &mut impl Rng) -> usize {
    // Mostly small buffers, some of each larger pool size.
    match rng.random_range(0..8) {
        0 => rng.random_range(1024..=MAX_ELEMS),
        1 | 2 => rng.random_range(64..1024),
        _ => rng.random_range(1..64),
    }
}

fn launch(world: &World, rng: &mut impl Rng) -> LaunchSpec {
    LaunchSpec {
        kernel: rng.random_range(0..world.kernels.len()),
        dst: rng.random_range(0..SLOTS),
        src: rng.random_range(0..SLOTS),
        k: rng.random(),
    }
}

fn draw_step(world: &World, rng: &mut impl Rng) -> Step {
    let on = if rng.random_ratio(1, 5) {
        On::Thread
    } else {
        On::Pinned(rng.random_range(0..world.streams))
    };
    let slot = rng.random_range(0..SLOTS);
    let fill = rng.random();
    // Drawn only where there are peers, so single-device workloads stay what they were.
    if world.peers > 0 && rng.random_ratio(1, 6) {
        let peer = rng.random_range(0..world.peers);
        let action = match rng.random_range(0..3) {
            0 => Action::AllReduce {
                slot,
                op: [
                    ReduceOperation::Sum,
                    ReduceOperation::Min,
                    ReduceOperation::Max,
                ][rng.random_range(0..3)],
                fill,
            },
            1 => Action::ToPeer { slot, peer },
            _ => Action::FromPeer {
                slot,
                peer,
                len: elems(rng),
                fill,
            },
        };
        return Step { on, action };
    }
    let action = loop {
        let action = match rng.random_range(0..112) {
            0..12 => Action::Create {
                slot,
                len: elems(rng),
                fill,
            },
            12..16 => Action::EmptyThenFill {
                slot,
                len: elems(rng),
                fill,
            },
            16..26 => Action::Write {
                slot,
                offset: rng.random_range(0..MAX_ELEMS),
                len: rng.random_range(1..256),
                fill,
            },
            26..46 => Action::Launch(launch(world, rng)),
            46..56 => Action::Read { slot },
            56..59 => Action::ReadPair {
                a: slot,
                b: rng.random_range(0..SLOTS),
            },
            59..62 => Action::CreateTensors {
                slot: rng.random_range(0..TENSOR_SLOTS),
                shapes: (0..rng.random_range(1..=3))
                    .map(|_| {
                        (0..rng.random_range(1..=3))
                            .map(|_| rng.random_range(1..=24))
                            .collect()
                    })
                    .collect(),
                fill,
            },
            62..65 => Action::ReadTensors {
                slot: rng.random_range(0..TENSOR_SLOTS),
            },
            65..72 => Action::Release { slot },
            72..74 => Action::ReleaseTensors {
                slot: rng.random_range(0..TENSOR_SLOTS),
            },
            74..77 => Action::Flush,
            77..82 => Action::Sync,
            82..84 if !world.injects_faults() => Action::Overrun {
                slot,
                past_end: rng.random_range(0..8),
            },
            84..86 if world.graphs => Action::Capture {
                launches: (0..rng.random_range(1..=4))
                    .map(|_| launch(world, rng))
                    .collect(),
            },
            86..91 if world.graphs => Action::Replay,
            91..92 if world.graphs => Action::DropGraph,
            92..94 => Action::Install,
            94..97 => Action::Cleanup,
            97..100 => Action::Usage,
            100..103 => Action::ReadLazy { slot },
            103..106 => Action::Materialize,
            106..109 => Action::Profile(launch(world, rng)),
            109..112 => Action::DryRun(launch(world, rng)),
            _ => continue,
        };
        break action;
    };
    Step { on, action }
}

/// `len` elements drawn from `fill`.
pub fn data(fill: u64, len: usize) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(fill);
    (0..len).map(|_| rng.random()).collect()
}
