//! `lockstep recording PATH` (a recording's summary), `lockstep replay --recording PATH` (the
//! recording run on the simulator, every read checked; see `lockstep::record`) and `lockstep
//! explore --recording PATH` (its seeds explored; see `lockstep_explore::recorded`).

use std::path::Path;
use std::process::ExitCode;

use lockstep::record::{Reader, Summary};
use lockstep::replay::{FloatTolerance, replay};
use lockstep::{ComputeClient, ServerOptions, record::RecordTo};
use lockstep_explore::recorded::{self, RecordedFailure, Recording};
use lockstep_sim::{SimConfig, SimDevice};

/// The simulator's seed for a replay when none is given: fixed, so two replays of one
/// recording run alike, and printed.
pub const REPLAY_SEED: u64 = 0;

fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>, ExitCode> {
    std::fs::File::open(path)
        .map(std::io::BufReader::new)
        .map_err(|err| {
            eprintln!("{}: {err}", path.display());
            ExitCode::FAILURE
        })
}

/// Prints the summary of the recording at `path`, after every event if `events`, and writes
/// its Perfetto trace to `perfetto` if given; a recording unreadable past a point prints (and
/// traces) what came before, then why, and fails.
pub fn summary(path: &Path, events: bool, perfetto: Option<&Path>) -> ExitCode {
    let input = match open(path) {
        Ok(input) => input,
        Err(code) => return code,
    };
    let mut summary = Summary::default();
    let mut read = Vec::new();
    let mut failure = None;
    for event in Reader::new(input) {
        match event {
            Ok(event) => {
                if events {
                    let at = lockstep::record::time_of(&event).unwrap_or_default();
                    println!("{at:>12} {}", lockstep::record::brief(&event));
                }
                summary.add(&event);
                if perfetto.is_some() {
                    read.push(event);
                }
            }
            Err(err) => failure = Some(err),
        }
    }
    print!("{summary}");
    if let Some(out) = perfetto {
        let trace = crate::recording_trace::trace_json(&read).to_string();
        if let Err(err) = std::fs::write(out, trace) {
            eprintln!("{}: {err}", out.display());
            return ExitCode::FAILURE;
        }
        println!(
            "perfetto trace: {} (open it in ui.perfetto.dev)",
            out.display()
        );
    }
    match failure {
        None => ExitCode::SUCCESS,
        Some(err) => {
            println!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Replays the recording at `path` on simulators seeded from `seed` (device `d` gets
/// `seed + d`), accepting kernels' floats within `tolerance`; fails on any mismatch or
/// unreadable byte.
pub fn replay_recording(path: &Path, seed: u64, tolerance: FloatTolerance) -> ExitCode {
    let input = match open(path) {
        Ok(input) => input,
        Err(code) => return code,
    };
    println!(
        "seed: {seed}; floats that kernels computed match within {} relative, {} absolute",
        tolerance.relative, tolerance.absolute
    );
    let options = ServerOptions {
        record: RecordTo::Off,
        ..ServerOptions::default()
    };
    let result = replay(input, tolerance, |device| {
        let config = SimConfig::new(seed.wrapping_add(u64::from(device.device)));
        println!("device {}: {} on the simulator", device.device, device.name);
        ComputeClient::inline(SimDevice::new(config), options)
    });
    match result {
        Ok(report) => {
            print!("{report}");
            if report.matched() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            println!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// What `explore --recording` was asked to do.
#[derive(Clone, Copy, Debug)]
pub struct Exploration {
    /// The first seed explored.
    pub first_seed: u64,
    /// How many seeds, consecutive from `first_seed`.
    pub seeds: u64,
    /// Whether each seed injects a fault.
    pub faults: bool,
    /// Whether to shrink the first failing seed.
    pub shrink: bool,
}

/// Failing seeds printed in full; the rest are counted.
const FAILURES_PRINTED_MAX: usize = 5;

/// Explores the recording at `path`: prints each failing seed (up to
/// [`FAILURES_PRINTED_MAX`]) with the command that repeats it, the totals, and with `shrink`
/// the first failure shrunk; fails if a seed failed.
pub fn explore_recording(path: &Path, how: Exploration) -> ExitCode {
    let recording = match Recording::open(path) {
        Ok(recording) => recording,
        Err(err) => {
            println!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "explore: recording {}: {} calls on {} thread(s); {} seeds from {}{}",
        path.display(),
        recording.calls.len(),
        recording.threads().len(),
        how.seeds,
        how.first_seed,
        if how.faults { ", one fault each" } else { "" }
    );
    if let Some(why) = &recording.unread {
        println!("note: {why}; exploring the calls before it");
    }
    let mut printed = 0;
    let result = recorded::explore(&recording, how.first_seed, how.seeds, how.faults, |run| {
        if let (Some(failure), true) = (&run.failure, printed < FAILURES_PRINTED_MAX) {
            printed += 1;
            print_failure(path, run.seed, how.faults, failure);
        }
    });
    let explored = match result {
        Ok(explored) => explored,
        Err(err) => {
            println!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{} seeds: {} failed; {} calls run, {} results as recorded, {} faults injected",
        explored.seeds,
        explored.failures.len(),
        explored.calls_run,
        explored.results_compared,
        explored.faults_injected
    );
    match explored.failures.first() {
        None => ExitCode::SUCCESS,
        Some(&(seed, _)) => {
            if how.shrink {
                shrink_recording(path, &recording, seed, how.faults);
            }
            ExitCode::FAILURE
        }
    }
}

fn print_failure(path: &Path, seed: u64, faults: bool, failure: &RecordedFailure) {
    println!("seed {seed} FAILED {}", failure.class);
    println!("  {}", failure.detail);
    println!(
        "  replay: lockstep explore --recording {} --seed {seed} --seeds 1{}",
        path.display(),
        if faults { " --faults" } else { "" }
    );
}

/// Shrinks failing seed `seed` of `recording` (at `path`), writes the shrunk recording beside
/// it (`NAME.shrunk.rec`, its calls in the failing order) and prints it.
fn shrink_recording(path: &Path, recording: &Recording, seed: u64, faults: bool) {
    let shrunk = match recorded::shrink::shrink(recording, seed, faults) {
        Ok(shrunk) => shrunk,
        Err(err) => {
            println!("shrink: {err}");
            return;
        }
    };
    let out = path.with_extension("shrunk.rec");
    let written = std::fs::File::create(&out).and_then(|file| shrunk.recording.write_to(file));
    println!(
        "shrunk seed {seed}: {} calls to {} in {} runs; it fails {}",
        shrunk.original_calls,
        shrunk.recording.calls.len(),
        shrunk.runs,
        shrunk.failure.class
    );
    match written {
        Ok(()) => println!("written, calls in the failing order, to {}", out.display()),
        Err(err) => println!("could not write {}: {err}", out.display()),
    }
    for call in &shrunk.recording.calls {
        println!("  {}", lockstep::record::brief(&call.event()));
    }
    match lockstep_explore::rust_test::print_recording(&path.display().to_string(), seed, &shrunk) {
        Ok(test) => print!("\n{test}"),
        Err(why) => println!("no Rust test printed: {why}"),
    }
}
