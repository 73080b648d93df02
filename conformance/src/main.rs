//! `lockstep`: run the conformance suite on a device, or replay one seeded case.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lockstep_conformance::program::{Program, Step};
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::{CudaFactory, DeviceFactory, SimFactory, WgpuFactory, suite};

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
        /// Cases per property.
        #[arg(long, default_value_t = 128)]
        cases: u32,
        /// Seed of the run (default: $LOCKSTEP_SEED, else drawn and printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Run only this property.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(suite::property_names()))]
        property: Option<String>,
    },
    /// Rerun the default multi-stream case of a seed on the simulator, twice (the traces must
    /// be identical); prints its trace hash last.
    Replay {
        #[arg(long)]
        seed: u64,
        /// Write the run as a Chrome/Perfetto trace (open it in ui.perfetto.dev).
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
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
                DeviceKind::Cuda => match CudaFactory::new(0) {
                    Ok(factory) => check(&factory, config, property.as_deref()),
                    Err(err) => {
                        eprintln!("cuda: {err}");
                        ExitCode::FAILURE
                    }
                },
                DeviceKind::Wgpu => match WgpuFactory::from_env() {
                    Ok(factory) => check(&factory, config, property.as_deref()),
                    Err(err) => {
                        println!("device: wgpu — {err}");
                        ExitCode::FAILURE
                    }
                },
            }
        }
        Command::Replay { seed, trace } => replay(seed, trace.as_deref()),
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
        "capabilities: graphs {:?}, timestamps {}, concurrent streams {}",
        features.graphs, features.timestamps, features.concurrent_streams
    );
    drop(probe);
    println!("seed: {}, {} cases per property", config.seed, config.cases);

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
        let result = if r.outcome.is_ok() { "ok" } else { "FAILED" };
        println!(
            "{:<24} {:>6}  {:<6}  {}",
            r.name, r.cases, result, config.seed
        );
    }
    let failed: Vec<_> = results.iter().filter(|r| r.outcome.is_err()).collect();
    for r in &failed {
        let failure = r.outcome.as_ref().expect_err("filtered on failures");
        println!("\n{} FAILED ({})", r.name, r.summary);
        println!("  why: {}", failure.message);
        println!("  smallest failing case: {}", failure.minimal_case);
        println!(
            "  replay: {}",
            suite::replay_command(factory.name(), r.name, config)
        );
    }
    println!(
        "\n{} passed, {} failed",
        results.len() - failed.len(),
        failed.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn describe(program: &Program) -> String {
    let count = |f: fn(&Step) -> bool| program.ops.iter().filter(|op| f(&op.step)).count();
    format!(
        "{} streams, {} operations ({} creates, {} writes, {} launches, {} reads, {} releases, {} syncs)",
        program.streams,
        program.ops.len(),
        count(|s| matches!(s, Step::Create { .. })),
        count(|s| matches!(s, Step::Write { .. })),
        count(|s| matches!(s, Step::Launch { .. })),
        count(|s| matches!(s, Step::Read { .. })),
        count(|s| matches!(s, Step::Release { .. })),
        count(|s| matches!(s, Step::Sync)),
    )
}

fn replay(seed: u64, trace: Option<&std::path::Path>) -> ExitCode {
    let program = suite::default_case(seed);
    println!("seed: {seed}");
    println!("case: {}", describe(&program));
    match suite::replay(&program) {
        Ok(replay) => {
            println!(
                "determinism: two runs executed the same {} operations",
                replay.trace.len()
            );
            if let Some(path) = trace {
                let json = lockstep_conformance::perfetto::trace_json(&replay.trace);
                if let Err(err) = std::fs::write(path, json.to_string()) {
                    println!("result: FAILED: cannot write {}: {err}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("trace: {} (open in ui.perfetto.dev)", path.display());
            }
            println!("result: ok");
            println!("trace-hash: {:016x}", replay.trace_hash);
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("result: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}
