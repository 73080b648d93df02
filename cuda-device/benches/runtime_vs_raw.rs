//! The runtime's cost on a CUDA GPU: each figure through `ComputeClient` beside the same work
//! done with raw driver calls (cudarc) in the same process, and their ratio.
//!
//! Run: `cargo bench -p lockstep-cuda --bench runtime_vs_raw` (on a machine with a GPU; without
//! one it prints `SKIPPED: ...` and exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`).
//!
//! Figures: (a) launches per second of an empty kernel; (b) `write` of 256 MiB from a `Vec` and
//! from `staging` bytes, and `read` of 256 MiB (into a pooled pinned block, lent as the
//! result), against pinned copies, with a sweep of write staging's chunk size and threads; (c) allocating and dropping 1 MiB against `cuMemAlloc`+`cuMemFree` and the
//! stream-ordered `cuMemAllocAsync`+`cuMemFreeAsync`; (d) a 4-byte create → launch → read round
//! trip; (e) the median of single `memory_usage` calls (a blocking call that does no device
//! work: the hand-off to the actor and back) against single `cuStreamQuery`s of an idle stream
//! (the cheapest driver call that answers). "vs raw" is the runtime's speed over raw's: 1.00 is
//! parity, 0.90 is 10% slower.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{CString, c_void};
use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::sys;
use cudarc::nvrtc::{CompileOptions as NvrtcOptions, compile_ptx_with_opts};
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{CompileOptions, FaultRecord, KernelBuilder, KernelDef};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, DeviceError, Kernel, KernelArguments};
use lockstep_cuda::{CudaContext, CudaDevice, WriteStaging, lower};
use lockstep_harness::blocking_path::{
    client_round_trip_us, empty_and_drop_us, increment_kernel, median_us, straight_round_trip_us,
    zeroed_fault_record,
};
use lockstep_harness::requirement::{Need, cannot_run};

mod common;
use common::{RawStream, check, median, pinned_copies};

const LAUNCHES: u32 = 50_000;
const LAUNCH_ROUNDS: u32 = 3;
const COPY_BYTES: usize = 256 << 20;
const COPY_REPS: usize = 7;
const ALLOC_BYTES: usize = 1 << 20;
const ALLOC_REPS: u32 = 2_000;
const ROUND_TRIPS: u32 = 2_000;
/// (chunk MiB, most threads) of the write staging sweep.
const WRITE_SWEEP: [(usize, usize); 12] = [
    (1, 8),
    (1, 16),
    (2, 4),
    (2, 8),
    (2, 16),
    (4, 4),
    (4, 8),
    (4, 16),
    (8, 8),
    (8, 16),
    (16, 8),
    (16, 16),
];
const SWEEP_REPS: usize = 3;

/// One line of the report.
struct Row {
    figure: &'static str,
    /// The figure's key in the peers' table (`scripts/gpu/peers_table.py`), for the figures
    /// that cubecl and PyTorch are measured on too.
    key: Option<&'static str>,
    runtime: f64,
    raw: f64,
    unit: &'static str,
    /// Rates (higher is better) against times (lower is better).
    higher_is_better: bool,
}

impl Row {
    fn speed_vs_raw(&self) -> f64 {
        if self.higher_is_better {
            self.runtime / self.raw
        } else {
            self.raw / self.runtime
        }
    }
}

fn empty_kernel() -> Kernel {
    KernelBuilder::new("empty", [1, 1, 1])
        .build()
        .expect("an empty kernel is valid")
}

/// Raw driver state on the bench's own thread: the same primary context, its own stream.
struct Raw {
    io: RawStream,
    /// A fault record for the checked kernels, as the runtime binds one.
    record: sys::CUdeviceptr,
    arch: &'static str,
}

impl Raw {
    fn new(ctx: &CudaContext) -> Self {
        let io = RawStream::new();
        // SAFETY: a plain device allocation, zeroed below and never freed.
        let record = check("cuMemAlloc", unsafe {
            result::malloc_sync(FaultRecord::BYTES)
        });
        // SAFETY: `record` holds `FaultRecord::BYTES` bytes.
        check("memset", unsafe {
            result::memset_d8_sync(record, 0, FaultRecord::BYTES)
        });
        let (major, minor) = ctx.compute_capability();
        Self {
            io,
            record,
            arch: Box::leak(format!("sm_{major}{minor}").into_boxed_str()),
        }
    }

