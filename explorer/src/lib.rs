//! `lockstep explore`: swarm testing on the simulator. Every seed draws a new [`World`] (streams,
//! threads, pools, device size, fault rates, kernels, graph use, peer devices) and a random
//! [`Workload`] over the whole client API, runs it, and checks it: every read against the
//! reference [`model`], every injected fault surfaced exactly once on its stream, no hang (the
//! simulator's virtual-time watchdog), memory back to its baseline, no sanitizer report, and the
//! same trace hash when the seed runs a second time. [`recorded`] explores a recorded run of a
//! program instead (`lockstep explore --recording`).
//!
//! **Architecture Invariant:** a seed determines everything — the world, the workload, the order
//! in which host threads act, and the simulator's interleaving — so `lockstep replay --seed S`
//! reruns a failure exactly. Nothing here reads the clock except the throughput report and the
//! wall-clock backstop that reports a host hang the simulator cannot see.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod boundary;
pub mod coverage;
mod driver;
pub mod failure;
pub mod model;
pub mod perfetto;
pub mod processes;
pub mod recorded;
pub mod rust_test;
pub mod shrink;
mod view;
mod workload;
mod world;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use lockstep::{ComputeClient, Device, ServerOptions};
use lockstep_sim::{SimCluster, SimConfig, SimDevice, SimProbe, TraceEntry};

pub use driver::Execution;
use driver::Kernels;
pub use failure::ExploreFailure;
use failure::{Check, Stage, Violation};
pub use lockstep_kernels::formula::Formula;
use workload::Fills;
pub use workload::Workload;
pub use world::World;

/// How an explored device is made from a simulated one. The explorer runs on the simulator;
/// tests wrap it (e.g. in a device that misbehaves on purpose) or turn a runtime knob off.
pub trait Opener: Sync {
    /// The device the explorer drives.
    type Device: Device;
    /// Wraps a simulated device of the world into the explored device.
    fn open(&self, device: SimDevice) -> Self::Device;

    /// The options every client of the world runs with; tests knock out a runtime defence here.
    fn options(&self) -> ServerOptions {
        ServerOptions::default()
    }
}

/// The plain simulator.
pub struct Simulator;

impl Opener for Simulator {
    type Device = SimDevice;

    fn open(&self, device: SimDevice) -> SimDevice {
        device
    }
}

/// A world's devices, opened: the explored one first, then its peers (one cluster).
pub struct Devices<D: Device> {
    /// One client per device, the explored one first.
    pub clients: Vec<ComputeClient<D>>,
    /// The devices' probes, in the same order.
    pub probes: Vec<SimProbe>,
}

fn open<O: Opener>(opener: &O, world: &World, record_trace: bool) -> Devices<O::Device> {
    let configs: Vec<SimConfig> = world
        .sim_configs()
        .into_iter()
        .map(|config| SimConfig {
            record_trace,
            ..config
        })
        .collect();
    let devices = if configs.len() == 1 {
        configs.into_iter().map(SimDevice::new).collect()
    } else {
        SimCluster::from_configs(configs).into_devices()
    };
    let probes = devices.iter().map(SimDevice::probe).collect();
    let clients = devices
        .into_iter()
        .map(|device| {
            let device = opener.open(device);
            match world.actor {
                true => ComputeClient::with_options(device, opener.options()),
                false => ComputeClient::inline(device, opener.options()),
            }
        })
        .collect();
    Devices { clients, probes }
}

/// One seed's verdict.
#[derive(Clone, Debug)]
pub struct SeedReport {
    /// The seed the world was drawn from.
    pub seed: u64,
    /// What its first execution did.
    pub execution: Execution,
    /// Why the seed failed (the first execution's failure, nondeterminism, or its world of
    /// processes' failure).
    pub failure: Option<ExploreFailure>,
    /// The class of outcome its world of processes explored, if it drew one and it passed
    /// (one of [`ProcessFault::OUTCOMES`](processes::ProcessFault::OUTCOMES)).
    pub processes: Option<&'static str>,
}

/// Runs `world` once.
pub fn run_world<O: Opener>(
    opener: &O,
    world: &World,
    record_trace: bool,
) -> (Execution, Vec<TraceEntry>) {
    run_workload(opener, world, &Workload::draw(world), record_trace)
}

/// Runs `workload` (drawn for `world`, or a part of that, as the shrinker tries) in `world`.
pub fn run_workload<O: Opener>(
    opener: &O,
    world: &World,
    workload: &Workload,
    record_trace: bool,
) -> (Execution, Vec<TraceEntry>) {
    let kernels = Kernels::of(world);
    run_built(
        opener,
        world,
        &kernels,
        &Fills::default(),
        workload,
        record_trace,
    )
}

