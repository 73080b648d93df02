//! A world of simulated processes: each runs the real rendezvous
//! (`lockstep::distributed::bootstrap`) over the in-memory network (`network.rs`), and the
//! world's devices share one hub ([`SimWorldDevices`]), each named by its process's rank.
//!
//! Rank 0's id names the world it made: a process whose rendezvous returned that id opens its
//! device with [`SimWorld::devices_for`]. What the processes then run is their own; a process
//! that will never open its device (it died after joining, or stopped) must
//! [`leave`](SimWorldDevices::leave), so that its peers' collectives fail with `PeerTimeout`
//! instead of waiting for it.

use std::sync::Mutex;

use lockstep::distributed::{BootstrapError, RendezvousOptions, World, WorldEnv, bootstrap};

use crate::device::SimWorldDevices;
use crate::network::{Death, NetEvent, ProcessEnd, SimNetwork, SimProcess};

/// One process of a simulated world: its variables, when it starts, and its faults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRank {
    /// Its `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR` (the network's host is
    /// [`SIM_HOST`](crate::SIM_HOST)) and `MASTER_PORT`.
    pub env: WorldEnv,
    /// Virtual time at which it starts its rendezvous.
    pub start_ns: u64,
    /// Where it dies, if it does.
    pub death: Option<Death>,
    /// Rank 0 only: its `make_id` fails with this reason.
    pub id_failure: Option<String>,
}

impl SimRank {
    /// Rank `rank` of `world_size` (its `LOCAL_RANK` too), reaching rank 0 at
    /// [`SIM_HOST`](crate::SIM_HOST):`master_port`, starting at `start_ns`, without faults.
    pub fn healthy(rank: u32, world_size: u32, master_port: u16, start_ns: u64) -> Self {
        Self {
            env: WorldEnv {
                rank,
                world_size,
                local_rank: rank,
                master_addr: crate::SIM_HOST.to_owned(),
                master_port,
            },
            start_ns,
            death: None,
            id_failure: None,
        }
    }
}

/// How one process's rendezvous ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rendezvous {
    /// It has its place in the world.
    Joined(World),
    /// It returned this error.
    Failed(BootstrapError),
    /// It died as its [`SimRank::death`] scripted.
    Died,
}

/// The rendezvous of a simulated world, run.
#[derive(Debug)]
pub struct SimWorld {
    /// Each process's outcome, in the order given.
    pub rendezvous: Vec<Rendezvous>,
    /// What the processes did on the network, in order.
    pub events: Vec<NetEvent>,
    /// A hash of `events`: equal for equal processes.
    pub trace_hash: u64,
    /// The world rank 0 made once every rank had joined, with its id.
    made: Option<(Vec<u8>, SimWorldDevices)>,
}

impl SimWorld {
    /// Runs the rendezvous of `processes` over a fresh in-memory network, each with `options`,
    /// until every one has its outcome. Deterministic: equal arguments give equal outcomes
    /// and events.
    pub fn rendezvous(processes: &[SimRank], options: RendezvousOptions) -> SimWorld {
        let made = Mutex::new(None);
        let programs = processes
            .iter()
            .map(|process| {
                let made = &made;
                let make_id = move || match &process.id_failure {
                    Some(reason) => Err(reason.clone()),
                    None => {
                        let world_size = process.env.world_size;
                        let id = SimWorld::id(world_size);
                        let devices = SimWorldDevices::new(world_size);
                        *made.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some((id.clone(), devices));
                        Ok(id)
                    }
                };
                SimProcess {
                    name: format!("rank {}", process.env.rank),
                    start_ns: process.start_ns,
                    death: process.death,
                    program: Box::new(move |transport: &_| {
                        bootstrap(transport, &process.env, options, make_id)
                    }),
                }
            })
            .collect();
        let run = SimNetwork::run(programs);
        let rendezvous = run
            .ends
            .into_iter()
            .map(|end| match end {
                ProcessEnd::Returned(Ok(world)) => Rendezvous::Joined(world),
                ProcessEnd::Returned(Err(error)) => Rendezvous::Failed(error),
                ProcessEnd::Died => Rendezvous::Died,
            })
            .collect();
        SimWorld {
            rendezvous,
            events: run.events,
            trace_hash: run.trace_hash,
            made: made.into_inner().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// The id rank 0 makes for a world of `world_size`: `sim-world of N ranks`.
    pub fn id(world_size: u32) -> Vec<u8> {
        format!("sim-world of {world_size} ranks").into_bytes()
    }

    /// The devices of the world a process joined: `Some` if its id is the one rank 0 made.
    pub fn devices_for(&self, world: &World) -> Option<&SimWorldDevices> {
        self.made
            .as_ref()
            .filter(|(id, _)| *id == world.id)
            .map(|(_, devices)| devices)
    }

    /// The world rank 0 made, if it made one (every rank joined, even if some died since).
    pub fn devices(&self) -> Option<&SimWorldDevices> {
        self.made.as_ref().map(|(_, devices)| devices)
    }
}
