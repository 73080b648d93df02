//! The host's price of one NCCL group on a nonblocking rank, what every collective of
//! `CudaDevice` is (its ranks are nonblocking so that a peer that never arrives times out
//! instead of hanging), beside a blocking rank, what raw NCCL and PyTorch use. One GPU is
//! enough: a communicator of one, each group a self send and receive of 4 bytes, timed until
//! its enqueue finished (`ncclInProgress` polled by yielding, as the device does). NCCL 2.28
//! runs each nonblocking group on a thread of its own.
//!
//! Run: `cargo bench -p lockstep-cuda --bench nccl_groups` on a machine with a GPU and
//! `libnccl.so.2` on the library path; otherwise it prints `SKIPPED: ...` and exits 0, or fails
//! under `LOCKSTEP_REQUIRE_GPU=1`. Each figure is the median of `ROUNDS` rounds of `GROUPS`.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext as RawContext, CudaSlice, CudaStream, DevicePtr};
use cudarc::nccl::sys as nccl;
use lockstep::ComputeClient;
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_cuda::CudaDevice;

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

/// Polls a nonblocking rank until NCCL finished what it was doing.
fn settle(comm: nccl::ncclComm_t) {
    loop {
        let mut state = nccl::ncclResult_t::ncclSuccess;
        // SAFETY: `comm` is live; the call writes its state into `state`.
        ok("ncclCommGetAsyncError", unsafe {
            nccl::ncclCommGetAsyncError(comm, &raw mut state)
        });
        match state {
            nccl::ncclResult_t::ncclInProgress => std::thread::yield_now(),
            done => return ok("the rank's state", done),
        }
    }
}

/// A communicator of one rank on the current GPU, blocking or not.
fn rank(blocking: bool) -> nccl::ncclComm_t {
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
    let comm = unsafe { comm.assume_init() };
    settle(comm);
    comm
}

/// Microseconds of one group on `comm` (the median round), each group's enqueue finished
/// before the next starts.
fn group_us(
    comm: nccl::ncclComm_t,
    stream: &Arc<CudaStream>,
    src: &CudaSlice<u8>,
    dst: &CudaSlice<u8>,
) -> f64 {
    let raw = stream.cu_stream() as nccl::cudaStream_t;
    let (src_ptr, _src_use) = src.device_ptr(stream);
    let (dst_ptr, _dst_use) = dst.device_ptr(stream);
    let group = || {
        // SAFETY: both buffers hold `BYTES` bytes of this GPU and outlive the stream's work
        // (synchronised below); `comm` is live and used by this thread alone.
        let result = unsafe {
            ok("ncclGroupStart", nccl::ncclGroupStart());
            let u8 = nccl::ncclDataType_t::ncclUint8;
            ok(
                "ncclSend",
                nccl::ncclSend(src_ptr as *const c_void, BYTES, u8, 0, comm, raw),
            );
            ok(
                "ncclRecv",
                nccl::ncclRecv(dst_ptr as *mut c_void, BYTES, u8, 0, comm, raw),
            );
            nccl::ncclGroupEnd()
        };
        if result == nccl::ncclResult_t::ncclInProgress {
            settle(comm);
        } else {
            ok("ncclGroupEnd", result);
        }
    };
    (0..100).for_each(|_| group());
    stream.synchronize().expect("synchronize");
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            (0..GROUPS).for_each(|_| group());
            let us = started.elapsed().as_secs_f64() * 1e6 / GROUPS as f64;
            stream.synchronize().expect("synchronize");
            us
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
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
    let stream = RawContext::new(0)
        .expect("context")
        .new_stream()
        .expect("stream");
    let src = stream.alloc_zeros::<u8>(BYTES).expect("alloc");
    let dst = stream.alloc_zeros::<u8>(BYTES).expect("alloc");
    println!(
        "NCCL {version} on {}: one group (a self send/receive of {BYTES} bytes), host us, median of {ROUNDS} x {GROUPS}",
        client.properties().name
    );
    let mut figures = [0.0; 2];
    for (figure, blocking) in figures.iter_mut().zip([true, false]) {
        let comm = rank(blocking);
        *figure = group_us(comm, &stream, &src, &dst);
        // SAFETY: the rank is live, its work synchronised, and not used after.
        ok("ncclCommDestroy", unsafe { nccl::ncclCommDestroy(comm) });
    }
    let [blocking, nonblocking] = figures;
    println!("blocking rank     {blocking:8.1} us a group");
    println!(
        "nonblocking rank  {nonblocking:8.1} us a group ({:.1}x)",
        nonblocking / blocking
    );
}
