//! The host's price of one NCCL group on a nonblocking rank, what every collective of
//! `CudaDevice` is (its ranks are nonblocking so that a peer that never arrives times out
//! instead of hanging), beside a blocking rank, what raw NCCL and PyTorch use. One GPU is
//! enough: a communicator of one, each group a self send and receive of 4 bytes, timed until
//! its enqueue finished (`ncclInProgress` polled by yielding, as the device does). NCCL 2.28
//! runs each nonblocking group on a thread of its own. Then, in each stream-capture mode, the
//! group is captured once on a fresh nonblocking rank into a CUDA graph (the line gives what
//! that capture and its instantiation took, once) and replayed (`cuGraphLaunch`), after
//! checking that two replays each copy the bytes the source then holds, or the line says why it
//! could not be. The slices are cudarc's without its events between streams, which the group's
//! pointers would wait on and record inside the capture: with them (NCCL 2.28.9, an H200), the
//! relaxed capture's group ended in `ncclUnhandledCudaError` and the next mode's first write
//! failed (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`); without them every mode captures and replays.
//!
//! Run: `cargo bench -p lockstep-cuda --bench nccl_groups` on a machine with a GPU and
//! `libnccl.so.2` on the library path; otherwise it prints `SKIPPED: ...` and exits 0, or fails
//! under `LOCKSTEP_REQUIRE_GPU=1`. Each figure is the median of `ROUNDS` rounds of `GROUPS`.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext as RawContext, CudaSlice, CudaStream, DevicePtr, result, sys};
use cudarc::nccl::sys as nccl;
use lockstep::ComputeClient;
use lockstep_cuda::CudaDevice;
use lockstep_harness::requirement::{Need, cannot_run};

const GROUPS: usize = 5_000;
const ROUNDS: usize = 5;
const BYTES: usize = 4;

/// `ncclConfig_t` as of NCCL 2.17, the layout `CudaDevice` passes too: later versions read
/// its `size` and keep their defaults for the fields it lacks.
#[repr(C)]
struct Config {
    size: usize,
    magic: c_uint,
    version: c_uint,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
}

/// `NCCL_CONFIG_UNDEF_INT`: NCCL's default.
const UNDEF: c_int = c_int::MIN;

fn ok(call: &str, result: nccl::ncclResult_t) {
    assert_eq!(result, nccl::ncclResult_t::ncclSuccess, "{call}");
}

/// A communicator rank. **Invariant:** live from [`rank`] (the only maker: the field is
/// private) until [`destroy`] or [`abort`] takes it, and used by the thread that made it alone
/// (a raw pointer inside, so neither `Send` nor `Sync`).
struct Rank(nccl::ncclComm_t);

/// Polls a nonblocking rank until NCCL finished what it was doing: its final state.
fn settle(comm: &Rank) -> nccl::ncclResult_t {
    loop {
        let mut state = nccl::ncclResult_t::ncclSuccess;
        // SAFETY: a live rank of this thread (`Rank`'s invariant); the call writes its state
        // into `state`.
        ok("ncclCommGetAsyncError", unsafe {
            nccl::ncclCommGetAsyncError(comm.0, &raw mut state)
        });
        match state {
            nccl::ncclResult_t::ncclInProgress => std::thread::yield_now(),
            done => return done,
        }
    }
}

/// A communicator of one rank on the current GPU, blocking or not.
fn rank(blocking: bool) -> Rank {
    let mut id = MaybeUninit::uninit();
    // SAFETY: writes the id on success.
    ok("ncclGetUniqueId", unsafe {
        nccl::ncclGetUniqueId(id.as_mut_ptr())
    });
    let mut config = Config {
        size: size_of::<Config>(),
        magic: 0xcafe_beef,
        version: 2_17_00,
        blocking: c_int::from(blocking),
        cga_cluster_size: UNDEF,
        min_ctas: UNDEF,
        max_ctas: UNDEF,
        net_name: std::ptr::null(),
    };
    let mut comm = MaybeUninit::uninit();
    // SAFETY: the id was made above; `config` is a 2.17 configuration whose `size` tells NCCL
    // its layout; the call writes the rank into `comm` unless it fails.
    let result = unsafe {
        nccl::ncclCommInitRankConfig(
            comm.as_mut_ptr(),
            1,
            id.assume_init(),
            0,
            (&raw mut config).cast(),
        )
    };
    if result != nccl::ncclResult_t::ncclInProgress {
        ok("ncclCommInitRankConfig", result);
    }
    // SAFETY: written by the call above, which did not fail.
    let comm = Rank(unsafe { comm.assume_init() });
    ok("the rank's state", settle(&comm));
    comm
}

