//! One rank of a world of processes on CUDA, for `lockstep launch --nproc N -- world [MODE]`.
//!
//! `check` (the default): every rank joins the world (`CudaDevice::from_world_env`), checks
//! that its client names the world's devices by global rank, all-reduces (sum over `u32`, and
//! max in place) and passes a buffer around the ring with `send_to` / `receive_from`, and
//! compares every result with the exact expected value (a world of one process has no ring: it
//! checks the all-reduces alone). `bench`: all-reduce bandwidth across the processes at 1 MiB,
//! 64 MiB and 256 MiB (`f32` sum), printed by rank 0 as nccl-tests' algbw, the median of 5
//! rounds; `scripts/gpu/torch_all_reduce.py` measures PyTorch the same way. `stall` and
//! `vanish`: the last rank stops after one all-reduce, and the others must fail typed instead
//! of waiting for ever (`faults.rs`).
//!
//! Without the world's variables, a GPU or NCCL it prints `SKIPPED: ...` and exits 0, or fails
//! under `LOCKSTEP_REQUIRE_GPU=1`.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use lockstep::distributed::{BootstrapError, EnvError, WorldEnv};
use lockstep::kernel::ElemType;
use lockstep::{Bytes, ComputeClient, Device, DeviceId, Handle, ReduceOperation};
use lockstep_cuda::{CudaDevice, JoinWorldError};
use lockstep_harness::requirement::{Need, cannot_run};

mod faults;

const WORDS: usize = 1 << 20;
const SIZES_BYTES: [usize; 3] = [1 << 20, 64 << 20, 256 << 20];
const ROUNDS: usize = 5;

type Client = ComputeClient<CudaDevice>;

/// What this rank runs, from the first argument.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Check,
    Bench,
    Stop(faults::Stop),
}

fn main() -> ExitCode {
    let mode = match std::env::args().nth(1).as_deref() {
        None | Some("check") => Mode::Check,
        Some("bench") => Mode::Bench,
        Some("stall") => Mode::Stop(faults::Stop::Stall),
        Some("vanish") => Mode::Stop(faults::Stop::Vanish),
        Some(other) => {
            eprintln!("usage: world [check|bench|stall|vanish], not {other}");
            return ExitCode::from(2);
        }
    };
    let timeout = match mode {
        Mode::Stop(_) => faults::TIMEOUT,
        Mode::Check | Mode::Bench => CudaDevice::DEFAULT_COLLECTIVE_TIMEOUT,
    };
    let Some(client) = join(timeout) else {
        return ExitCode::SUCCESS;
    };
    let result = match mode {
        Mode::Check => check(&client),
        Mode::Bench => run_bench(&client),
        Mode::Stop(stop) => faults::check(&client, stop),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("rank {}: {message}", client.peer_id().index);
            ExitCode::FAILURE
        }
    }
}

/// This rank's client in the world, its collectives bounded by `timeout`; `None` after a
/// visible skip.
fn join(timeout: Duration) -> Option<Client> {
    let env = match WorldEnv::from_env() {
        Ok(env) => env,
        Err(err @ EnvError::Missing { .. }) => {
            let reason = format!("not launched as a world: {err}");
            cannot_run(Need::CudaGpu, "world", &reason);
            return None;
        }
        Err(err) => panic!("{err}"),
    };
    match CudaDevice::join_world(&env, Default::default()) {
        Ok(device) if device.supports_collectives() => {
            Some(ComputeClient::new(device.with_collective_timeout(timeout)))
        }
        Ok(_) => {
            cannot_run(Need::Nccl, "world", "libnccl cannot be loaded");
            None
        }
        Err(JoinWorldError::Device { source, .. }) => {
            cannot_run(Need::CudaGpu, "world", &source.to_string());
            None
        }
        // Rank 0 could not make NCCL's id; the others hear it as the abort's reason.
        Err(JoinWorldError::Bootstrap(
            BootstrapError::Id { reason } | BootstrapError::Aborted { reason },
        )) if reason.contains("libnccl") => {
            cannot_run(Need::Nccl, "world", &reason);
            None
        }
        Err(err) => panic!("rank {}: {err}", env.rank),
    }
}

fn ensure(claim: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if claim { Ok(()) } else { Err(what()) }
}

/// The handle's `u32`s, read.
fn read_u32(client: &Client, handle: Handle) -> Result<Vec<u32>, String> {
    Ok(client
        .read_one(handle)
        .map_err(|e| e.to_string())?
        .to_elems::<u32>())
}

/// The first index where `got` differs from `expected(i)`, as an error naming `what`.
fn exact(what: &str, got: &[u32], expected: impl Fn(u32) -> u32) -> Result<(), String> {
    let wrong = (0..got.len() as u32).find(|&i| got[i as usize] != expected(i));
    ensure(wrong.is_none(), || {
        let i = wrong.unwrap_or_default();
        format!(
            "{what} differs at {i}: {} instead of {}",
            got[i as usize],
            expected(i)
        )
    })
}

