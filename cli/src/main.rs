//! `lockstep`: run the conformance suite on a device, or replay one seeded case.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;
use std::time::Duration;

use lockstep::replay::FloatTolerance;
#[cfg(feature = "cuda")]
use lockstep_conformance::CudaFactory;
#[cfg(feature = "wgpu")]
use lockstep_conformance::WgpuFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::{DeviceFactory, SimFactory, suite};
use lockstep_explore::{self as explore, ExploreConfig};
use lockstep_launch::LaunchConfig;

mod recording;
mod recording_trace;

#[derive(Parser)]
#[command(
    name = "lockstep",
    version,
    about = "Lockstep's conformance suite and simulator tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum DeviceKind {
    /// The deterministic simulator.
    Sim,
    /// CUDA GPU 0 (needs the NVIDIA driver and NVRTC).
    Cuda,
    /// wgpu on the adapter LOCKSTEP_WGPU_BACKEND / LOCKSTEP_WGPU_ADAPTER select.
    Wgpu,
}

#[derive(Subcommand)]
enum Command {
    /// Run every conformance property on a device.
    Check {
        #[arg(long, value_enum, default_value = "sim")]
        device: DeviceKind,
        /// Cases per property (at least one: a run of none would check nothing).
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
        cases: u32,
        /// Seed of the run (default: $LOCKSTEP_SEED, else drawn and printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Run only this property.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(suite::property_names()))]
        property: Option<String>,
    },
    /// Explore random worlds on the simulator: one world and workload per seed, each checked
    /// against a reference model and run twice for determinism.
    Explore {
        /// How many seeds to explore (at least one).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// First seed (default: $LOCKSTEP_SEED, else drawn and printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Inject faults (failed transfers and kernels, refused allocations, device loss).
        #[arg(long)]
        faults: bool,
        /// Seeds explored in parallel (at least one).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
        jobs: u16,
        /// Operations per seed, instead of the drawn 8–48 per host thread (e.g. 1000 for long
        /// workloads).
        #[arg(long)]
        ops: Option<usize>,
        /// Print hits per coverage cell and the reachable cells never hit; fail if one remains.
        #[arg(long, conflicts_with = "recording")]
        coverage: bool,
        /// Explore a recording (`LOCKSTEP_RECORD=PATH` writes one) instead of drawn worlds: its
        /// threads' order, the streams' interleaving and (with `--faults`) one fault per seed.
        #[arg(long, conflicts_with_all = ["ops", "jobs"])]
        recording: Option<std::path::PathBuf>,
        /// With `--recording`: shrink the first failing seed and print it as a Rust test.
        #[arg(long, requires = "recording")]
        shrink: bool,
    },
    /// Rerun one explored seed, twice (the traces must be identical); prints the world it drew
    /// and its trace hash last. With `--recording`, run a recording (`LOCKSTEP_RECORD`) on the
    /// simulator instead, checking every read against its recorded hashes.
    Replay {
        /// The explored seed; with `--recording`, the simulator's seed (default 0).
        #[arg(long, required_unless_present = "recording")]
        seed: Option<u64>,
        /// A recording to replay (`LOCKSTEP_RECORD=PATH` writes one).
        #[arg(long, conflicts_with_all = ["faults", "ops", "trace", "steps", "shrink"])]
        recording: Option<std::path::PathBuf>,
        /// The seed was explored with `--faults`.
        #[arg(long)]
        faults: bool,
        /// The seed was explored with `--ops N`.
        #[arg(long)]
        ops: Option<usize>,
        /// Write the run as a Chrome/Perfetto trace (open it in ui.perfetto.dev).
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Print every operation of the workload, in the order the threads perform them.
        #[arg(long)]
        steps: bool,
        /// Shrink the failing workload to the fewest operations that fail the same way, and print
        /// them as a Rust test against the public API.
        #[arg(long)]
        shrink: bool,
        /// With `--recording`: how far a float a kernel computed may differ, relative to the
        /// recorded value (0 with `--absolute-tolerance 0` for bit-exact).
        #[arg(long, requires = "recording", default_value_t = FloatTolerance::default().relative)]
        relative_tolerance: f64,
        /// With `--recording`: how far a float near zero that a kernel computed may differ.
        #[arg(long, requires = "recording", default_value_t = FloatTolerance::default().absolute)]
        absolute_tolerance: f64,
    },
    /// Summarise a recording (`LOCKSTEP_RECORD=PATH` writes one): calls by kind, devices,
    /// streams, threads, bytes, kernels and errors.
    Recording {
        /// The recording.
        path: std::path::PathBuf,
        /// Print every event first, one a line (data and hashes elided).
        #[arg(long)]
        events: bool,
        /// Write the recorded run as a Chrome/Perfetto trace (open it in ui.perfetto.dev): a
        /// track per host thread and per stream, each call a slice from issue to return.
        #[arg(long)]
        perfetto: Option<std::path::PathBuf>,
    },
    /// Start NPROC processes of PROGRAM on this host as one world (like torchrun's standalone
    /// mode): each gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and
    /// MASTER_PORT, its output is prefixed with `[rank k]`, and the launch fails if any
    /// process fails (the others are killed after the grace period).
    Launch {
        /// Processes to start, ranks 0 to NPROC-1.
        #[arg(long)]
        nproc: u32,
        /// The rendezvous port (default: a free one).
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        master_port: Option<u16>,
        /// How long the other processes may run once one has failed, in milliseconds.
        #[arg(long, default_value_t = 5000)]
        grace_ms: u64,
        /// The program and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM")]
        command: Vec<std::ffi::OsString>,
    },
}

