//! A world: everything about one explored run that its seed draws — the simulated device, the
//! host's threads and streams, the pools, the fault rates and the kernels.

use std::fmt;

use lockstep::{
    Device, LayoutError, MemoryConfiguration, MemoryPoolsConfig, PoolLayout, PoolPreset,
};
use lockstep_sim::{FaultPlan, FaultRates, SimConfig, SimDevice};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::boundary::Bounds;
use super::processes::ProcessWorld;
use lockstep_kernels::elementwise::WORKGROUP;
use lockstep_kernels::formula::Formula;

const MIB: u64 = 1 << 20;

/// The largest pool edge buffers are drawn at: larger buffers cost the model more time than
/// they reveal (the workload's own sizes stop at 256 KiB too).
const MAX_EDGE_BYTES: u64 = 256 << 10;

/// Virtual time a world may take before the simulator declares it hung. Workloads run a few
/// hundred operations of microseconds each; a second of virtual time is far beyond any of them.
pub const WATCHDOG_NS: u64 = 1_000_000_000;

/// Most waits for a lost explored device a peer may time out on in one run (each costs the
/// simulator's collective timeout, a second of virtual time): more than a workload's steps.
pub const MAX_PEER_TIMEOUTS: usize = 4096;

/// The drawn parameters of one seed. Equal seeds (and equal `faults` switches) give equal worlds.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    /// The seed every other parameter is drawn from.
    pub seed: u64,
    /// Pinned streams (`StreamId(0..streams)`); each host thread also has its own stream.
    pub streams: usize,
    /// Host threads, each with its own client calls.
    pub threads: usize,
    /// Operations each thread performs.
    pub ops_per_thread: usize,
    /// The simulated device's memory, in bytes.
    pub memory_bytes: u64,
    /// The simulated device's largest allocation, in bytes.
    pub max_allocation_bytes: u64,
    /// Operations the simulator runs in the background per device call (see `SimConfig`).
    pub max_background_steps: u32,
    /// Installed before the workload starts; `None` keeps the device's default layout.
    pub pools: Option<MemoryPoolsConfig>,
    /// The device memory budget set before the workload starts (after `pools`); `None` sets
    /// none.
    pub budget_bytes: Option<u64>,
    /// Fault probabilities of the explored device (all zero without `faults`).
    pub faults: FaultRates,
    /// Whether the workload captures and replays graphs.
    pub graphs: bool,
    /// The kernels the workload launches.
    pub kernels: Vec<Formula>,
    /// A workgroup size that building the first kernel with must be refused (one world in
    /// eight), judged in the world's setup.
    pub refused_workgroup: Option<[u32; 3]>,
    /// Fault-free simulated devices beside the explored one, in one cluster with it, for
    /// all-reduces and copies between clients: in fault-free worlds, and in faulty ones
    /// whose only fault is the explored device's loss.
    pub peers: usize,
    /// A world of simulated processes explored beside the device workload (one seed in
    /// eight), drawn from a random stream of its own.
    pub processes: Option<ProcessWorld>,
    /// Whether the clients run their device work on actor threads, as an application's do
    /// (`ComputeClient::with_options`), rather than inline on the calling thread (one world in
    /// sixteen: the hand-offs make them five times slower). Either way the explorer waits for
    /// what it judges, so the run is the same; lazy reads are materialised from another thread.
    pub actor: bool,
    /// Whether the workload calls `exclusive` (one world in eight, independently of `actor`).
    pub exclusive: bool,
    /// Sizes at which an allocation changes pool in the world's layout: each sliced pool's
    /// largest slice and its page, up to 256 KiB, ascending. Derived from `pools` and the
    /// device, not drawn.
    pub size_edges_bytes: Vec<u64>,
}