    /// The runtime's checked lowering of `def`, compiled and loaded straight through NVRTC.
    fn function(&self, def: &KernelDef) -> sys::CUfunction {
        let options = NvrtcOptions {
            arch: Some(self.arch),
            fmad: Some(false),
            ..NvrtcOptions::default()
        };
        let ptx = compile_ptx_with_opts(lower::program(def, true), options)
            .unwrap_or_else(|e| panic!("NVRTC: {e:?}"));
        let ptx = CString::new(ptx.to_src()).expect("PTX has no NUL");
        // SAFETY: a NUL-terminated PTX image; the module is never unloaded.
        let module = check("cuModuleLoadData", unsafe {
            result::module::load_data(ptx.as_ptr().cast())
        });
        let entry = CString::new(lower::ENTRY).expect("no NUL");
        // SAFETY: the module was just loaded.
        check("cuModuleGetFunction", unsafe {
            result::module::get_function(module, entry)
        })
    }

    fn launch(&self, function: sys::CUfunction, block: u32, params: &mut [u64]) {
        let mut args: Vec<*mut c_void> =
            params.iter_mut().map(|p| (p as *mut u64).cast()).collect();
        // SAFETY: one slot per parameter of the lowered entry point, in order.
        check("cuLaunchKernel", unsafe {
            result::launch_kernel(
                function,
                (1, 1, 1),
                (block, 1, 1),
                0,
                self.io.raw(),
                &mut args,
            )
        });
    }
}

/// Launches per second of `launch`, called `LAUNCHES` times, then `finish`.
fn rate(mut launch: impl FnMut(), finish: impl FnOnce()) -> f64 {
    let start = Instant::now();
    (0..LAUNCHES).for_each(|_| launch());
    finish();
    f64::from(LAUNCHES) / start.elapsed().as_secs_f64()
}

/// Launch rates through the client, straight on a `CudaDevice` (without client, actor and
/// server: what the device itself adds), and raw. The three alternate over several rounds and
/// the best round of each counts, so a slow moment of the machine does not decide a ratio.
fn launches(ctx: &CudaContext, client: &ComputeClient<CudaDevice>, raw: &Raw) -> [Row; 2] {
    let kernel = empty_kernel();
    let client_launch = || {
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), KernelArguments::new())
            .expect("launch")
    };

    let mut device = CudaDevice::with_context(ctx);
    let stream = device.create_stream().expect("stream");
    let options = CompileOptions::checked(0);
    let compiled = device
        .compile(empty_kernel().def(), options)
        .expect("compile");
    let record = zeroed_fault_record(&mut device, stream);

    let function = raw.function(empty_kernel().def());
    // (ls_fault, ls_kernel, ls_count): what the runtime passes in checked mode.
    let mut params = [raw.record, 0, 0];

    let mut best = [0f64; 3];
    for _ in 0..LAUNCH_ROUNDS {
        let through_client = rate(client_launch, || client.sync().expect("sync"));
        let start = Instant::now();
        for _ in 0..LAUNCHES {
            let bindings = [BufferSlice {
                buffer: &record,
                offset: 0,
                len: FaultRecord::BYTES as u64,
            }];
            device
                .launch(
                    stream,
                    &compiled,
                    LaunchCount::Static([1, 1, 1]),
                    &bindings,
                    &[],
                )
                .expect("launch");
        }
        device.synchronize(stream).expect("synchronize");
        let straight = f64::from(LAUNCHES) / start.elapsed().as_secs_f64();
        let raw_rate = rate(|| raw.launch(function, 1, &mut params), || raw.io.sync());
        for (b, r) in best.iter_mut().zip([through_client, straight, raw_rate]) {
            *b = b.max(r);
        }
    }
    device.free(record);
    [
        Row {
            figure: "(a) launches of an empty kernel",
            key: Some("launches"),
            runtime: best[0],
            raw: best[2],
            unit: "launches/s",
            higher_is_better: true,
        },
        Row {
            figure: "(a) same, straight on CudaDevice (no runtime)",
            key: None,
            runtime: best[1],
            raw: best[2],
            unit: "launches/s",
            higher_is_better: true,
        },
    ]
}