#[cfg(feature = "cuda")]
fn check_cuda(config: RunConfig, property: Option<&str>) -> ExitCode {
    match CudaFactory::new(0) {
        Ok(factory) => check(&factory, config, property),
        Err(err) => {
            eprintln!("cuda: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "wgpu")]
fn check_wgpu(config: RunConfig, property: Option<&str>) -> ExitCode {
    match WgpuFactory::from_env() {
        Ok(factory) => check(&factory, config, property),
        Err(err) => {
            println!("device: wgpu — {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn check_cuda(_: RunConfig, _: Option<&str>) -> ExitCode {
    built_without("cuda")
}

#[cfg(not(feature = "wgpu"))]
fn check_wgpu(_: RunConfig, _: Option<&str>) -> ExitCode {
    built_without("wgpu")
}

/// A device this build left out (`--no-default-features`): says how to get it.
#[cfg(not(all(feature = "cuda", feature = "wgpu")))]
fn built_without(feature: &str) -> ExitCode {
    eprintln!(
        "device: {feature} — this lockstep was built without its `{feature}` feature; \
         rebuild with `--features {feature}` (on by default)"
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    init_tracing();
    match Cli::parse().command {
        Command::Check {
            device,
            cases,
            seed,
            property,
        } => {
            let config = RunConfig {
                cases,
                seed: seed.unwrap_or_else(default_seed),
            };
            match device {
                DeviceKind::Sim => check(&SimFactory::default(), config, property.as_deref()),
                DeviceKind::Cuda => check_cuda(config, property.as_deref()),
                DeviceKind::Wgpu => check_wgpu(config, property.as_deref()),
            }
        }
        Command::Explore {
            seeds,
            seed,
            faults,
            recording: Some(path),
            shrink,
            ..
        } => recording::explore_recording(
            &path,
            recording::Exploration {
                first_seed: seed.unwrap_or_else(default_seed),
                seeds,
                faults,
                shrink,
            },
        ),
        Command::Explore {
            seeds,
            seed,
            faults,
            jobs,
            ops,
            coverage,
            recording: None,
            ..
        } => explore(
            ExploreConfig {
                first_seed: seed.unwrap_or_else(default_seed),
                seeds,
                faults,
                ops,
                jobs: jobs.into(),
                backstop: Duration::from_secs(120),
            },
            coverage,
        ),
        Command::Replay {
            recording: Some(path),
            seed,
            relative_tolerance,
            absolute_tolerance,
            ..
        } => {
            let tolerance = FloatTolerance {
                relative: relative_tolerance,
                absolute: absolute_tolerance,
            };
            let seed = seed.unwrap_or(recording::REPLAY_SEED);
            recording::replay_recording(&path, seed, tolerance)
        }
        Command::Replay { seed: None, .. } => {
            eprintln!("replay: give --seed, or --recording");
            ExitCode::FAILURE
        }
        Command::Recording {
            path,
            events,
            perfetto,
        } => recording::summary(&path, events, perfetto.as_deref()),
        Command::Replay {
            seed: Some(seed),
            faults,
            ops,
            trace,
            steps,
            shrink: false,
            ..
        } => replay(
            &explore::World::draw(seed, faults).with_ops(ops),
            trace.as_deref(),
            steps,
        ),
        Command::Replay {
            seed: Some(seed),
            faults,
            ops,
            shrink: true,
            ..
        } => shrink(&explore::World::draw(seed, faults).with_ops(ops), faults),
        Command::Launch {
            nproc,
            master_port,
            grace_ms,
            command,
        } => launch(nproc, master_port, grace_ms, command),
    }
}

fn launch(
    nproc: u32,
    master_port: Option<u16>,
    grace_ms: u64,
    mut command: Vec<std::ffi::OsString>,
) -> ExitCode {
    let program = command.remove(0);
    let config = LaunchConfig {
        nproc,
        master_port,
        grace: Duration::from_millis(grace_ms),
        program,
        args: command,
    };
    match lockstep_launch::launch(&config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("lockstep launch: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `$LOCKSTEP_SEED`, else a seed drawn from the clock. Either way it is printed, so the run can
/// be repeated; only this entry point ever looks at the clock.
fn default_seed() -> u64 {
    if let Some(seed) = std::env::var("LOCKSTEP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos % 1_000_000_007
}

fn check<F: DeviceFactory>(factory: &F, config: RunConfig, only: Option<&str>) -> ExitCode {
    print_device(factory, config);
    let total = only.map_or(suite::property_names().len(), |_| 1);
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .expect("a valid progress template"),
    );
    let results = suite::check(factory, config, only, |name| {
        bar.set_message(name.to_owned());
        bar.inc(0);
    });
    bar.finish_and_clear();

    println!("{:<24} {:>6}  {:<6}  seed", "property", "cases", "result");
    for r in &results {
        println!(
            "{:<24} {:>6}  {:<6}  {}",
            r.name,
            r.cases,
            r.outcome.label(),
            config.seed
        );
    }
    let failed: Vec<_> = results
        .iter()
        .filter_map(|r| r.outcome.failure().map(|f| (r, f)))
        .collect();
    for (r, failure) in &failed {
        print_failure(factory.name(), r, failure, config);
    }
    let not_applicable = results
        .iter()
        .filter(|r| r.outcome == suite::Outcome::NotApplicable)
        .count();
    let passed = results.len() - failed.len() - not_applicable;
    if not_applicable == 0 {
        println!("\n{passed} passed, {} failed", failed.len());
    } else {
        println!(
            "\n{passed} passed, {} failed, {not_applicable} not applicable",
            failed.len()
        );
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The device a check runs on, its capabilities and the run's seed and budget.
fn print_device<F: DeviceFactory>(factory: &F, config: RunConfig) {
    let probe = factory.open(config.seed);
    let props = probe.client.properties();
    println!(
        "device: {} — {} ({})",
        factory.name(),
        props.name,
        props.backend
    );
    let features = probe.client.features();
    println!(
        "capabilities: graphs {:?}, timestamps {}, concurrent streams {}, f16 {}, bf16 {}",
        features.graphs,
        features.timestamps,
        features.concurrent_streams,
        features.f16,
        features.bf16
    );
    drop(probe);
    println!("seed: {}, {} cases per property", config.seed, config.cases);
}

/// A failed property: why, its first failing and shrunk case, and the command that replays it.
fn print_failure(
    device: &str,
    result: &suite::PropertyResult,
    failure: &lockstep_conformance::properties::Failure,
    config: RunConfig,
) {
    println!("\n{} FAILED ({})", result.name, result.summary);
    println!("  why: {}", failure.message);
    println!(
        "  first failing case: {} of {}; shrunk to: {}",
        failure.case, config.cases, failure.minimal_case
    );
    // The same cases come in the same order whatever the total: replaying up to the first
    // failing one reproduces the failure without running the cases after it.
    let replay = RunConfig {
        cases: failure.case,
        ..config
    };
    println!(
        "  replay: {}",
        suite::replay_command(device, result.name, replay)
    );
}

fn replay_line(seed: u64, config: &ExploreConfig) -> String {
    let faults = if config.faults { " --faults" } else { "" };
    let ops = config
        .ops
        .map_or(String::new(), |ops| format!(" --ops {ops}"));
    format!("lockstep replay --seed {seed}{faults}{ops}")
}

fn explore(config: ExploreConfig, coverage: bool) -> ExitCode {
    println!(
        "explore: {} seeds from {} ({}), {} jobs",
        config.seeds,
        config.first_seed,
        if config.faults {
            "faults injected"
        } else {
            "no faults"
        },
        config.jobs
    );
    let bar = ProgressBar::new(config.seeds).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} seeds, {msg}")
            .expect("a valid progress template"),
    );
    let mut failed = 0;
    let summary = explore::explore(Arc::new(explore::Simulator), config, |report| {
        bar.inc(1);
        if let Some(why) = &report.failure {
            failed += 1;
            bar.suspend(|| {
                println!("seed {} FAILED: {why}", report.seed);
                println!("  {}", replay_line(report.seed, &config));
            });
        }
        bar.set_message(format!("{failed} failed"));
    });
    bar.finish_and_clear();
    let secs = summary.elapsed.as_secs_f64().max(1e-9);
    println!("{}", summary_table(&summary));
    println!(
        "throughput: {:.1} seeds/s, {:.0} simulated ops/s ({} jobs, {:.1} s)",
        summary.seeds as f64 / secs,
        summary.device_ops as f64 / secs,
        config.jobs,
        secs
    );
    println!("{}", process_worlds_line(&summary));
    for seed in &summary.hung {
        println!(
            "seed {seed} HUNG: no seed finished in {} s of wall time",
            config.backstop.as_secs()
        );
        println!("  {}", replay_line(*seed, &config));
    }
    println!(
        "{} passed, {} failed",
        summary.seeds as usize - summary.failures.len(),
        summary.failures.len() + summary.hung.len()
    );
    let covered = !coverage || {
        let report = explore::coverage::Report::new(&summary.coverage);
        print!("{report}");
        let unreached = summary.process_outcomes_unreached(config.faults);
        if !unreached.is_empty() {
            println!(
                "process-world outcomes never reached: {}",
                unreached.join(", ")
            );
        }
        report.passed() && unreached.is_empty()
    };
    if summary.passed() && covered {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The sweep's counts: seeds, operations, reads checked, faults injected and surfaced.
fn summary_table(summary: &explore::Summary) -> String {
    format!(
        "{:>7} {:>10} {:>11} {:>14} {:>16} {:>9} {:>14} {:>13}\n{:>7} {:>10} {:>11} {:>14} {:>16} {:>9} {:>14} {:>13}",
        "seeds",
        "host ops",
        "device ops",
        "reads checked",
        "faults injected",
        "surfaced",
        "kernel faults",
        "devices lost",
        summary.seeds,
        summary.host_ops,
        summary.device_ops,
        summary.reads_checked,
        summary.faults_injected,
        summary.faults_surfaced,
        summary.kernel_faults,
        summary.devices_lost
    )
}

/// `process worlds: 250 passed (fault-free 60, a rank never joins 21, …)`.
fn process_worlds_line(summary: &explore::Summary) -> String {
    let total: u64 = summary.process_worlds.values().sum();
    let classes: Vec<String> = explore::processes::ProcessFault::OUTCOMES
        .iter()
        .filter_map(|outcome| {
            let count = summary.process_worlds.get(outcome)?;
            Some(format!("{outcome} {count}"))
        })
        .collect();
    format!("process worlds: {total} passed ({})", classes.join(", "))
}

/// Logs to stderr what `RUST_LOG` selects, e.g. `RUST_LOG=lockstep=debug` for a line per
/// client call with its time. By default nothing, or the profile summary at each sync when
/// `LOCKSTEP_PROFILE` is set (properties that set a level themselves stay quiet).
fn init_tracing() {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::fmt::format::FmtSpan;
    use tracing_subscriber::prelude::*;
    let default = match std::env::var_os(lockstep::PROFILE_ENV) {
        Some(_) => "lockstep::profile=info",
        None => "off",
    };
    // `Targets` reads RUST_LOG's `target=level,...` form without the regular expressions of
    // `EnvFilter`, whose regex crates were a fifth of the README's first build.
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|directives| directives.parse::<Targets>().ok())
        .unwrap_or_else(|| default.parse().expect("the default directives parse"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_span_events(FmtSpan::CLOSE)
        .with_writer(std::io::stderr);
    // Only fails if a subscriber is already installed, which then keeps logging.
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(filter)
        .try_init();
}

/// Shrinks a failing seed and prints the program as Rust: what is not code is a `//` comment,
/// so the whole output pastes into a test file.
fn shrink(world: &explore::World, faults: bool) -> ExitCode {
    println!(
        "// seed {}: {}",
        world.seed,
        world.to_string().replace('\n', "; ")
    );
    let shrunk = match explore::shrink::shrink(&explore::Simulator, world) {
        Ok(shrunk) => shrunk,
        Err(err) => {
            println!("// {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "// shrunk {} operations to {} in {} runs; it fails with: {}",
        shrunk.original_len,
        shrunk.workload.len(),
        shrunk.runs,
        shrunk.failure
    );
    for (n, (thread, step)) in shrunk.workload.in_order().enumerate() {
        println!("//   #{n} thread {thread}: {:?} {:?}", step.on, step.action);
    }
    let options = explore::Opener::options(&explore::Simulator);
    match explore::rust_test::print(world, faults, &shrunk, &options) {
        Ok(program) => {
            print!("{program}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            println!("// cannot print a Rust test: {err}");
            ExitCode::FAILURE
        }
    }
}

/// The processes of the seed's world of processes, if it drew one.
fn processes_of(world: &explore::World) -> Vec<lockstep_sim::SimRank> {
    world
        .processes
        .as_ref()
        .map_or_else(Vec::new, explore::processes::ProcessWorld::processes)
}

fn replay(world: &explore::World, trace: Option<&std::path::Path>, steps: bool) -> ExitCode {
    let workload = explore::Workload::draw(world);
    println!("seed: {}", world.seed);
    println!("{world}");
    println!(
        "workload: {} operations on {} threads",
        workload.len(),
        world.threads
    );
    if steps {
        for (n, (thread, step)) in workload.in_order().enumerate() {
            println!("  #{n} thread {thread}: {:?} {:?}", step.on, step.action);
        }
    }
    let opener = explore::Simulator;
    let (first, entries) = explore::run_world(&opener, world, true);
    let (second, _) = explore::run_world(&opener, world, false);
    println!(
        "executed: {} device operations, {} reads checked, {} faults injected, {} surfaced{}",
        first.device_ops,
        first.reads_checked,
        first.faults_injected,
        first.faults_surfaced,
        if first.device_lost {
            ", device lost"
        } else {
            ""
        }
    );
    let deterministic = second.trace_hash == first.trace_hash;
    if deterministic {
        println!(
            "determinism: two runs executed the same {} operations",
            first.device_ops
        );
    } else {
        println!(
            "{}",
            explore::divergence(&opener, world, first.trace_hash, second.trace_hash)
        );
    }
    for line in lockstep_explore::perfetto::report_lines(&entries) {
        println!("{line}");
    }
    if let Some(path) = trace {
        let json = lockstep_explore::perfetto::trace_json(&entries);
        if let Err(err) = std::fs::write(path, json.to_string()) {
            println!("result: FAILED: cannot write {}: {err}", path.display());
            return ExitCode::FAILURE;
        }
        println!("trace: {} (open in ui.perfetto.dev)", path.display());
    }
    // A world of processes is checked once the seed's own run passed.
    let processes_ok = match (&first.failure, &world.processes) {
        (None, Some(processes)) => replay_processes(&opener, world, processes),
        _ => true,
    };
    match &first.failure {
        Some(why) => println!("result: FAILED: {why}"),
        None if !processes_ok => {}
        None if deterministic => println!("result: ok"),
        None => println!("result: FAILED: nondeterministic"),
    }
    println!("trace-hash: {:016x}", first.trace_hash);
    if first.failure.is_none() && processes_ok && deterministic {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs the seed's world of processes against its model, printing what each rank saw, or the
/// failure; returns whether it passed.
fn replay_processes(
    opener: &explore::Simulator,
    world: &explore::World,
    processes: &explore::processes::ProcessWorld,
) -> bool {
    match explore::processes::check(opener, processes) {
        Ok(run) => {
            for (process, seen) in processes_of(world).iter().zip(&run.seen) {
                let lines: Vec<String> = seen.iter().map(ToString::to_string).collect();
                println!("  rank {}: {}", process.env.rank, lines.join("; "));
            }
            println!(
                "process world: as the model says, twice (network hash {:016x})",
                run.network_hash
            );
            true
        }
        Err(why) => {
            println!("result: FAILED: {why}");
            false
        }
    }
}