/// [`run_workload`] with `world`'s kernels already built ([`Kernels::of`]) and the data of
/// `workload`'s buffers drawn so far for it.
fn run_built<O: Opener>(
    opener: &O,
    world: &World,
    kernels: &Kernels,
    fills: &Fills,
    workload: &Workload,
    record_trace: bool,
) -> (Execution, Vec<TraceEntry>) {
    let (execution, mut traces) = run_traced(opener, world, kernels, fills, workload, record_trace);
    // The explored device's operations; its peers' only count in the trace hash.
    (execution, traces.swap_remove(0))
}

/// [`run_built`], with every device's operations: the explored device's, then its peers'.
fn run_traced<O: Opener>(
    opener: &O,
    world: &World,
    kernels: &Kernels,
    fills: &Fills,
    workload: &Workload,
    record_trace: bool,
) -> (Execution, Vec<Vec<TraceEntry>>) {
    let devices = open(opener, world, record_trace);
    let probes = devices.probes.clone();
    let execution = driver::execute(world, kernels, workload, fills, devices);
    let entries = |probe: &SimProbe| std::mem::take(&mut probe.observations().entries);
    (execution, probes.iter().map(entries).collect())
}

/// Runs a seed, then runs it again and compares the trace hashes; a mismatch reruns both with
/// full traces to name the first diverging operation.
pub fn run_seed<O: Opener>(opener: &O, seed: u64, faults: bool) -> SeedReport {
    run_drawn(opener, &World::draw(seed, faults))
}

/// [`run_seed`] for a drawn (and possibly adjusted, e.g. [`World::with_ops`]) world.
pub fn run_drawn<O: Opener>(opener: &O, world: &World) -> SeedReport {
    // Drawn and built once for both runs: a draw depends on nothing but the world (the
    // buffers' data, on their fills, is drawn in the first run and kept for the second).
    let workload = Workload::draw(world);
    let (kernels, fills) = (Kernels::of(world), Fills::default());
    let (first, _) = run_built(opener, world, &kernels, &fills, &workload, false);
    let mut failure = match &first.failure {
        Some(why) => Some(why.clone()),
        None => {
            let (second, _) = run_built(opener, world, &kernels, &fills, &workload, false);
            (second.trace_hash != first.trace_hash)
                .then(|| divergence(opener, world, first.trace_hash, second.trace_hash))
        }
    };
    let mut outcome = None;
    if let (None, Some(processes)) = (&failure, &world.processes) {
        match processes::check(opener, processes) {
            Ok(_) => outcome = Some(processes.outcome()),
            Err(why) => failure = Some(why),
        }
    }
    SeedReport {
        seed: world.seed,
        execution: first,
        failure,
        processes: outcome,
    }
}

/// Two runs of `world` gave trace hashes `first` and `second`: the failure, naming where two
/// more runs, traced, diverge (the first device whose operations differ, the explored one
/// first), or saying that they agree (a divergence of thread timing, which tracing changes).
pub fn divergence<O: Opener>(opener: &O, world: &World, first: u64, second: u64) -> ExploreFailure {
    let (a, b) = (traces(opener, world), traces(opener, world));
    let diverging = a.iter().zip(&b).enumerate().find_map(|(device, (x, y))| {
        let at = (x.iter().zip(y).position(|(p, q)| p != q))
            .or_else(|| (x.len() != y.len()).then(|| x.len().min(y.len())))?;
        Some((device, at, x.get(at), y.get(at)))
    });
    let hashes = format!("two runs gave trace hashes {first:016x} and {second:016x}");
    let detail = match diverging {
        Some((device, at, x, y)) => {
            let on = match device {
                0 => "the explored device".to_owned(),
                peer => format!("peer {}", peer - 1),
            };
            format!(
                "nondeterminism: {hashes}; traced again, they diverge on {on} at operation #{at}: {x:?} vs {y:?}"
            )
        }
        None => format!(
            "nondeterminism: {hashes}; traced again, every device ran alike (the divergence depends on thread timing, which tracing changes)"
        ),
    };
    Violation::new(Check::Nondeterminism, detail).in_stage(Stage::Rerun)
}

/// Every device's operations in a traced run of `world`: the explored device's, then its
/// peers'.
fn traces<O: Opener>(opener: &O, world: &World) -> Vec<Vec<TraceEntry>> {
    let (kernels, fills) = (Kernels::of(world), Fills::default());
    run_traced(
        opener,
        world,
        &kernels,
        &fills,
        &Workload::draw(world),
        true,
    )
    .1
}