fn copies(client: &ComputeClient<CudaDevice>, raw: &Raw) -> [Row; 3] {
    let gb = |seconds: f64| COPY_BYTES as f64 / seconds / 1e9;
    let data: Vec<u8> = (0..COPY_BYTES).map(|i| (i % 251) as u8).collect();
    let handle = client.empty(COPY_BYTES).expect("empty");
    let mut writes = Vec::new();
    let mut staged_writes = Vec::new();
    let mut reads = Vec::new();
    for rep in 0..=COPY_REPS {
        let bytes = Bytes::from(data.clone());
        let start = Instant::now();
        client.write(&handle, bytes).expect("write");
        client.sync().expect("sync");
        let write = start.elapsed().as_secs_f64();
        let mut staged = Bytes::from(data.clone());
        client
            .staging(std::iter::once(&mut staged), false)
            .expect("staging");
        let start = Instant::now();
        client.write(&handle, staged).expect("write");
        client.sync().expect("sync");
        let staged_write = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let back = client.read_one(handle.clone()).expect("read");
        let read = start.elapsed().as_secs_f64();
        assert!(back[..] == data[..], "read back what was written");
        // The first repetition pins the pooled blocks; it is not measured.
        if rep > 0 {
            writes.push(gb(write));
            staged_writes.push(gb(staged_write));
            reads.push(gb(read));
        }
    }

    let pinned = pinned_copies(&raw.io, COPY_BYTES, COPY_REPS);
    let raw_write = pinned.write_gbs;
    [
        Row {
            figure: "(b) write 256 MiB from a Vec (median)",
            key: Some("write_vec"),
            runtime: median(writes),
            raw: raw_write,
            unit: "GB/s",
            higher_is_better: true,
        },
        Row {
            figure: "(b) write 256 MiB from staging bytes",
            key: None,
            runtime: median(staged_writes),
            raw: raw_write,
            unit: "GB/s",
            higher_is_better: true,
        },
        Row {
            figure: "(b) read 256 MiB (median)",
            key: Some("read"),
            runtime: median(reads),
            raw: pinned.read_gbs,
            unit: "GB/s",
            higher_is_better: true,
        },
    ]
}

/// The same transfers straight on a `CudaDevice`: staging without the runtime, from a source
/// that stays alive (the runtime frees a written `Bytes` after the write), each read into a
/// pooled pinned block.
fn device_copies(ctx: &CudaContext, raw: &[Row; 3]) -> [Row; 2] {
    let gb = |seconds: f64| COPY_BYTES as f64 / seconds / 1e9;
    let mut device = CudaDevice::with_context(ctx);
    let stream = device.create_stream().expect("stream");
    let buffer = device.allocate(COPY_BYTES as u64).expect("allocate");
    let data: Vec<u8> = (0..COPY_BYTES).map(|i| (i % 253) as u8).collect();
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for rep in 0..=COPY_REPS {
        let start = Instant::now();
        device.write(stream, &buffer, 0, &data).expect("write");
        device.synchronize(stream).expect("synchronize");
        let write = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let read = device
            .read(stream, &buffer, 0, COPY_BYTES as u64)
            .expect("read");
        let back = device.wait_read(read).expect("wait_read");
        let read = start.elapsed().as_secs_f64();
        assert!(*back == *data, "read back what was written");
        if rep > 0 {
            writes.push(gb(write));
            reads.push(gb(read));
        }
    }
    device.free(buffer);
    [
        Row {
            figure: "(b) write 256 MiB straight on CudaDevice",
            key: None,
            runtime: median(writes),
            raw: raw[0].raw,
            unit: "GB/s",
            higher_is_better: true,
        },
        Row {
            figure: "(b) read 256 MiB straight on CudaDevice",
            key: None,
            runtime: median(reads),
            raw: raw[2].raw,
            unit: "GB/s",
            higher_is_better: true,
        },
    ]
}

