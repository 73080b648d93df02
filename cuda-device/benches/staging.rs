//! What `ComputeClient::staging` buys on a CUDA GPU: writing 256 MiB from ordinary (pageable)
//! heap bytes, which the device copies through its pinned staging chunks, against writing the
//! same bytes after `staging` moved them into pinned memory, which the copy engine reads in
//! place. Same process, same device, same destination; each figure is the median of several
//! write + sync rounds, and the staging copy itself is reported on its own. Staged rounds stage
//! one buffer each, as a loader would, so pinned blocks are reused after the first round.
//!
//! Run: `cargo bench -p lockstep-cuda --bench staging` (on a machine with a GPU; without one it
//! prints `SKIPPED: ...` and exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`).

use std::time::{Duration, Instant};

use lockstep::{AllocationProperty, Bytes, ComputeClient};
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_cuda::CudaDevice;

const BYTES: usize = 256 << 20;
const ROUNDS: usize = 7;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn gb_per_s(duration: Duration) -> f64 {
    BYTES as f64 / duration.as_secs_f64() / 1e9
}

/// Times `write` + `sync` of each of `inputs` into `dst`.
fn write_rounds(
    client: &ComputeClient<CudaDevice>,
    dst: &lockstep::Handle,
    inputs: Vec<Bytes>,
) -> Duration {
    let samples = inputs
        .into_iter()
        .map(|bytes| {
            let start = Instant::now();
            client.write(dst, bytes).expect("a valid write");
            client.sync().expect("the write completes");
            start.elapsed()
        })
        .collect();
    median(samples)
}

fn main() {
    let device = match CudaDevice::new(0) {
        Ok(device) => device,
        Err(err) => {
            cannot_run(Need::CudaGpu, "staging", &err.to_string());
            return;
        }
    };
    let client = ComputeClient::new(device);
    println!("device: {}", client.properties().name);
    let data: Vec<u8> = (0..BYTES).map(|i| (i % 251) as u8).collect();
    let dst = client.empty(BYTES).expect("256 MiB fit");
    // Warm-up: the device's staging pool, the destination's pages.
    client.write(&dst, Bytes::from(data.clone())).unwrap();
    client.sync().unwrap();

    let pageable: Vec<Bytes> = (0..ROUNDS).map(|_| Bytes::from(data.clone())).collect();
    let from_pageable = write_rounds(&client, &dst, pageable);

    // As a loader stages tensors one after another: each round stages one buffer (reusing the
    // pinned block the previous round's write gave back) and writes it.
    let mut staging = Vec::with_capacity(ROUNDS);
    let mut writes = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let mut bytes = Bytes::from(data.clone());
        let start = Instant::now();
        client
            .staging(std::iter::once(&mut bytes), false)
            .expect("pinned memory for the round");
        staging.push(start.elapsed());
        assert_eq!(
            bytes.property(),
            AllocationProperty::Pinned,
            "staging pins on CUDA"
        );
        writes.push(write_rounds(&client, &dst, vec![bytes]));
    }
    let (staging, from_staged) = (median(staging), median(writes));
    let read = client.read_one(dst).expect("the data reads back");
    assert!(*read == *data, "the staged writes wrote the data");

    println!(
        "write of {} MiB, median of {ROUNDS} (write + sync):",
        BYTES >> 20
    );
    println!(
        "  from pageable bytes   {:>9.2} ms  {:>6.1} GB/s",
        from_pageable.as_secs_f64() * 1e3,
        gb_per_s(from_pageable)
    );
    println!(
        "  from staged bytes     {:>9.2} ms  {:>6.1} GB/s",
        from_staged.as_secs_f64() * 1e3,
        gb_per_s(from_staged)
    );
    println!(
        "  staging itself        {:>9.2} ms  (copy into a reused pinned block)",
        staging.as_secs_f64() * 1e3
    );
    println!(
        "staged speedup: {:.2}x",
        from_pageable.as_secs_f64() / from_staged.as_secs_f64()
    );
}
