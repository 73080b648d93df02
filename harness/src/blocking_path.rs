//! The blocking path's figures, measured the same way on every device: `empty` + drop, single
//! blocking calls, the 4-byte create -> launch -> read round trip and the launch rate, through
//! the client and straight on the device. Shared by `bench/benches/handoff.rs` and
//! `launch.rs` (the simulator), `lockstep-cuda`'s `runtime_vs_raw` and `lockstep-wgpu`'s
//! `dispatch` (GPUs), so that they report comparable numbers.

use std::time::Instant;

use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{Access, Axis, CompileOptions, ElemType, FaultRecord, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments};

/// `dst[i] += 1` over a `u32` binding, in workgroups of 32: the round trip's kernel.
pub fn increment_kernel() -> Kernel {
    let mut k = KernelBuilder::new("increment", [32, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(dst.len()), |k| k.store(dst, i, dst.load(i) + 1u32));
    k.build().expect("increment is valid")
}

/// A kernel that does nothing with its one `u32` binding: a launch rate of it measures the
/// launch path.
pub fn trivial_kernel() -> Kernel {
    let mut k = KernelBuilder::new("trivial", [1, 1, 1]);
    k.binding(ElemType::U32, Access::ReadWrite);
    k.build().expect("trivial is valid")
}

/// Launches per second of [`trivial_kernel`] through `client` (checked mode, as users run by
/// default) over a one-word handle: `launches` of them, then a sync.
pub fn client_launches<D: Device>(client: &ComputeClient<D>, launches: u32) -> f64 {
    let kernel = trivial_kernel();
    let handle = client.create(Bytes::from_elems(&[0u32])).expect("create");
    client.compile(&kernel).expect("compile");
    client.sync().expect("sync");
    let start = Instant::now();
    for _ in 0..launches {
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
    }
    client.sync().expect("sync");
    f64::from(launches) / start.elapsed().as_secs_f64()
}

/// [`client_launches`] straight on `device`, on `stream`: the word and a zeroed fault record
/// bound as the runtime binds them, then a synchronize.
pub fn straight_launches<D: Device>(device: &mut D, stream: D::Stream, launches: u32) -> f64 {
    let options = CompileOptions::checked(0);
    let kernel = device
        .compile(trivial_kernel().def(), options)
        .expect("compile");
    let word = device.allocate(4).expect("allocate");
    device.write(stream, &word, 0, &[0; 4]).expect("write");
    let record = zeroed_fault_record(device, stream);
    device.synchronize(stream).expect("synchronize");
    let start = Instant::now();
    for _ in 0..launches {
        let bindings = [
            BufferSlice {
                buffer: &word,
                offset: 0,
                len: 4,
            },
            BufferSlice {
                buffer: &record,
                offset: 0,
                len: FaultRecord::BYTES as u64,
            },
        ];
        let count = LaunchCount::Static([1, 1, 1]);
        device
            .launch(stream, &kernel, count, &bindings, &[])
            .expect("launch");
    }
    device.synchronize(stream).expect("synchronize");
    let rate = f64::from(launches) / start.elapsed().as_secs_f64();
    device.free(word);
    device.free(record);
    rate
}

/// The middle sample (the upper one of an even count).
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// The median of `reps` single calls of `call`, in microseconds, after 100 to warm up.
pub fn median_us(reps: u32, mut call: impl FnMut()) -> f64 {
    (0..100).for_each(|_| call());
    let samples = (0..reps)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    median(samples)
}

/// Microseconds per `empty(bytes)` + drop through `client`, over `reps` pairs (after 100 to
/// warm the pools), ending with a blocking call so that every release has run.
pub fn empty_and_drop_us<D: Device>(client: &ComputeClient<D>, bytes: usize, reps: u32) -> f64 {
    for _ in 0..100 {
        drop(client.empty(bytes).expect("empty"));
    }
    let start = Instant::now();
    for _ in 0..reps {
        drop(client.empty(bytes).expect("empty"));
    }
    client.memory_usage().expect("memory_usage");
    start.elapsed().as_secs_f64() * 1e6 / f64::from(reps)
}

/// The client's 4-byte create -> launch -> read round trip, in microseconds per trip, and where
/// the time goes: each call of the trip timed alone (create, launch, read), over `reps` trips.
pub fn client_round_trip_us<D: Device>(client: &ComputeClient<D>, reps: u32) -> (f64, [f64; 3]) {
    let kernel = increment_kernel();
    let mut steps = [0f64; 3];
    let once = |i: u32, steps: &mut [f64; 3]| {
        let t = Instant::now();
        let handle = client.create(Bytes::from_elems(&[i])).expect("create");
        let created = t.elapsed().as_secs_f64();
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
        let launched = t.elapsed().as_secs_f64();
        let back = client.read_one(handle).expect("read").to_elems::<u32>();
        let read = t.elapsed().as_secs_f64();
        assert_eq!(back, vec![i + 1]);
        for (step, time) in steps
            .iter_mut()
            .zip([created, launched - created, read - launched])
        {
            *step += time;
        }
    };
    (0..100).for_each(|i| once(i, &mut [0.0; 3]));
    let start = Instant::now();
    (0..reps).for_each(|i| once(i, &mut steps));
    let per_trip = start.elapsed().as_secs_f64() * 1e6 / f64::from(reps);
    (per_trip, steps.map(|s| s * 1e6 / f64::from(reps)))
}

/// The same round trip straight on `device`, as the runtime drives it: allocate, write, launch
/// checked with a fault record, read the value and the record back, free. Microseconds each.
pub fn straight_round_trip_us<D: Device>(device: &mut D, reps: u32) -> f64 {
    let stream = device.create_stream().expect("stream");
    let options = CompileOptions::checked(0);
    let kernel = device
        .compile(increment_kernel().def(), options)
        .expect("compile");
    let record = zeroed_fault_record(device, stream);
    let mut once = |i: u32| {
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
                &kernel,
                LaunchCount::Static([1, 1, 1]),
                &bindings,
                &[],
            )
            .expect("launch");
        let value = device.read(stream, &buffer, 0, 4).expect("read");
        let fault = device
            .read(stream, &record, 0, FaultRecord::BYTES as u64)
            .expect("read");
        let value = device.wait_read(value).expect("wait_read");
        device.wait_read(fault).expect("wait_read");
        assert_eq!(*value, (i + 1).to_le_bytes());
        device.free(buffer);
    };
    (0..100).for_each(&mut once);
    let start = Instant::now();
    (0..reps).for_each(&mut once);
    start.elapsed().as_secs_f64() * 1e6 / f64::from(reps)
}

/// A zeroed fault record for checked launches straight on `device`, as the runtime binds one.
pub fn zeroed_fault_record<D: Device>(device: &mut D, stream: D::Stream) -> D::Buffer {
    let record = device
        .allocate(FaultRecord::BYTES as u64)
        .expect("allocate");
    device
        .write(stream, &record, 0, &[0; FaultRecord::BYTES])
        .expect("write");
    record
}
