//! `lockstep recording PATH` (a recording's summary) and `lockstep replay --recording PATH`
//! (the recording run on the simulator, every read checked): see `lockstep::record`.

use std::path::Path;
use std::process::ExitCode;

use lockstep::record::{Reader, Summary};
use lockstep::replay::replay;
use lockstep::{ComputeClient, ServerOptions, record::RecordTo};
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

/// Prints the summary of the recording at `path`, after every event if `events`; a recording
/// unreadable past a point prints the summary of what came before, then why, and fails.
pub fn summary(path: &Path, events: bool) -> ExitCode {
    let input = match open(path) {
        Ok(input) => input,
        Err(code) => return code,
    };
    let mut summary = Summary::default();
    let mut failure = None;
    for event in Reader::new(input) {
        match event {
            Ok(event) => {
                if events {
                    println!("{}", lockstep::record::brief(&event));
                }
                summary.add(&event);
            }
            Err(err) => failure = Some(err),
        }
    }
    print!("{summary}");
    match failure {
        None => ExitCode::SUCCESS,
        Some(err) => {
            println!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Replays the recording at `path` on simulators seeded from `seed` (device `d` gets
/// `seed + d`); fails on any mismatch or unreadable byte.
pub fn replay_recording(path: &Path, seed: u64) -> ExitCode {
    let input = match open(path) {
        Ok(input) => input,
        Err(code) => return code,
    };
    println!("seed: {seed}");
    let options = ServerOptions {
        record: RecordTo::Off,
        ..ServerOptions::default()
    };
    let result = replay(input, |device| {
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
