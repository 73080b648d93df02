//! What the two proof programs (`race-threads`, `missing-barrier`) share: their flags, the
//! device they run on, and their verdict. Each is a user program over the public
//! `ComputeClient` API that checks its own result against the host, so it passes wherever
//! the timing is benign; `LOCKSTEP_RECORD=PATH` records it for `lockstep explore --recording`.
//!
//! Flags: `--fixed` runs the corrected program (default: the buggy one); `--device sim|cuda`
//! (default `sim`); `--seed S`, the simulator's (default 0).

use std::process::ExitCode;

use lockstep::{ComputeClient, Device};
#[cfg(feature = "cuda")]
use lockstep_conformance::CudaFactory;
use lockstep_conformance::{DeviceFactory, SimFactory};

/// A proof program: runs on `client`, buggy or `fixed`, and says whether its result matched
/// the host's.
pub trait Program {
    /// The program's name, as printed.
    const NAME: &'static str;

    /// Runs the program; `Ok(true)` when its result matched the host's.
    fn run<D: Device>(client: ComputeClient<D>, fixed: bool) -> Result<bool, lockstep::Error>;
}

/// Parses the flags, runs `P` on the device they name, prints the verdict; fails when the
/// result differs from the host's or a call fails.
pub fn main<P: Program>() -> ExitCode {
    let (mut fixed, mut device, mut seed) = (false, "sim".to_owned(), 0u64);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match (args[i].as_str(), args.get(i + 1)) {
            ("--fixed", _) => {
                fixed = true;
                i += 1;
                continue;
            }
            ("--device", Some(value)) => device.clone_from(value),
            ("--seed", Some(value)) => match value.parse() {
                Ok(value) => seed = value,
                Err(err) => return usage(P::NAME, &format!("--seed {value}: {err}")),
            },
            (flag, _) => return usage(P::NAME, &format!("unknown flag or missing value: {flag}")),
        }
        i += 2;
    }
    let which = if fixed { "fixed" } else { "buggy" };
    println!("{}: the {which} program on {device} (seed {seed})", P::NAME);
    let verdict = match device.as_str() {
        "sim" => run::<P, _>(&SimFactory::default(), seed, fixed),
        #[cfg(feature = "cuda")]
        "cuda" => match CudaFactory::new(0) {
            Ok(factory) => run::<P, _>(&factory, seed, fixed),
            Err(err) => Err(err.into()),
        },
        other => return usage(P::NAME, &format!("no device `{other}` in this build")),
    };
    match verdict {
        Ok(true) => {
            println!("{}: the result matches the host", P::NAME);
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("{}: the result DIFFERS from the host", P::NAME);
            ExitCode::FAILURE
        }
        Err(err) => {
            println!("{}: error: {err}", P::NAME);
            ExitCode::FAILURE
        }
    }
}

fn run<P: Program, F: DeviceFactory>(
    factory: &F,
    seed: u64,
    fixed: bool,
) -> Result<bool, lockstep::Error> {
    P::run(factory.open(seed).client, fixed)
}

fn usage(name: &str, why: &str) -> ExitCode {
    eprintln!("{name}: {why}\nusage: {name} [--fixed] [--device sim|cuda] [--seed S]");
    ExitCode::FAILURE
}