/// One group on `comm` and `stream`: a self send of `src` into `dst`, its enqueue finished;
/// how it ended.
fn group(
    comm: &Rank,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<u8>,
    dst: &CudaSlice<u8>,
) -> nccl::ncclResult_t {
    let raw = stream.cu_stream() as nccl::cudaStream_t;
    let (src_ptr, _src_use) = src.device_ptr(stream);
    let (dst_ptr, _dst_use) = dst.device_ptr(stream);
    // SAFETY: both buffers hold `BYTES` bytes of this GPU, and `main` keeps them until it
    // returns, after `median_us` synchronised `stream` (or `replays_copy` read `dst` back);
    // `comm` is live and used by this thread alone (`Rank`'s invariant).
    let result = unsafe {
        ok("ncclGroupStart", nccl::ncclGroupStart());
        let u8 = nccl::ncclDataType_t::ncclUint8;
        ok(
            "ncclSend",
            nccl::ncclSend(src_ptr as *const c_void, BYTES, u8, 0, comm.0, raw),
        );
        ok(
            "ncclRecv",
            nccl::ncclRecv(dst_ptr as *mut c_void, BYTES, u8, 0, comm.0, raw),
        );
        nccl::ncclGroupEnd()
    };
    match result {
        nccl::ncclResult_t::ncclInProgress => settle(comm),
        done => done,
    }
}

/// One group that must succeed.
fn good_group(comm: &Rank, stream: &Arc<CudaStream>, src: &CudaSlice<u8>, dst: &CudaSlice<u8>) {
    ok("the group", group(comm, stream, src, dst));
}

