//! `rendezvous-probe [--fail-rank K] [--timeout-ms T]`: a member of a `lockstep launch` world
//! without a GPU.
//!
//! Prints where it stands in the world, runs the rendezvous (rank 0 makes the id
//! `probe-id-<world size>`; `--timeout-ms` bounds it, two minutes by default) and prints the id
//! it got, or its error on stderr and exits with status 1. Rank K of `--fail-rank K` instead
//! says so on stderr and exits with status 3 before the rendezvous, so the others wait for it.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use lockstep::distributed::{RendezvousOptions, Tcp, WorldEnv, bootstrap};

/// The exit status of the rank asked to fail.
const FAILED_ON_PURPOSE: u8 = 3;

fn main() -> ExitCode {
    let Some(Probe { fail_rank, options }) = parse(std::env::args().skip(1)) else {
        eprintln!("usage: rendezvous-probe [--fail-rank K] [--timeout-ms T]");
        return ExitCode::from(2);
    };
    let env = match WorldEnv::from_env() {
        Ok(env) => env,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    println!(
        "rank {} of {} (local rank {})",
        env.rank, env.world_size, env.local_rank
    );
    if fail_rank == Some(env.rank) {
        eprintln!("rank {} fails on purpose", env.rank);
        return ExitCode::from(FAILED_ON_PURPOSE);
    }
    let id = format!("probe-id-{}", env.world_size);
    match bootstrap(&Tcp::default(), &env, options, || Ok(id.into_bytes())) {
        Ok(world) => {
            println!(
                "rank {} has id {}",
                world.rank,
                String::from_utf8_lossy(&world.id)
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("rank {}: {err}", env.rank);
            ExitCode::FAILURE
        }
    }
}

/// The probe's options.
struct Probe {
    fail_rank: Option<u32>,
    options: RendezvousOptions,
}

/// `None` for arguments it does not know.
fn parse(mut args: impl Iterator<Item = String>) -> Option<Probe> {
    let mut probe = Probe {
        fail_rank: None,
        options: RendezvousOptions::default(),
    };
    while let Some(flag) = args.next() {
        let value: u64 = args.next()?.parse().ok()?;
        match flag.as_str() {
            "--fail-rank" => probe.fail_rank = Some(u32::try_from(value).ok()?),
            "--timeout-ms" => probe.options.timeout = Duration::from_millis(value),
            _ => return None,
        }
    }
    Some(probe)
}
