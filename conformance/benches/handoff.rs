//! The blocking path on the simulator: the figures of `lockstep-cuda`'s `runtime_vs_raw` bench
//! that measure the client's hand-off to its actor rather than the GPU, each beside the same
//! work straight on a `SimDevice` in the same run.
//!
//! Figures: `empty(1 MiB)` + drop (per pair, mean of a loop); a `memory_usage` round trip
//! (median of single calls, each a blocking call that does no device work); a 4-byte
//! create -> launch -> read (mean of a loop).
//!
//! Run: `cargo bench -p lockstep-conformance --bench handoff`

use std::time::Instant;

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{Access, Axis, CompileOptions, ElemType, FaultRecord, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments, StreamId};
use lockstep_sim::{SimConfig, SimDevice};

const ALLOC_BYTES: usize = 1 << 20;
const REPS: u32 = 20_000;

fn device() -> SimDevice {
    SimDevice::new(SimConfig::new(1))
}

fn increment() -> Kernel {
    let mut k = KernelBuilder::new("increment", [32, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.clone().lt(dst.len()), |k| {
        k.store(dst, i.clone(), dst.load(i) + 1u32)
    });
    Kernel::new(k.build().expect("valid")).expect("valid")
}

fn micros_per(start: Instant, reps: u32) -> f64 {
    start.elapsed().as_secs_f64() * 1e6 / f64::from(reps)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// `empty(1 MiB)` + drop through the client, and `allocate` + `free` straight on the device.
fn allocations(client: &ComputeClient<SimDevice>) -> (f64, f64) {
    for _ in 0..100 {
        drop(client.empty(ALLOC_BYTES).expect("empty"));
    }
    let start = Instant::now();
    for _ in 0..REPS {
        drop(client.empty(ALLOC_BYTES).expect("empty"));
    }
    // A blocking call after the last release: every release task has run.
    client.memory_usage().expect("memory_usage");
    let runtime = micros_per(start, REPS);
    let mut raw = device();
    let start = Instant::now();
    for _ in 0..REPS {
        let buffer = raw.allocate(ALLOC_BYTES as u64).expect("allocate");
        raw.free(buffer);
    }
    (runtime, micros_per(start, REPS))
}

/// The median of single `memory_usage` calls, and of single `synchronize` calls on an idle
/// device stream (the cheapest blocking device call).
fn blocking_round_trips(client: &ComputeClient<SimDevice>) -> (f64, f64) {
    let time = |mut call: Box<dyn FnMut() + '_>| {
        let samples: Vec<f64> = (0..REPS)
            .map(|_| {
                let start = Instant::now();
                call();
                start.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        median(samples)
    };
    let runtime = time(Box::new(|| {
        client.memory_usage().expect("memory_usage");
    }));
    let mut raw = device();
    let stream = raw.create_stream().expect("stream");
    let raw = time(Box::new(move || raw.synchronize(stream).expect("sync")));
    (runtime, raw)
}

/// A 4-byte create -> launch -> read through the client, and the same calls straight on the
/// device (with the fault record a checked launch binds, read back as the runtime does).
fn round_trips(client: &ComputeClient<SimDevice>) -> (f64, f64) {
    let kernel = increment();
    let once = |i: u32| {
        let handle = client.create(Bytes::from_elems(&[i])).expect("create");
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
        let back = client.read_one(handle).expect("read").to_elems::<u32>();
        assert_eq!(back, vec![i + 1]);
    };
    (0..100).for_each(once);
    let start = Instant::now();
    (0..REPS).for_each(once);
    let runtime = micros_per(start, REPS);
    // Where the time goes: each client call of the round trip, timed alone.
    let mut steps = [0f64; 3];
    for i in 0..REPS {
        let t = Instant::now();
        let handle = client.create(Bytes::from_elems(&[i])).expect("create");
        steps[0] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
        steps[1] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        client.read_one(handle).expect("read");
        steps[2] += t.elapsed().as_secs_f64();
    }
    let [create, launch, read] = steps.map(|s| s * 1e6 / f64::from(REPS));
    println!(
        "round trip breakdown: create {create:.2} us, launch {launch:.2} us, read {read:.2} us"
    );

    let mut device = device();
    let stream = device.create_stream().expect("stream");
    let options = CompileOptions {
        checked: true,
        kernel_id: 0,
    };
    let compiled = device.compile(kernel.def(), options).expect("compile");
    let record = device.allocate(FaultRecord::BYTES as u64).expect("record");
    device
        .write(stream, &record, 0, &[0; FaultRecord::BYTES])
        .expect("write");
    let start = Instant::now();
    for i in 0..REPS {
        let buffer = device.allocate(4).expect("allocate");
        device
            .write(stream, &buffer, 0, &i.to_le_bytes())
            .expect("write");
        let slice = |buffer, len| BufferSlice {
            buffer,
            offset: 0,
            len,
        };
        let bindings = [slice(&buffer, 4), slice(&record, FaultRecord::BYTES as u64)];
        device
            .launch(
                stream,
                &compiled,
                LaunchCount::Static([1, 1, 1]),
                &bindings,
                &[],
            )
            .expect("launch");
        let value = device.read(stream, &buffer, 0, 4).expect("read");
        let fault = device
            .read(stream, &record, 0, FaultRecord::BYTES as u64)
            .expect("read");
        assert_eq!(
            device.wait_read(value).expect("value"),
            (i + 1).to_le_bytes()
        );
        device.wait_read(fault).expect("fault record");
        device.free(buffer);
    }
    (runtime, micros_per(start, REPS))
}

fn main() {
    let mut client = ComputeClient::new(device());
    client.set_stream(StreamId(0));
    let rows = [
        ("empty(1 MiB)+drop", allocations(&client)),
        (
            "memory_usage round trip (median)",
            blocking_round_trips(&client),
        ),
        ("4-byte create -> launch -> read", round_trips(&client)),
    ];
    println!(
        "{:<36} {:>10} {:>10}  (us; raw: straight on SimDevice)",
        "figure", "runtime", "raw"
    );
    for (figure, (runtime, raw)) in rows {
        println!("{figure:<36} {runtime:>10.2} {raw:>10.2}");
    }
}