/// What `explore` was asked to do.
#[derive(Clone, Copy, Debug)]
pub struct ExploreConfig {
    /// The first seed explored.
    pub first_seed: u64,
    /// How many seeds, consecutive from `first_seed`.
    pub seeds: u64,
    /// Whether worlds inject faults.
    pub faults: bool,
    /// Operations of each seed's workload, instead of the drawn number (see
    /// [`World::with_ops`]).
    pub ops: Option<usize>,
    /// Threads exploring seeds at once.
    pub jobs: usize,
    /// How long no seed may finish before the run is declared hung (wall clock).
    pub backstop: Duration,
}

/// Totals of an exploration.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Seeds explored.
    pub seeds: u64,
    /// Client calls made, over every seed.
    pub host_ops: u64,
    /// Operations the simulated devices executed.
    pub device_ops: u64,
    /// Reads compared with the model and found equal.
    pub reads_checked: u64,
    /// Faults the simulator injected.
    pub faults_injected: u64,
    /// Injected faults some call returned.
    pub faults_surfaced: u64,
    /// Checked-kernel faults returned where the model expected them.
    pub kernel_faults: u64,
    /// Seeds whose device was lost.
    pub devices_lost: u64,
    /// Each failing seed, with why it failed.
    pub failures: Vec<(u64, ExploreFailure)>,
    /// Seeds still running when the backstop fired.
    pub hung: Vec<u64>,
    /// Wall-clock time of the exploration.
    pub elapsed: Duration,
    /// The coverage cells the seeds' first executions hit.
    pub coverage: coverage::Hits,
    /// Worlds of processes that passed, by class of outcome
    /// ([`ProcessFault::OUTCOMES`](processes::ProcessFault::OUTCOMES)).
    pub process_worlds: BTreeMap<&'static str, u64>,
}

impl Summary {
    fn add(&mut self, report: &SeedReport) {
        let e = &report.execution;
        self.seeds += 1;
        self.host_ops += e.host_ops;
        self.device_ops += e.device_ops;
        self.reads_checked += e.reads_checked;
        self.faults_injected += e.faults_injected;
        self.faults_surfaced += e.faults_surfaced;
        self.kernel_faults += e.kernel_faults;
        self.devices_lost += e.device_lost as u64;
        self.coverage.merge(&e.coverage);
        if let Some(outcome) = report.processes {
            *self.process_worlds.entry(outcome).or_default() += 1;
        }
        if let Some(why) = &report.failure {
            self.failures.push((report.seed, why.clone()));
        }
    }

    /// Whether no seed failed and none hung.
    pub fn passed(&self) -> bool {
        self.failures.is_empty() && self.hung.is_empty()
    }

    /// The classes of outcome of worlds of processes that no seed reached, among those
    /// reachable: every one with `faults`, else only the fault-free one.
    pub fn process_outcomes_unreached(&self, faults: bool) -> Vec<&'static str> {
        let reachable = if faults {
            &processes::ProcessFault::OUTCOMES[..]
        } else {
            &processes::ProcessFault::OUTCOMES[..1]
        };
        reachable
            .iter()
            .filter(|outcome| !self.process_worlds.contains_key(*outcome))
            .copied()
            .collect()
    }
}

/// Explores `config.seeds` seeds from `config.first_seed` on `config.jobs` threads, calling
/// `on_seed` as each finishes. If no seed finishes within `config.backstop`, returns at once
/// with the seeds in flight in [`Summary::hung`], leaving their threads behind.
pub fn explore<O: Opener + Send + 'static>(
    opener: Arc<O>,
    config: ExploreConfig,
    mut on_seed: impl FnMut(&SeedReport),
) -> Summary {
    let start = Instant::now();
    let next = Arc::new(AtomicU64::new(0));
    let in_flight = Arc::new(Mutex::new(BTreeSet::new()));
    let (tx, rx) = mpsc::channel();
    for _ in 0..config.jobs.max(1) {
        let (tx, next, in_flight, opener) =
            (tx.clone(), next.clone(), in_flight.clone(), opener.clone());
        std::thread::spawn(move || {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= config.seeds {
                    break;
                }
                let seed = config.first_seed.wrapping_add(n);
                in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(seed);
                let world = World::draw(seed, config.faults).with_ops(config.ops);
                let report = run_drawn(&*opener, &world);
                in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&seed);
                if tx.send(report).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut summary = Summary::default();
    loop {
        match rx.recv_timeout(config.backstop) {
            Ok(report) => {
                summary.add(&report);
                on_seed(&report);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                summary.hung = in_flight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .copied()
                    .collect();
                break;
            }
        }
    }
    summary.elapsed = start.elapsed();
    summary
}