/// Microseconds of one `op` (the median round of `GROUPS`), after 100 to warm up.
fn median_us(stream: &Arc<CudaStream>, op: impl Fn()) -> f64 {
    (0..100).for_each(|_| op());
    stream.synchronize().expect("synchronize");
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            (0..GROUPS).for_each(|_| op());
            let us = started.elapsed().as_secs_f64() * 1e6 / GROUPS as f64;
            stream.synchronize().expect("synchronize");
            us
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

/// A captured graph and its instantiation.
struct Captured {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Drop for Captured {
    fn drop(&mut self) {
        // SAFETY: `capture` made both handles, and they are destroyed once, here. A replay
        // still in flight is no matter: CUDA frees a running executable graph once that
        // launch completes.
        unsafe {
            let _ = result::graph::exec_destroy(self.exec);
            let _ = result::graph::destroy(self.graph);
        }
    }
}

/// The group on `comm` captured in `mode` into an instantiated graph, or why it could not be.
fn capture(
    comm: &Rank,
    stream: &Arc<CudaStream>,
    (src, dst): (&CudaSlice<u8>, &CudaSlice<u8>),
    mode: sys::CUstreamCaptureMode,
) -> Result<Captured, String> {
    let raw = stream.cu_stream();
    // SAFETY: `stream` is a live cudarc stream of the current context, and not capturing:
    // each capture below ends before this function returns.
    unsafe { result::stream::begin_capture(raw, mode) }.map_err(|e| format!("{e:?}"))?;
    let grouped = group(comm, stream, src, dst);
    // Ended whatever the group did, so the stream leaves capture.
    // SAFETY: `raw` is capturing (`begin_capture` above succeeded).
    let graph = unsafe { result::stream::end_capture(raw) }.map_err(|e| format!("{e:?}"));
    if grouped != nccl::ncclResult_t::ncclSuccess {
        if let Ok(graph) = graph {
            // SAFETY: `graph` is referenced nowhere else.
            let _ = unsafe { result::graph::destroy(graph) };
        }
        return Err(format!("the group ended in {grouped:?}"));
    }
    let graph = graph?;
    // SAFETY: `graph` was just returned by `end_capture`, in the current context.
    match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
        Ok(exec) => Ok(Captured { graph, exec }),
        Err(e) => {
            // SAFETY: `graph` is referenced nowhere else.
            let _ = unsafe { result::graph::destroy(graph) };
            Err(format!("{e:?}"))
        }
    }
}

/// Replays `captured` on `stream`.
fn replay(captured: &Captured, stream: &Arc<CudaStream>) -> Result<(), String> {
    // SAFETY: `captured.exec` is live until `Captured` drops; the graph's buffers are `src`
    // and `dst`, which `main` keeps until it returns; `stream` is a live stream of its context.
    unsafe { result::graph::launch(captured.exec, stream.cu_stream()) }
        .map_err(|e| format!("cuGraphLaunch: {e:?}"))
}

/// Whether two replays of `captured` each copy what `src` then holds into `dst`.
fn replays_copy(
    captured: &Captured,
    stream: &Arc<CudaStream>,
    src: &mut CudaSlice<u8>,
    dst: &CudaSlice<u8>,
) -> Result<bool, String> {
    for bytes in [[1u8, 2, 3, 4], [5, 6, 7, 8]] {
        stream.memcpy_htod(&bytes, src).expect("write");
        replay(captured, stream)?;
        if stream.clone_dtoh(dst).expect("read") != bytes {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The price of a replay of the group captured in `mode` on a fresh nonblocking rank, beside the
/// group's, `group_us`, as a line.
fn graph_figure(
    stream: &Arc<CudaStream>,
    src: &mut CudaSlice<u8>,
    dst: &CudaSlice<u8>,
    mode: sys::CUstreamCaptureMode,
    group_us: f64,
) -> String {
    let comm = rank(false);
    let started = Instant::now();
    let captured = capture(&comm, stream, (src, dst), mode);
    let capture_us = started.elapsed().as_secs_f64() * 1e6;
    let line = match captured {
        Err(reason) => format!("capture failed: {reason}"),
        Ok(captured) => match replays_copy(&captured, stream, src, dst) {
            Ok(true) => {
                let us = median_us(stream, || {
                    replay(&captured, stream).expect("replayed before")
                });
                format!(
                    "{us:8.1} us a group ({:.1}x less), captured and instantiated in {capture_us:.0} us",
                    group_us / us
                )
            }
            Ok(false) => "WRONG: a replay did not copy the source's bytes".to_owned(),
            Err(reason) => format!("failed: {reason}"),
        },
    };
    // A rank whose captured group failed is left in error: aborted, not destroyed.
    abort(comm);
    let mode = format!("{mode:?}")
        .replace("CU_STREAM_CAPTURE_MODE_", "")
        .to_lowercase();
    format!("graph replay ({mode:>12}) {line}")
}

/// Destroys `comm`, its work synchronised.
fn destroy(comm: Rank) {
    // SAFETY: a live rank (`Rank`'s invariant), taken by value: destroyed once, used by nothing
    // after.
    ok("ncclCommDestroy", unsafe { nccl::ncclCommDestroy(comm.0) });
}

/// Aborts `comm`, which ends its kernels whatever state it is in.
fn abort(comm: Rank) {
    // SAFETY: as in `destroy`; its graph, if any, was dropped before (`graph_figure`).
    let _ = unsafe { nccl::ncclCommAbort(comm.0) };
}

fn main() {
    let device = match CudaDevice::new(0) {
        Ok(device) => device,
        Err(err) => return cannot_run(Need::CudaGpu, "nccl_groups", &err.to_string()),
    };
    let client = ComputeClient::new(device);
    if !client.supports_collectives() {
        let reason = "libnccl could not be loaded (set LD_LIBRARY_PATH to its directory)";
        return cannot_run(Need::Nccl, "nccl_groups", reason);
    }
    let mut version = 0;
    // SAFETY: writes the version.
    ok("ncclGetVersion", unsafe {
        nccl::ncclGetVersion(&raw mut version)
    });
    let context = RawContext::new(0).expect("context");
    // Every slice is used on `stream` alone, so cudarc's events between streams are not
    // needed; and a capture must not record them: a slice's use recorded inside a capture
    // fails its next use outside (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`).
    // SAFETY: one stream, below, uses every slice made after this call.
    unsafe { context.disable_event_tracking() };
    let stream = context.new_stream().expect("stream");
    let mut src = stream.alloc_zeros::<u8>(BYTES).expect("alloc");
    let dst = stream.alloc_zeros::<u8>(BYTES).expect("alloc");
    println!(
        "NCCL {version} on {}: one group (a self send/receive of {BYTES} bytes), host us, median of {ROUNDS} x {GROUPS}",
        client.properties().name
    );
    let comm = rank(true);
    let blocking = median_us(&stream, || good_group(&comm, &stream, &src, &dst));
    destroy(comm);
    println!("blocking rank     {blocking:8.1} us a group");
    let comm = rank(false);
    let nonblocking = median_us(&stream, || good_group(&comm, &stream, &src, &dst));
    destroy(comm);
    println!(
        "nonblocking rank  {nonblocking:8.1} us a group ({:.1}x)",
        nonblocking / blocking
    );
    use sys::CUstreamCaptureMode as Mode;
    for mode in [
        Mode::CU_STREAM_CAPTURE_MODE_RELAXED,
        Mode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        Mode::CU_STREAM_CAPTURE_MODE_GLOBAL,
    ] {
        println!(
            "{}",
            graph_figure(&stream, &mut src, &dst, mode, nonblocking)
        );
    }
}
