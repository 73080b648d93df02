//! Collectives on two GPUs: `all_reduce` through `ComputeClient` beside raw NCCL (cudarc's
//! `nccl` module, one communicator per GPU from `ncclCommInitAll`, one thread in a group call)
//! in the same process, and `to_client` (NCCL send/recv between the devices' streams) beside
//! the host round trip it replaces (read on one client, create on the other).
//!
//! Run: `NCCL_NVLS_ENABLE=0 cargo bench -p lockstep-cuda --bench collectives` on a machine with
//! two GPUs and `libnccl.so.2` on the library path; otherwise it prints `SKIPPED: ...` and
//! exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`.
//!
//! Bandwidth is nccl-tests' "algbw": bytes of one device's buffer over the time per operation
//! (for two devices its "busbw" is the same figure). Each figure is the median of `ROUNDS`
//! rounds of `reps` back-to-back operations, synchronised once at the end.

#![deny(clippy::undocumented_unsafe_blocks)]

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext as RawContext, CudaSlice, CudaStream as RawStream};
use cudarc::nccl::{Comm, ReduceOp, result as nccl};
use lockstep::kernel::ElemType;
use lockstep::{Bytes, ComputeClient, Device, DeviceId, Handle, ReduceOperation};
use lockstep_cuda::CudaDevice;
use lockstep_harness::requirement::{Need, cannot_run};

const SIZES_BYTES: [usize; 3] = [1 << 20, 64 << 20, 256 << 20];
const ROUNDS: usize = 5;

fn reps(bytes: usize) -> usize {
    if bytes <= 1 << 20 { 200 } else { 10 }
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// GB/s of `bytes` per operation, from the median seconds of `reps` operations.
fn gbps(bytes: usize, reps: usize, seconds: f64) -> f64 {
    bytes as f64 * reps as f64 / seconds / 1e9
}

/// Times `ROUNDS` rounds of `run` (which performs `reps` operations and waits for them).
fn time(mut run: impl FnMut()) -> f64 {
    run(); // warm-up: communicators, pools, NCCL's buffers
    median(
        (0..ROUNDS)
            .map(|_| {
                let start = Instant::now();
                run();
                start.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn runtime_all_reduce(clients: &[ComputeClient<CudaDevice>], bytes: usize) -> f64 {
    let ids: Vec<DeviceId> = clients.iter().map(|c| c.peer_id()).collect();
    let buffers: Vec<(Handle, Handle)> = clients
        .iter()
        .map(|c| {
            let src = c.create(Bytes::from(vec![0u8; bytes])).unwrap();
            (src, c.empty(bytes).unwrap())
        })
        .collect();
    let reps = reps(bytes);
    let seconds = time(|| {
        for _ in 0..reps {
            for (c, (src, dst)) in clients.iter().zip(&buffers) {
                c.all_reduce(
                    src.clone(),
                    dst.clone(),
                    ElemType::F32,
                    ids.clone(),
                    ReduceOperation::Sum,
                )
                .unwrap();
            }
        }
        for c in clients {
            c.sync().unwrap();
        }
    });
    gbps(bytes, reps, seconds)
}

fn raw_all_reduce(streams: &[Arc<RawStream>], comms: &[Comm], bytes: usize) -> f64 {
    let elems = bytes / 4;
    let mut buffers: Vec<(CudaSlice<f32>, CudaSlice<f32>)> = streams
        .iter()
        .map(|s| (s.alloc_zeros(elems).unwrap(), s.alloc_zeros(elems).unwrap()))
        .collect();
    let reps = reps(bytes);
    let seconds = time(|| {
        for _ in 0..reps {
            // One thread drives both ranks: NCCL needs them in one group.
            nccl::group_start().unwrap();
            for (comm, (src, dst)) in comms.iter().zip(buffers.iter_mut()) {
                comm.all_reduce(src, dst, &ReduceOp::Sum).unwrap();
            }
            nccl::group_end().unwrap();
        }
        for s in streams {
            s.synchronize().unwrap();
        }
    });
    gbps(bytes, reps, seconds)
}

fn to_client(clients: &[ComputeClient<CudaDevice>], bytes: usize, via_host: bool) -> f64 {
    let (a, b) = (&clients[0], &clients[1]);
    let src = a.create(Bytes::from(vec![1u8; bytes])).unwrap();
    let reps = reps(bytes);
    let seconds = time(|| {
        let copies: Vec<Handle> = (0..reps)
            .map(|_| {
                if via_host {
                    b.create(a.read_one(src.clone()).unwrap()).unwrap()
                } else {
                    a.to_client(src.clone(), b, ElemType::F32).unwrap()
                }
            })
            .collect();
        a.sync().unwrap();
        b.sync().unwrap();
        drop(copies);
    });
    gbps(bytes, reps, seconds)
}

fn main() {
    let clients: Vec<ComputeClient<CudaDevice>> = match (0..2).map(CudaDevice::new).collect() {
        Ok(devices) => {
            let devices: Vec<CudaDevice> = devices;
            devices.into_iter().map(ComputeClient::new).collect()
        }
        Err(err) => {
            cannot_run(
                Need::CudaGpu,
                "collectives",
                &format!("two are needed; {err}"),
            );
            return;
        }
    };
    if !clients[0].supports_collectives() {
        cannot_run(
            Need::Nccl,
            "collectives",
            "libnccl could not be loaded (set LD_LIBRARY_PATH to its directory)",
        );
        return;
    }
    let streams: Vec<Arc<RawStream>> = (0..2)
        .map(|i| RawContext::new(i).unwrap().new_stream().unwrap())
        .collect();
    let comms = Comm::from_devices(streams.clone()).expect("ncclCommInitAll");
    let device = CudaDevice::new(0).unwrap();
    println!(
        "collectives on 2 x {}: all_reduce f32 sum, to_client; GB/s per device buffer, median of {ROUNDS}",
        device.properties().name
    );
    println!(
        "{:>10}  {:>16}  {:>12}  {:>7}  {:>16}  {:>16}",
        "size", "all_reduce client", "raw NCCL", "vs raw", "to_client (NCCL)", "read+create"
    );
    for bytes in SIZES_BYTES {
        let runtime = runtime_all_reduce(&clients, bytes);
        let raw = raw_all_reduce(&streams, &comms, bytes);
        let peer = to_client(&clients, bytes, false);
        let host = to_client(&clients, bytes, true);
        println!(
            "{:>7} MiB  {runtime:>16.2}  {raw:>12.2}  {:>7.2}  {peer:>16.2}  {host:>16.2}",
            bytes >> 20,
            runtime / raw
        );
    }
}
