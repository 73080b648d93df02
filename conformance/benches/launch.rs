//! Launch throughput: `ComputeClient::launch` through the actor vs the same launches straight
//! on a `SimDevice`, measured in one run, plus the simulator's own operation rate.
//!
//! Run: `cargo bench -p lockstep-conformance --bench launch [-- LAUNCHES]`

use std::time::Instant;

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{Access, CompileOptions, ElemType, FaultRecord, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments};
use lockstep_sim::{SimConfig, SimDevice};

/// A kernel that does nothing with its one binding: the cost measured is the launch path.
fn trivial() -> Kernel {
    let mut k = KernelBuilder::new("trivial", [1, 1, 1]);
    k.binding(ElemType::U32, Access::ReadWrite);
    k.build().expect("valid")
}

fn device() -> SimDevice {
    SimDevice::new(SimConfig::new(1))
}

/// Launches per second through the client (checked mode, as users run by default).
fn through_client(launches: u32) -> (f64, u64) {
    let device = device();
    let probe = device.probe();
    let client = ComputeClient::new(device);
    let kernel = trivial();
    let handle = client.create(Bytes::from_elems(&[0u32])).expect("create");
    client.compile(&kernel).expect("compile");
    client.sync().expect("sync");
    let ops_before = probe.observations().ops_executed;
    let start = Instant::now();
    for _ in 0..launches {
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
    }
    client.sync().expect("sync");
    let elapsed = start.elapsed().as_secs_f64();
    let ops = probe.observations().ops_executed - ops_before;
    (launches as f64 / elapsed, ops)
}

/// Launches per second straight on the device, with the same binding and fault record.
fn straight(launches: u32) -> f64 {
    let mut device = device();
    let def = trivial().def().clone();
    let kernel = device
        .compile(
            &def,
            CompileOptions {
                checked: true,
                kernel_id: 0,
            },
        )
        .expect("compile");
    let stream = device.create_stream().expect("stream");
    let buffer = device.allocate(4).expect("allocate");
    let record = device
        .allocate(FaultRecord::BYTES as u64)
        .expect("allocate");
    device.write(stream, &buffer, 0, &[0; 4]).expect("write");
    device
        .write(stream, &record, 0, &[0; FaultRecord::BYTES])
        .expect("write");
    let start = Instant::now();
    for _ in 0..launches {
        let bindings = [
            BufferSlice {
                buffer: &buffer,
                offset: 0,
                len: 4,
            },
            BufferSlice {
                buffer: &record,
                offset: 0,
                len: FaultRecord::BYTES as u64,
            },
        ];
        device
            .launch(
                stream,
                &kernel,
                LaunchCount::Static([1, 1, 1]),
                &bindings,
                &[],
            )
            .expect("launch");
    }
    device.synchronize(stream).expect("sync");
    let rate = launches as f64 / start.elapsed().as_secs_f64();
    device.free(buffer);
    device.free(record);
    rate
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