/// Writes of 256 MiB from a `Vec` straight on a `CudaDevice`, for every chunk size and thread
/// count of [`WRITE_SWEEP`], in GB/s (median of a few), beside raw pinned: what to set
/// `WriteStaging::default` to on this machine. Beside each, the host side alone: the same
/// threads (spawned per write, as the device does) copying the same chunks into pinned memory
/// with no transfer, so a shortfall shows whether the host copy or the overlap is the bound.
fn write_sweep(ctx: &CudaContext, raw_write: f64) {
    let data: Vec<u8> = (0..COPY_BYTES).map(|i| (i % 241) as u8).collect();
    // SAFETY: a pinned host allocation of COPY_BYTES, zeroed here, freed at the end of the
    // function; nothing else references it.
    let pinned = unsafe {
        let ptr = check("cuMemHostAlloc", result::malloc_host(COPY_BYTES, 0)).cast::<u8>();
        std::ptr::write_bytes(ptr, 0, COPY_BYTES);
        std::slice::from_raw_parts_mut(ptr, COPY_BYTES)
    };
    println!(
        "\nwrite staging sweep, 256 MiB from a Vec straight on CudaDevice (raw pinned {raw_write:.1} GB/s):"
    );
    println!(
        "{:>10} {:>8} {:>8} {:>7} {:>15}",
        "chunk", "threads", "GB/s", "vs raw", "host copy GB/s"
    );
    for (chunk_mib, threads_max) in WRITE_SWEEP {
        let staging = WriteStaging {
            chunk_bytes: chunk_mib << 20,
            threads_max,
        };
        let mut device = CudaDevice::with_context(ctx).with_write_staging(staging);
        let stream = device.create_stream().expect("stream");
        let buffer = device.allocate(COPY_BYTES as u64).expect("allocate");
        let rate = median_rate(|| {
            device.write(stream, &buffer, 0, &data).expect("write");
            device.synchronize(stream).expect("synchronize");
        });
        device.free(buffer);
        let host = median_rate(|| host_copy(pinned, &data, chunk_mib << 20, threads_max));
        println!(
            "{:>7} MiB {threads_max:>8} {rate:>8.1} {:>7.2} {host:>15.1}",
            chunk_mib,
            rate / raw_write
        );
    }
    // SAFETY: allocated above by `cuMemHostAlloc`; no copy uses it.
    check("cuMemFreeHost", unsafe {
        result::free_host(pinned.as_mut_ptr().cast())
    });
}

/// GB/s of `COPY_BYTES` moved by `round`, the median of `SWEEP_REPS` after one warm-up.
fn median_rate(mut round: impl FnMut()) -> f64 {
    let samples = (0..=SWEEP_REPS)
        .map(|_| {
            let start = Instant::now();
            round();
            COPY_BYTES as f64 / start.elapsed().as_secs_f64() / 1e9
        })
        .skip(1)
        .collect();
    median(samples)
}

/// Copies `data` into `pinned` in chunks of `chunk` bytes, chunk `i` on thread `i % threads`
/// (at most the machine's cores), as write staging shares them out.
fn host_copy(pinned: &mut [u8], data: &[u8], chunk: usize, threads_max: usize) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads_max.min(cores).max(1);
    let mut shares: Vec<Vec<(&mut [u8], &[u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, pair) in pinned.chunks_mut(chunk).zip(data.chunks(chunk)).enumerate() {
        shares[i % threads].push(pair);
    }
    std::thread::scope(|scope| {
        let mut shares = shares.into_iter();
        let own = shares.next().expect("at least one thread");
        for share in shares {
            scope.spawn(move || {
                share
                    .into_iter()
                    .for_each(|(to, from)| to.copy_from_slice(from))
            });
        }
        own.into_iter()
            .for_each(|(to, from)| to.copy_from_slice(from));
    });
}

fn allocations(client: &ComputeClient<CudaDevice>, raw: &Raw) -> [Row; 2] {
    let us = |start: Instant| start.elapsed().as_secs_f64() * 1e6 / f64::from(ALLOC_REPS);
    let runtime = empty_and_drop_us(client, ALLOC_BYTES, ALLOC_REPS);

    let start = Instant::now();
    for _ in 0..ALLOC_REPS {
        // SAFETY: allocated and freed at once; nothing uses it.
        unsafe {
            let ptr = check("cuMemAlloc", result::malloc_sync(ALLOC_BYTES));
            check("cuMemFree", result::free_sync(ptr));
        }
    }
    let raw_sync = us(start);

    let start = Instant::now();
    for _ in 0..ALLOC_REPS {
        // SAFETY: stream-ordered allocation and free on the same stream; nothing uses it.
        unsafe {
            let ptr = check(
                "cuMemAllocAsync",
                result::malloc_async(raw.io.raw(), ALLOC_BYTES),
            );
            check("cuMemFreeAsync", result::free_async(ptr, raw.io.raw()));
        }
    }
    raw.io.sync();
    let raw_async = us(start);
    [
        Row {
            figure: "(c) empty(1 MiB)+drop vs cuMemAlloc+cuMemFree",
            key: None,
            runtime,
            raw: raw_sync,
            unit: "us",
            higher_is_better: false,
        },
        Row {
            figure: "(c) empty(1 MiB)+drop vs cuMemAllocAsync+Free",
            key: Some("empty_1mib_drop"),
            runtime,
            raw: raw_async,
            unit: "us",
            higher_is_better: false,
        },
    ]
}

