//! The blocking path on the simulator: the figures of `lockstep-cuda`'s `runtime_vs_raw` bench
//! that measure the client's hand-off to its actor rather than the GPU, each beside the same
//! work straight on a `SimDevice` in the same run (`lockstep_harness::blocking_path`).
//!
//! Figures: `empty(1 MiB)` + drop (per pair, mean of a loop); a `memory_usage` round trip
//! (median of single calls, each a blocking call that does no device work) beside a
//! `synchronize` of an idle device stream; a 4-byte create -> launch -> read (mean of a loop).
//!
//! Run: `cargo bench -p lockstep-bench --bench handoff`

use std::time::Instant;

use lockstep::{ComputeClient, Device, StreamId};
use lockstep_harness::blocking_path::{
    client_round_trip_us, empty_and_drop_us, median_us, straight_round_trip_us,
};
use lockstep_sim::{SimConfig, SimDevice};

const ALLOC_BYTES: usize = 1 << 20;
const REPS: u32 = 20_000;

fn device() -> SimDevice {
    SimDevice::new(SimConfig::new(1))
}

/// `allocate` + `free` of `ALLOC_BYTES` straight on the device, microseconds per pair.
fn raw_allocations() -> f64 {
    let mut raw = device();
    let start = Instant::now();
    for _ in 0..REPS {
        let buffer = raw.allocate(ALLOC_BYTES as u64).expect("allocate");
        raw.free(buffer);
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(REPS)
}

fn main() {
    let mut client = ComputeClient::new(device());
    client.set_stream(StreamId(0));
    let allocations = (
        empty_and_drop_us(&client, ALLOC_BYTES, REPS),
        raw_allocations(),
    );
    let mut raw = device();
    let stream = raw.create_stream().expect("stream");
    let round_trip = (
        median_us(REPS, || {
            client.memory_usage().expect("memory_usage");
        }),
        median_us(REPS, || raw.synchronize(stream).expect("sync")),
    );
    let (trip, [create, launch, read]) = client_round_trip_us(&client, REPS);
    let trips = (trip, straight_round_trip_us(&mut device(), REPS));
    println!(
        "round trip breakdown: create {create:.2} us, launch {launch:.2} us, read {read:.2} us"
    );
    println!(
        "{:<36} {:>10} {:>10}  (us; raw: straight on SimDevice)",
        "figure", "runtime", "raw"
    );
    for (figure, (runtime, raw)) in [
        ("empty(1 MiB)+drop", allocations),
        ("memory_usage round trip (median)", round_trip),
        ("4-byte create -> launch -> read", trips),
    ] {
        println!("{figure:<36} {runtime:>10.2} {raw:>10.2}");
    }
}
