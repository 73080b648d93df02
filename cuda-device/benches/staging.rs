//! What `ComputeClient::staging` buys on a CUDA GPU: writing 256 MiB from ordinary (pageable)
//! heap bytes, which the device stages chunk by chunk into a pooled pinned block, against
//! writing the same bytes after `staging` moved them into pinned memory, which the copy engine
//! reads in place; and reading 256 MiB back into a pooled pinned block. Each beside raw pinned
//! copies (cudarc) in the same process, with the ratio. Same device, same destination; each
//! figure is the median of several rounds, and the staging copy itself is reported on its own.
//! Staged rounds stage one buffer each, as a loader would, so pinned blocks are reused after
//! the first round.
//!
//! Run: `cargo bench -p lockstep-cuda --bench staging` (on a machine with a GPU; without one it
//! prints `SKIPPED: ...` and exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`).

#![deny(clippy::undocumented_unsafe_blocks)]

use std::time::{Duration, Instant};

mod common;
use common::{RawStream, median, pinned_copies};

use lockstep::{AllocationProperty, Bytes, ComputeClient};
use lockstep_cuda::CudaDevice;
use lockstep_harness::requirement::{Need, cannot_run};

const BYTES: usize = 256 << 20;
const ROUNDS: usize = 7;

fn gb_per_s(duration: Duration) -> f64 {
    BYTES as f64 / duration.as_secs_f64() / 1e9
}

/// Median GB/s of `write` + `sync` of each of `inputs` into `dst`.
fn write_rounds(
    client: &ComputeClient<CudaDevice>,
    dst: &lockstep::Handle,
    inputs: Vec<Bytes>,
) -> f64 {
    let samples = inputs
        .into_iter()
        .map(|bytes| {
            let start = Instant::now();
            client.write(dst, bytes).expect("a valid write");
            client.sync().expect("the write completes");
            gb_per_s(start.elapsed())
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
    // Warm-up: the context's pinned pool, the destination's pages.
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
        staging.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            bytes.property(),
            AllocationProperty::Pinned,
            "staging pins on CUDA"
        );
        writes.push(write_rounds(&client, &dst, vec![bytes]));
    }
    let (staging_ms, from_staged) = (median(staging), median(writes));
    let reads = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            let read = client.read_one(dst.clone()).expect("the data reads back");
            let rate = gb_per_s(start.elapsed());
            assert!(*read == *data, "the staged writes wrote the data");
            rate
        })
        .collect();
    let read = median(reads);
    let raw = pinned_copies(&RawStream::new(), BYTES, ROUNDS);

    println!("{} MiB, median of {ROUNDS} rounds:", BYTES >> 20);
    let line = |what: &str, gbs: f64, raw_gbs: f64| {
        println!(
            "  {what:<28} {gbs:>6.1} GB/s   raw pinned {raw_gbs:>6.1} GB/s   vs raw {:.2}",
            gbs / raw_gbs
        );
    };
    line("write from pageable bytes", from_pageable, raw.write_gbs);
    line("write from staged bytes", from_staged, raw.write_gbs);
    line("read (pooled pinned block)", read, raw.read_gbs);
    println!("  staging itself {staging_ms:>9.2} ms  (copy into a reused pinned block)");
    println!("staged speedup: {:.2}x", from_staged / from_pageable);
}
