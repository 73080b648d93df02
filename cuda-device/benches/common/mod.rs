//! What the CUDA benchmarks measure the runtime against: raw driver calls (cudarc) on the same
//! GPU, in the same process.

use std::time::Instant;

use cudarc::driver::result;
use cudarc::driver::sys;
pub use lockstep_harness::blocking_path::median;

/// The value, or a panic naming the driver call that failed.
pub fn check<T>(what: &str, result: Result<T, result::DriverError>) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// GPU 0's primary context, current on this thread, and a stream of the bench's own.
/// **Invariant:** `stream` is live for the rest of the process: made by [`RawStream::new`]
/// (the field is private), in a context retained for good, and never destroyed.
pub struct RawStream {
    stream: sys::CUstream,
}

impl RawStream {
    pub fn new() -> Self {
        check("cuInit", result::init());
        let device = check("cuDeviceGet", result::device::get(0));
        // SAFETY: `device` came from `cuDeviceGet`; the retain lives as long as the bench.
        let raw_ctx = check("retain", unsafe { result::primary_ctx::retain(device) });
        // SAFETY: the context was just retained.
        check("set_current", unsafe { result::ctx::set_current(raw_ctx) });
        let stream = check(
            "cuStreamCreate",
            result::stream::create(result::stream::StreamKind::NonBlocking),
        );
        Self { stream }
    }

    /// The raw stream, for driver calls of the bench's own.
    pub fn raw(&self) -> sys::CUstream {
        self.stream
    }

    pub fn sync(&self) {
        // SAFETY: a live stream (the type's invariant) of the context `new` made current.
        check("cuStreamSynchronize", unsafe {
            result::stream::synchronize(self.stream)
        });
    }
}

/// Raw pinned transfers, the medians in GB/s.
pub struct PinnedCopies {
    pub write_gbs: f64,
    pub read_gbs: f64,
}

/// `bytes` each way between a device allocation and pinned host memory (`cuMemHostAlloc`), one
/// `cuMemcpy*Async` and a stream sync each, `reps` times after one warm-up.
pub fn pinned_copies(raw: &RawStream, bytes: usize, reps: usize) -> PinnedCopies {
    let gb = |start: Instant| bytes as f64 / start.elapsed().as_secs_f64() / 1e9;
    // SAFETY: a plain device allocation and a pinned host allocation of `bytes` each, freed
    // below after the stream is idle.
    let (device, pinned) = unsafe {
        (
            check("cuMemAlloc", result::malloc_sync(bytes)),
            check("cuMemHostAlloc", result::malloc_host(bytes, 0)),
        )
    };
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for rep in 0..=reps {
        let start = Instant::now();
        // SAFETY: both allocations hold `bytes`, and each copy completes (`sync`) before the
        // next one or the frees below; the stream is live (`RawStream`'s invariant).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(device, pinned, bytes, raw.raw()).result()
        });
        raw.sync();
        let write = gb(start);
        let start = Instant::now();
        // SAFETY: as above.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(pinned, device, bytes, raw.raw()).result()
        });
        raw.sync();
        if rep > 0 {
            writes.push(write);
            reads.push(gb(start));
        }
    }
    // SAFETY: the stream is idle; each allocation is freed once.
    unsafe {
        check("cuMemFree", result::free_sync(device));
        check("cuMemFreeHost", result::free_host(pinned));
    }
    PinnedCopies {
        write_gbs: median(writes),
        read_gbs: median(reads),
    }
}