impl World {
    /// Draws the world of `seed`. Without `faults` no fault is ever injected; with it, most
    /// worlds draw some fault rates (a quarter stay fault-free, so deterministic kernel faults
    /// are explored under `--faults` too).
    pub fn draw(seed: u64, faults: bool) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x05ee_d0fa_110f_5eed);
        // A stream of its own too: the rest of the world is drawn as before it.
        let processes = ProcessWorld::draw(seed, faults);
        let memory_bytes = [128 * MIB, 256 * MIB, 1024 * MIB][rng.random_range(0..3)];
        let max_allocation_bytes = [8 * MIB, 64 * MIB, 256 * MIB][rng.random_range(0..3)];
        let pools = match rng.random_range(0..4) {
            0 => None,
            1 => Some(MemoryPoolsConfig::Preset(PoolPreset::ExclusivePages)),
            2 => Some(MemoryPoolsConfig::Preset(PoolPreset::Default)),
            _ => Some(MemoryPoolsConfig::Pools(
                (0..rng.random_range(1..=3))
                    .map(|_| {
                        let page_bytes = 1u64 << rng.random_range(12..=20);
                        PoolLayout {
                            page_bytes,
                            max_slice_bytes: page_bytes >> rng.random_range(0..=4),
                            cap_bytes: page_bytes * rng.random_range(1..=16),
                        }
                    })
                    .collect(),
            )),
        };
        let faults = if faults && !rng.random_ratio(1, 4) {
            let mut rate = |choices: &[f64]| choices[rng.random_range(0..choices.len())];
            FaultRates {
                transfer_failure: rate(&[0.0, 0.002, 0.01, 0.05]),
                kernel_fault: rate(&[0.0, 0.005, 0.02, 0.08]),
                allocation_failure: rate(&[0.0, 0.0, 0.01, 0.05]),
                // Three in eight faulty worlds may lose the device, so that enough of them lose
                // it while a graph lives (coverage's lost-stream cells of Graph::replay: at a
                // quarter, once boundary counts, budgets and caps came, 60,000 seeds hit them 0
                // to 10 times).
                device_loss: rate(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.002, 0.002, 0.002]),
            }
        } else {
            FaultRates::default()
        };
        let mut kernels: Vec<Formula> = (0..rng.random_range(1..=4))
            .map(|i| Formula::draw(&mut rng, i))
            .collect();
        // Sharing has a stream of its own: the rest of the world is drawn as before it.
        let mut sharing = ChaCha8Rng::seed_from_u64(seed ^ 0x5a4e_d5a4_ed00_5eed);
        for kernel in &mut kernels {
            kernel.draw_sharing(&mut sharing);
        }
        let mut world = World {
            seed,
            streams: rng.random_range(1..=8),
            threads: rng.random_range(1..=4),
            ops_per_thread: rng.random_range(8..=48),
            memory_bytes,
            max_allocation_bytes,
            max_background_steps: rng.random_range(0..=8),
            pools,
            budget_bytes: None,
            faults,
            graphs: rng.random_bool(0.5),
            kernels,
            refused_workgroup: None,
            peers: 0,
            processes,
            actor: false,
            exclusive: false,
            size_edges_bytes: Vec::new(),
        };
        // A stream of their own, so that inline worlds without `exclusive` stay what they were.
        let mut host = ChaCha8Rng::seed_from_u64(seed ^ 0xac70_12ac_7012_ac70);
        world.actor = host.random_ratio(1, 16);
        world.exclusive = host.random_ratio(1, 8);
        // One faulty world in eight has peers too, and its faults are the device's loss alone:
        // a lost device leaves its peers' collectives and copies, which time out waiting for
        // it, where a device another fault stopped stays, and its peers would wait forever.
        // Its clients run inline: on actor threads, whether a call that does not wait (a
        // `create`) meets a loss its actor thread already met is thread timing, as in any
        // program, and what the driver does next with its peers shows in their traces (5 of
        // 1,000,000 such worlds ran differently twice: the loss seen at turn 24, 25 or 26).
        if world.injects_faults() && host.random_ratio(1, 8) {
            world.faults = FaultRates {
                device_loss: [0.002, 0.01][host.random_range(0..2)],
                ..FaultRates::default()
            };
            world.peers = host.random_range(1..=2);
            world.actor = false;
        }
        // Drawn last, so that single-device worlds stay what they were. A peer never
        // arrives once a fault stops the explored device, so peers come in fault-free worlds
        // (and in those that only lose it, above).
        if !world.injects_faults() && rng.random_ratio(1, 3) {
            world.peers = rng.random_range(1..=2);
        }
        // Drawn after the peers, for the same reason. Small enough that some worlds' workloads
        // reach it (8 MiB pages of the default medium pool exceed the smallest); one in four
        // a boundary value of its own stream (0 refuses every allocation, `u64::MAX` none).
        if rng.random_ratio(1, 4) {
            let ordinary = [3 * MIB, 12 * MIB, 48 * MIB][rng.random_range(0..3)];
            let mut bounds = Bounds::new(seed ^ 0xb0d6_e7b0_d6e7_b0d6);
            world.budget_bytes = Some(bounds.number(ordinary, (0, u64::MAX), &[]));
        }
        // Each drawn pool's cap, one time in four, a boundary value of a stream of its own: one
        // below its page size makes the layout refused, and the world runs on the default.
        if let Some(MemoryPoolsConfig::Pools(layouts)) = &mut world.pools {
            let mut bounds = Bounds::new(seed ^ 0xca9b_0d5c_a9b0_d5ca);
            for layout in layouts {
                layout.cap_bytes = bounds.number(layout.cap_bytes, (0, u64::MAX), &[]);
            }
        }
        // Workgroup sizes from a stream of their own: each formula's, one time in four a
        // boundary or any other size (the launches' workgroups and their counts follow it).
        let mut bounds = Bounds::new(seed ^ 0x3e09_5123_e095_1230);
        for kernel in &mut world.kernels {
            kernel.workgroup = bounds.workgroup_size(kernel.workgroup);
        }
        world.refused_workgroup = bounds.refused_workgroup_size();
        world.size_edges_bytes = world.size_edges();
        world
    }

    /// Why `install_memory_pools` must refuse the world's pools, if it must: the first pool
    /// whose cap is below its page (the only rule a drawn layout can break: its pages are 4 KiB
    /// to 1 MiB, below every device's largest allocation, and its slices at most a page).
    pub fn pools_refusal(&self) -> Option<LayoutError> {
        let Some(MemoryPoolsConfig::Pools(layouts)) = &self.pools else {
            return None;
        };
        let (pool, p) = layouts
            .iter()
            .enumerate()
            .find(|(_, p)| p.cap_bytes < p.page_bytes)?;
        Some(LayoutError::CapSmallerThanPage {
            pool,
            cap_bytes: p.cap_bytes,
            page_bytes: p.page_bytes,
        })
    }

    /// The pools the explored device runs with: the world's, unless refused.
    pub fn installed_pools(&self) -> Option<&MemoryPoolsConfig> {
        self.pools
            .as_ref()
            .filter(|_| self.pools_refusal().is_none())
    }

    /// The world with `ops` operations in all (split evenly over its threads) instead of the
    /// drawn number, for long workloads (`lockstep explore --ops N`); `None` keeps the draw.
    /// Everything else the seed drew stays.
    pub fn with_ops(self, ops: Option<usize>) -> World {
        match ops {
            Some(ops) => World {
                ops_per_thread: ops.div_ceil(self.threads).max(1),
                ..self
            },
            None => self,
        }
    }

    /// The sizes at which the layout the explored device starts with (the world's pools, else
    /// the device's default) changes pool; see [`World::size_edges_bytes`].
    fn size_edges(&self) -> Vec<u64> {
        let device = SimDevice::new(self.sim_config());
        let pools = self
            .installed_pools()
            .cloned()
            .unwrap_or(MemoryPoolsConfig::Preset(PoolPreset::Default));
        let layout = MemoryConfiguration::resolve(&pools, device.properties())
            .expect("a world draws only layouts its device accepts");
        let mut edges: Vec<u64> = layout
            .pools
            .iter()
            .flat_map(|p| [p.max_slice_bytes, p.page_bytes])
            .filter(|&bytes| bytes <= MAX_EDGE_BYTES)
            .collect();
        edges.sort_unstable();
        edges.dedup();
        edges
    }

    /// Whether any fault can be injected.
    pub fn injects_faults(&self) -> bool {
        self.faults != FaultRates::default()
    }

    /// The simulated devices of this world: the explored one, then its fault-free peers.
    pub fn sim_configs(&self) -> Vec<SimConfig> {
        let explored = self.sim_config();
        // A peer waiting for a lost explored device spends a collective's timeout of virtual
        // time each time: its watchdog allows as many as the driver accepts.
        let watchdog_ns = match self.faults.device_loss > 0.0 {
            true => WATCHDOG_NS * (MAX_PEER_TIMEOUTS as u64 + 1),
            false => explored.watchdog_ns,
        };
        let peers = (1..=self.peers as u64).map(|peer| SimConfig {
            seed: self
                .seed
                .wrapping_add(peer.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            faults: FaultPlan::default(),
            watchdog_ns,
            ..explored.clone()
        });
        std::iter::once(explored.clone()).chain(peers).collect()
    }

    /// The simulated device explored.
    fn sim_config(&self) -> SimConfig {
        SimConfig {
            max_background_steps: self.max_background_steps,
            watchdog_ns: WATCHDOG_NS,
            ..SimConfig::new(self.seed)
                .with_memory(self.memory_bytes, self.max_allocation_bytes)
                .with_faults(FaultPlan {
                    scripted: Vec::new(),
                    rates: self.faults,
                })
        }
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pools = match &self.pools {
            None => "device default".to_owned(),
            Some(MemoryPoolsConfig::Preset(p)) => format!("preset {p:?}"),
            Some(MemoryPoolsConfig::Pools(pools)) => pools
                .iter()
                .map(|p| {
                    format!(
                        "{}K pages/{}K slices/{}K cap",
                        p.page_bytes >> 10,
                        p.max_slice_bytes >> 10,
                        p.cap_bytes >> 10
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        };
        let budget = match self.budget_bytes {
            Some(bytes) => format!("{} MiB", bytes / MIB),
            None => "none".to_owned(),
        };
        let r = &self.faults;
        write!(
            f,
            "world: {} streams + {} thread streams, {} threads x {} ops, graphs {}, {} peer devices",
            self.streams,
            self.threads,
            self.threads,
            self.ops_per_thread,
            if self.graphs { "on" } else { "off" },
            self.peers
        )?;
        // Said only where set, so that most worlds read as before these were drawn.
        if self.actor {
            f.write_str(", clients on actor threads")?;
        }
        if self.exclusive {
            f.write_str(", exclusive calls")?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "device: {} MiB, largest allocation {} MiB, up to {} background steps, pools: {pools}, budget: {budget}",
            self.memory_bytes / MIB,
            self.max_allocation_bytes / MIB,
            self.max_background_steps
        )?;
        write!(
            f,
            "faults: transfer {}, kernel {}, allocation {}, device loss {}; {} random kernels",
            r.transfer_failure,
            r.kernel_fault,
            r.allocation_failure,
            r.device_loss,
            self.kernels.len()
        )?;
        // Said only where drawn, so that most worlds read as before sizes were.
        let sizes: Vec<u32> = self.kernels.iter().map(|k| k.workgroup).collect();
        if sizes.iter().any(|&size| size != WORKGROUP) {
            write!(f, " of workgroup sizes {sizes:?}")?;
        }
        if let Some(size) = self.refused_workgroup {
            write!(f, "; workgroup size {size:?} refused")?;
        }
        match &self.processes {
            Some(processes) => write!(f, "\n{processes}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_draws_the_same_world_and_seeds_differ() {
        assert_eq!(World::draw(7, true), World::draw(7, true));
        let worlds: Vec<_> = (0..16).map(|s| World::draw(s, true)).collect();
        let streams: std::collections::BTreeSet<_> = worlds.iter().map(|w| w.streams).collect();
        assert!(streams.len() > 3, "16 seeds drew stream counts {streams:?}");
        assert!(worlds.iter().any(|w| w.injects_faults()));
        assert!(worlds.iter().any(|w| !w.injects_faults()));
        assert!(!World::draw(7, false).injects_faults());
    }
}