/// (e): the median of single blocking calls that do no device work, against the median of
/// single `cuStreamQuery`s of the bench's idle stream.
fn blocking_round_trip(client: &ComputeClient<CudaDevice>, raw: &Raw) -> Row {
    let runtime = median_us(ROUND_TRIPS, || {
        client.memory_usage().expect("memory_usage");
    });
    raw.io.sync();
    let raw_us = median_us(ROUND_TRIPS, || {
        // SAFETY: a live stream (`RawStream`'s invariant); a query only reads its state.
        check("cuStreamQuery", unsafe {
            sys::cuStreamQuery(raw.io.raw()).result()
        });
    });
    Row {
        figure: "(e) memory_usage round trip (median) vs cuStreamQuery",
        key: None,
        runtime,
        raw: raw_us,
        unit: "us",
        higher_is_better: false,
    }
}

fn round_trips(ctx: &CudaContext, client: &ComputeClient<CudaDevice>, raw: &Raw) -> [Row; 2] {
    let (runtime, [create, launch, read]) = client_round_trip_us(client, ROUND_TRIPS);
    println!("(d) breakdown: create {create:.1} us, launch {launch:.1} us, read {read:.1} us");
    let straight = straight_round_trip_us(&mut CudaDevice::with_context(ctx), ROUND_TRIPS);

    let function = raw.function(increment_kernel().def());
    // SAFETY: four bytes of pinned memory for the result, never freed.
    let pinned = check("cuMemHostAlloc", unsafe { result::malloc_host(4, 0) });
    let once_raw = |i: u32| {
        // SAFETY: a 4-byte allocation written, incremented, read back and freed after the
        // stream is idle; `pinned` holds 4 bytes.
        unsafe {
            let ptr = check("cuMemAlloc", result::malloc_sync(4));
            check(
                "cuMemcpyHtoDAsync",
                result::memcpy_htod_async(ptr, &[i], raw.io.raw()),
            );
            let mut params = [ptr, 1, raw.record, 0, 0];
            raw.launch(function, 32, &mut params);
            check("cuMemcpyDtoHAsync", {
                sys::cuMemcpyDtoHAsync_v2(pinned, ptr, 4, raw.io.raw()).result()
            });
            raw.io.sync();
            assert_eq!(*pinned.cast::<u32>(), i + 1);
            check("cuMemFree", result::free_sync(ptr));
        }
    };
    (0..100).for_each(once_raw);
    let start = Instant::now();
    (0..ROUND_TRIPS).for_each(once_raw);
    let raw_us = start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS);
    [
        Row {
            figure: "(d) 4-byte create -> launch -> read",
            key: Some("round_trip_4b"),
            runtime,
            raw: raw_us,
            unit: "us",
            higher_is_better: false,
        },
        Row {
            figure: "(d) same, straight on CudaDevice (no runtime)",
            key: None,
            runtime: straight,
            raw: raw_us,
            unit: "us",
            higher_is_better: false,
        },
    ]
}

fn main() {
    let ctx = match CudaContext::new(0) {
        Ok(ctx) => ctx,
        Err(err) => {
            let reason = match err {
                DeviceError::Unavailable { reason } => reason,
                other => other.to_string(),
            };
            cannot_run(Need::CudaGpu, "runtime_vs_raw", &reason);
            return;
        }
    };
    let client = ComputeClient::new(CudaDevice::with_context(&ctx));
    println!(
        "device: {} — {}",
        client.properties().name,
        client.properties().backend
    );
    let raw = Raw::new(&ctx);
    let mut rows = Vec::from(launches(&ctx, &client, &raw));
    let copy_rows = copies(&client, &raw);
    let device_rows = device_copies(&ctx, &copy_rows);
    write_sweep(&ctx, copy_rows[0].raw);
    rows.extend(copy_rows);
    rows.extend(device_rows);
    rows.extend(allocations(&client, &raw));
    rows.extend(round_trips(&ctx, &client, &raw));
    rows.push(blocking_round_trip(&client, &raw));

    println!(
        "\n{:<48} {:>12} {:>12} {:>11}  vs raw",
        "figure", "runtime", "raw", "unit"
    );
    for row in &rows {
        println!(
            "{:<48} {:>12.2} {:>12.2} {:>11}  {:.2}",
            row.figure,
            row.runtime,
            row.raw,
            row.unit,
            row.speed_vs_raw()
        );
    }
    // For scripts/gpu/peers_table.py: the figures cubecl and PyTorch are measured on too.
    for row in &rows {
        if let Some(key) = row.key {
            println!("FIGURE\t{key}\tlockstep-cuda\t{}", row.runtime);
            println!("FIGURE\t{key}\traw-cuda\t{}", row.raw);
        }
    }
}
