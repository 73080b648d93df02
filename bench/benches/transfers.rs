//! Transfers through `ComputeClient` on the simulator or wgpu: `write` + `sync` and `read_one`
//! at sizes from one word to 64 MiB, each the median of several rounds, in GB/s. CUDA's
//! figures, beside raw pinned copies, are `cuda-device/benches/runtime_vs_raw.rs`.
//!
//! Run: `cargo bench -p lockstep-bench --bench transfers [-- sim|wgpu]` (wgpu takes its
//! adapter from `LOCKSTEP_WGPU_BACKEND`/`LOCKSTEP_WGPU_ADAPTER`; lavapipe where there is no GPU).

use std::time::{Duration, Instant};

use lockstep::{Bytes, ComputeClient, Device};
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_sim::{SimConfig, SimDevice};

/// Bytes per transfer, and how many rounds each size runs (the median counts).
const SIZES: [(usize, usize); 5] = [
    (4, 200),
    (64 << 10, 100),
    (1 << 20, 30),
    (16 << 20, 7),
    (64 << 20, 5),
];

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median `write` + `sync` and `read_one` times for `bytes`, after one warm-up round.
fn transfer(client: &ComputeClient<impl Device>, bytes: usize, rounds: usize) -> [Duration; 2] {
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let handle = client.empty(bytes).expect("the size fits the device");
    let mut writes = Vec::with_capacity(rounds);
    let mut reads = Vec::with_capacity(rounds);
    for round in 0..=rounds {
        let input = Bytes::from(data.clone());
        let start = Instant::now();
        client.write(&handle, input).expect("a valid write");
        client.sync().expect("the write completes");
        let write = start.elapsed();
        let start = Instant::now();
        let back = client.read_one(handle.clone()).expect("the read completes");
        let read = start.elapsed();
        assert!(*back == *data, "read back what was written");
        if round > 0 {
            writes.push(write);
            reads.push(read);
        }
    }
    [median(writes), median(reads)]
}

fn report(client: &ComputeClient<impl Device>) {
    println!("device: {}", client.properties().name);
    println!(
        "{:>10} {:>12} {:>10} {:>12} {:>10}",
        "bytes", "write us", "GB/s", "read us", "GB/s"
    );
    for (bytes, rounds) in SIZES {
        let [write, read] = transfer(client, bytes, rounds);
        let gb = |d: Duration| bytes as f64 / d.as_secs_f64() / 1e9;
        println!(
            "{bytes:>10} {:>12.1} {:>10.3} {:>12.1} {:>10.3}",
            write.as_secs_f64() * 1e6,
            gb(write),
            read.as_secs_f64() * 1e6,
            gb(read)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map_or("sim", String::as_str) {
        "sim" => report(&ComputeClient::new(SimDevice::new(
            SimConfig::new(1).with_memory(1 << 30, 256 << 20),
        ))),
        "wgpu" => {
            let device = lockstep_wgpu::WgpuOptions::from_env()
                .map_err(|e| e.to_string())
                .and_then(|options| {
                    lockstep_wgpu::WgpuDevice::new(options).map_err(|e| e.to_string())
                });
            match device {
                Ok(device) => report(&ComputeClient::new(device)),
                Err(reason) => cannot_run(Need::WgpuAdapter, "transfers", &reason),
            }
        }
        other => eprintln!("unknown device `{other}`: use sim or wgpu"),
    }
}