fn check(client: &Client) -> Result<(), String> {
    let world = client.enumerate_all_devices();
    let (rank, size) = (client.peer_id().index, world.len() as u32);
    let named_by_rank: Vec<DeviceId> = (0..size)
        .map(|index| DeviceId {
            type_id: CudaDevice::TYPE_ID,
            index,
        })
        .collect();
    ensure(world == named_by_rank, || format!("world {world:?}"))?;
    let err = |e: lockstep::ServerError| e.to_string();

    // Element i of rank r is r + i: the sum is size * i + size * (size - 1) / 2, the max
    // size - 1 + i.
    let words: Vec<u32> = (0..WORDS as u32).map(|i| rank + i).collect();
    let src = client.create(Bytes::from_elems(&words)).map_err(err)?;
    let sum = client.empty(WORDS * 4).map_err(err)?;
    let (u32, all) = (ElemType::U32, world.clone());
    client
        .all_reduce(
            src.clone(),
            sum.clone(),
            u32,
            all.clone(),
            ReduceOperation::Sum,
        )
        .map_err(err)?;
    client
        .all_reduce(src.clone(), src.clone(), u32, all, ReduceOperation::Max)
        .map_err(err)?;
    let bias = size * (size - 1) / 2;
    exact("sum", &read_u32(client, sum)?, |i| size * i + bias)?;
    exact("max", &read_u32(client, src)?, |i| size - 1 + i)?;

    if size == 1 {
        println!("rank 0 of 1: all_reduce sum and max of {WORDS} u32 exact, no ring of one");
        return Ok(());
    }
    // Ring: rank r sends r * 1000 + i to r + 1 and receives from r - 1; even ranks send
    // first, odd ranks receive first, so every send meets a posted receive.
    let next = world[((rank + 1) % size) as usize];
    let previous = world[((rank + size - 1) % size) as usize];
    let mine: Vec<u32> = (0..WORDS as u32).map(|i| rank * 1000 + i).collect();
    let outgoing = client.create(Bytes::from_elems(&mine)).map_err(err)?;
    let received = if rank % 2 == 0 {
        client.send_to(outgoing, next).map_err(err)?;
        client.receive_from(previous, WORDS * 4).map_err(err)?
    } else {
        let received = client.receive_from(previous, WORDS * 4).map_err(err)?;
        client.send_to(outgoing, next).map_err(err)?;
        received
    };
    let from = previous.index;
    exact("ring copy", &read_u32(client, received)?, |i| {
        from * 1000 + i
    })?;
    println!(
        "rank {rank} of {size}: all_reduce sum and max of {WORDS} u32 exact, ring copy from rank {from} exact"
    );
    Ok(())
}

/// Seconds of `reps` all-reduces of `src` into `dst`, synchronised once at the end.
fn time_all_reduces(
    client: &Client,
    src: &Handle,
    dst: &Handle,
    reps: usize,
) -> Result<f64, String> {
    let err = |e: lockstep::ServerError| e.to_string();
    let world = client.enumerate_all_devices();
    let start = Instant::now();
    for _ in 0..reps {
        let (s, d) = (src.clone(), dst.clone());
        client
            .all_reduce(s, d, ElemType::F32, world.clone(), ReduceOperation::Sum)
            .map_err(err)?;
    }
    client.sync().map_err(err)?;
    Ok(start.elapsed().as_secs_f64())
}

fn run_bench(client: &Client) -> Result<(), String> {
    let err = |e: lockstep::ServerError| e.to_string();
    let rank = client.peer_id().index;
    let size = client.device_count_total();
    if rank == 0 {
        println!(
            "lockstep all_reduce across {size} processes (f32 sum, algbw GB/s, median of {ROUNDS})"
        );
    }
    for bytes in SIZES_BYTES {
        let reps = if bytes <= 1 << 20 { 200 } else { 10 };
        let src = client.create(Bytes::from(vec![0u8; bytes])).map_err(err)?;
        let dst = client.empty(bytes).map_err(err)?;
        client.sync().map_err(err)?;
        // Warm-up: the communicator, NCCL's buffers.
        time_all_reduces(client, &src, &dst, reps)?;
        let mut seconds = (0..ROUNDS)
            .map(|_| time_all_reduces(client, &src, &dst, reps))
            .collect::<Result<Vec<_>, _>>()?;
        seconds.sort_by(f64::total_cmp);
        let gbps = bytes as f64 * reps as f64 / seconds[ROUNDS / 2] / 1e9;
        if rank == 0 {
            println!("{:>6} MiB  {gbps:8.1} GB/s", bytes >> 20);
        }
    }
    Ok(())
}
