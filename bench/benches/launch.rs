//! Launch throughput: `ComputeClient::launch` through the actor vs the same launches straight
//! on a `SimDevice`, measured in one run, plus the simulator's own operation rate.
//!
//! Run: `cargo bench -p lockstep-bench --bench launch [-- LAUNCHES]`

use lockstep::{ComputeClient, Device};
use lockstep_harness::blocking_path::{client_launches, straight_launches};
use lockstep_sim::{SimConfig, SimDevice};

fn device() -> SimDevice {
    SimDevice::new(SimConfig::new(1))
}

/// Launches per second through the client, and the simulated operations they took.
fn through_client(launches: u32) -> (f64, u64) {
    let device = device();
    let probe = device.probe();
    let client = ComputeClient::new(device);
    let ops_before = probe.observations().ops_executed;
    let rate = client_launches(&client, launches);
    let ops = probe.observations().ops_executed - ops_before;
    (rate, ops)
}

/// Launches per second straight on the device, with the same binding and fault record.
fn straight(launches: u32) -> f64 {
    let mut device = device();
    let stream = device.create_stream().expect("stream");
    straight_launches(&mut device, stream, launches)
}

fn main() {
    let launches: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200_000);
    // Warm up both paths (allocator, thread start) before measuring.
    through_client(launches / 10);
    straight(launches / 10);
    let (client_rate, ops) = through_client(launches);
    let direct_rate = straight(launches);
    let sim_ops_rate = ops as f64 / (launches as f64 / client_rate);
    println!("launches: {launches}");
    println!("straight on SimDevice:      {direct_rate:>12.0} launches/s");
    println!("ComputeClient through actor: {client_rate:>11.0} launches/s");
    println!(
        "ratio client/straight:       {:>11.2}",
        client_rate / direct_rate
    );
    println!("simulated operations:        {sim_ops_rate:>11.0} ops/s ({ops} ops)");
}
