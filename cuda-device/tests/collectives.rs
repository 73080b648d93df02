//! Collectives on real GPUs through NCCL: exact results on two devices and peer copies. The
//! conformance suite's collective properties run from `lockstep-conformance`'s
//! `tests/on_cuda.rs`.
//!
//! Every test looks for the GPUs it needs (two, or one for a communicator of one) and
//! `libnccl` at run time. Without them it prints a visible
//! `SKIPPED: ...` line and returns, or fails under `LOCKSTEP_REQUIRE_GPU=1`
//! ([`lockstep_harness::requirement`]).

#![deny(clippy::undocumented_unsafe_blocks)]

use std::time::{Duration, Instant};

use lockstep::kernel::ElemType;
use lockstep::{
    Bytes, CollectiveError, ComputeClient, CubeCount, DeviceId, Handle, KernelArguments,
    ReduceOperation, ServerError, StreamId,
};
use lockstep_cuda::CudaDevice;
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_kernels::elementwise::KernelKind;

mod child;

/// What `libnccl` missing looks like from a client.
const NO_NCCL: &str = "libnccl could not be loaded (set LD_LIBRARY_PATH to its directory)";

/// Clients of GPUs 0 and 1, or `None` (after [`cannot_run`] said why) without two GPUs and
/// NCCL.
fn two_gpus(test: &str) -> Option<Vec<ComputeClient<CudaDevice>>> {
    let devices: Result<Vec<CudaDevice>, _> = (0..2).map(CudaDevice::new).collect();
    let clients: Vec<_> = match devices {
        Ok(devices) => devices.into_iter().map(ComputeClient::new).collect(),
        Err(err) => {
            cannot_run(Need::CudaGpu, test, &format!("two are needed; {err}"));
            return None;
        }
    };
    if !clients[0].supports_collectives() {
        cannot_run(Need::Nccl, test, NO_NCCL);
        return None;
    }
    Some(clients)
}

#[test]
fn enumeration_counts_the_gpus() {
    let Some(clients) = two_gpus("enumeration_counts_the_gpus") else {
        return;
    };
    let gpus = clients[1].device_count(2);
    assert!(gpus >= 2, "{gpus}");
    assert_eq!(
        clients[1].peer_id(),
        DeviceId {
            type_id: 2,
            index: 1
        }
    );
    assert_eq!(clients[0].enumerate_all_devices().len(), gpus);
}

#[test]
fn all_reduce_on_two_gpus_is_exact() {
    let Some(clients) = two_gpus("all_reduce_on_two_gpus_is_exact") else {
        return;
    };
    let ids: Vec<DeviceId> = clients.iter().map(|c| c.peer_id()).collect();
    let n = 1 << 20;
    let outputs: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(rank, c)| {
            let values: Vec<i32> = (0..n).map(|i| i * (rank as i32 + 1) - 7).collect();
            let h = c.create(Bytes::from_elems(&values)).unwrap();
            c.all_reduce(
                h.clone(),
                h.clone(),
                ElemType::I32,
                ids.clone(),
                ReduceOperation::Sum,
            )
            .unwrap();
            h
        })
        .collect();
    let expected: Vec<i32> = (0..n).map(|i| 3 * i - 14).collect();
    for (c, h) in clients.iter().zip(outputs) {
        assert_eq!(c.read_one(h).unwrap().to_elems::<i32>(), expected);
    }
}

#[test]
fn to_client_moves_bytes_between_gpus() {
    let Some(clients) = two_gpus("to_client_moves_bytes_between_gpus") else {
        return;
    };
    let data: Vec<u32> = (0..(3 << 20)).collect();
    let src = clients[0].create(Bytes::from_elems(&data)).unwrap();
    let copied = clients[0]
        .to_client(src.clone(), &clients[1], ElemType::U32)
        .unwrap();
    assert_eq!(clients[1].read_one(copied).unwrap().to_elems::<u32>(), data);
    clients[0].sync().unwrap();
}

/// A collective's clock starts when it was enqueued or when the one before it on its
/// communicator completed, whichever is later: a steady pipeline of collectives, each queued
/// behind slow work and together far longer than the timeout, never times out, though every
/// host wait (on another stream) finds the newest one still in flight. One GPU is enough: a
/// communicator of one.
#[test]
fn pipelined_collectives_never_time_out() {
    const TEST: &str = "pipelined_collectives_never_time_out";
    // Joining the communicator counts against it too: NCCL's first initialisation in a process
    // takes a few hundred milliseconds.
    let timeout = Duration::from_secs(2);
    let work = match CudaDevice::new(0) {
        Ok(device) => ComputeClient::new(device.with_collective_timeout(timeout)),
        Err(err) => return cannot_run(Need::CudaGpu, TEST, &err.to_string()),
    };
    if !work.supports_collectives() {
        return cannot_run(Need::Nccl, TEST, NO_NCCL);
    }
    let mut side = work.clone();
    side.set_stream(StreamId(7));
    let ones = work
        .create(Bytes::from_elems(&vec![1u32; 1 << 22]))
        .unwrap();
    let sum = work.create(Bytes::from_elems(&[0u32])).unwrap();
    let reduced = work.create(Bytes::from_elems(&[5u32])).unwrap();
    let probe = side.create(Bytes::from_elems(&[9u32])).unwrap();
    let kernel = KernelKind::AtomicSum.kernel();
    let count = CubeCount::Static(KernelKind::AtomicSum.workgroups(1, 1 << 22), 1, 1);
    let step = || {
        let args = KernelArguments::new().binding(&sum).binding(&ones);
        work.launch(&kernel, count.clone(), args).unwrap();
        let me = vec![work.peer_id()];
        let (r, u32, op) = (reduced.clone(), ElemType::U32, ReduceOperation::Sum);
        work.all_reduce(r.clone(), r, u32, me, op).unwrap();
    };
    // Enough steps for about three timeouts of GPU work, timed after a first (compiling) one.
    step();
    work.sync().unwrap();
    let started = Instant::now();
    step();
    work.sync().unwrap();
    let per_step = started.elapsed().max(Duration::from_micros(100));
    let steps = (3 * timeout.as_micros() / per_step.as_micros()).clamp(8, 40_000) as u32;
    let started = Instant::now();
    for _ in 0..steps {
        step();
    }
    while started.elapsed() < 3 * timeout {
        assert_eq!(side.read_one(probe.clone()).unwrap().to_elems::<u32>(), [9]);
    }
    assert_eq!(work.sync(), Ok(()), "{steps} steps of {per_step:?}");
    // The kernel adds in wrapping `u32` arithmetic.
    let expected = (steps + 2).wrapping_mul(1 << 22);
    assert_eq!(work.read_one(sum).unwrap().to_elems::<u32>(), [expected]);
    assert_eq!(work.read_one(reduced).unwrap().to_elems::<u32>(), [5]);
}

/// A write staged through more than the pinned pool keeps (1 GiB), enqueued while a collective
/// is in flight, first waits for the collective watching it (behind a peer that never arrives
/// the pool's own wait would never end; `absent_peer_child`), then lands whole. One GPU is
/// enough: a communicator of one.
#[test]
fn a_big_write_behind_a_collective_lands_whole() {
    const TEST: &str = "a_big_write_behind_a_collective_lands_whole";
    let client = match CudaDevice::new(0) {
        Ok(device) => ComputeClient::new(device),
        Err(err) => return cannot_run(Need::CudaGpu, TEST, &err.to_string()),
    };
    if !client.supports_collectives() {
        return cannot_run(Need::Nccl, TEST, NO_NCCL);
    }
    let me = vec![client.peer_id()];
    let reduced = client.create(Bytes::from_elems(&[5u32; 1024])).unwrap();
    let (r, u32, op) = (reduced.clone(), ElemType::U32, ReduceOperation::Sum);
    client.all_reduce(r.clone(), r, u32, me, op).unwrap();
    let big = client.create(Bytes::from(vec![7u8; 5 << 28])).unwrap();
    assert_eq!(client.sync(), Ok(()));
    let written = client.read_one(big).unwrap();
    assert!(
        written.iter().all(|&b| b == 7),
        "the big write landed whole"
    );
    assert_eq!(
        client.read_one(reduced).unwrap().to_elems::<u32>(),
        [5; 1024]
    );
}

const ABSENT_PEER_CHILD: &str = "LOCKSTEP_CUDA_ABSENT_PEER_CHILD";

/// Clients of GPUs 0 and 1 whose collectives wait at most `timeout` for their peers.
fn clients_waiting(timeout: Duration) -> Vec<ComputeClient<CudaDevice>> {
    (0..2)
        .map(|gpu| {
            ComputeClient::new(
                CudaDevice::new(gpu)
                    .unwrap()
                    .with_collective_timeout(timeout),
            )
        })
        .collect()
}

/// What `stream` reports when `peer` never enqueued collective `sequence` of `devices`.
fn peer_timed_out(
    stream: StreamId,
    sequence: u64,
    peer: DeviceId,
    devices: &[DeviceId],
    timeout: Duration,
) -> Result<(), ServerError> {
    Err(ServerError::Collective {
        stream,
        error: CollectiveError::PeerTimeout {
            devices: devices.to_vec(),
            sequence,
            peer,
            timeout_ns: u64::try_from(timeout.as_nanos()).unwrap(),
        },
    })
}

/// An all-reduce of `values[rank]` on each client in `clients` (over `devices`), read back.
fn reduce_on(
    clients: &[&ComputeClient<CudaDevice>],
    devices: &[DeviceId],
    values: &[u32],
) -> Vec<Handle> {
    clients
        .iter()
        .zip(values)
        .map(|(c, &v)| {
            let h = c.create(Bytes::from_elems(&[v])).unwrap();
            c.all_reduce(
                h.clone(),
                h.clone(),
                ElemType::U32,
                devices.to_vec(),
                ReduceOperation::Sum,
            )
            .unwrap();
            h
        })
        .collect()
}

/// Run in a child process: the communicators it aborts, and a kernel that waited for a peer,
/// must not outlive it.
#[test]
#[ignore = "aborts NCCL communicators; run by a_peer_that_never_arrives_times_out in a child process"]
fn absent_peer_child() {
    if !child::is_child(ABSENT_PEER_CHILD) {
        return;
    }
    let timeout = Duration::from_secs(2);
    let clients = clients_waiting(timeout);
    let ids: Vec<DeviceId> = clients.iter().map(|c| c.peer_id()).collect();
    let timed_out = |stream, sequence, peer, devices: &[DeviceId]| {
        peer_timed_out(stream, sequence, peer, devices, timeout)
    };
    let both = [&clients[0], &clients[1]];

    // Both join and reduce once; then only GPU 0 enqueues the second: it fails on its stream
    // at the timeout, naming GPU 1, instead of waiting forever.
    // A handle names its client's device, not the GPU: read each where it was made.
    for (client, h) in clients.iter().zip(reduce_on(&both, &ids, &[1, 2])) {
        assert_eq!(client.read_one(h).unwrap().to_elems::<u32>(), [3]);
    }
    let started = Instant::now();
    let lone = reduce_on(&both[..1], &ids, &[5]);
    // A write staged through more than the pinned pool keeps (1 GiB) behind it waits for its
    // own earlier segments' copies: watching the collective, so it ends at the timeout too.
    let big = clients[0].create(Bytes::from(vec![7u8; 5 << 28])).unwrap();
    assert_eq!(
        clients[0].sync(),
        timed_out(clients[0].stream_id(), 1, ids[1], &ids)
    );
    let written = clients[0].read_one(big).unwrap();
    assert!(
        written.iter().all(|&b| b == 7),
        "the big write landed whole"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    drop(lone);

    // The communicator was aborted: both meet again in a fresh one, and reduce exactly.
    for (client, h) in clients.iter().zip(reduce_on(&both, &ids, &[7, 8])) {
        assert_eq!(client.read_one(h).unwrap().to_elems::<u32>(), [15]);
    }

    // A peer that never joins a communicator at all: the rendezvous times out too.
    let reversed = vec![ids[1], ids[0]];
    let started = Instant::now();
    let lone = reduce_on(&both[..1], &reversed, &[1]);
    assert_eq!(
        clients[0].sync(),
        timed_out(clients[0].stream_id(), 0, ids[1], &reversed)
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    drop(lone);
    println!("child: absent peers timed out as expected");
}

#[test]
fn a_peer_that_never_arrives_times_out() {
    if two_gpus("a_peer_that_never_arrives_times_out").is_none() {
        return;
    }
    child::run(
        "absent_peer_child",
        ABSENT_PEER_CHILD,
        "child: absent peers timed out as expected",
        Duration::from_secs(120),
    );
}

const CUT_SHORT_CHILD: &str = "LOCKSTEP_CUDA_CUT_SHORT_CHILD";

/// Queues about `duration` of GPU work (atomic sums over 256 MiB, each kernel long enough
/// that the host queues them far faster than the GPU runs them) on `client`'s stream.
fn keep_busy(client: &ComputeClient<CudaDevice>, duration: Duration) {
    const ELEMS: usize = 1 << 26;
    let ones = client
        .create(Bytes::from_elems(&vec![1u32; ELEMS]))
        .unwrap();
    let sum = client.create(Bytes::from_elems(&[0u32])).unwrap();
    let kernel = KernelKind::AtomicSum.kernel();
    let count = CubeCount::Static(KernelKind::AtomicSum.workgroups(1, ELEMS), 1, 1);
    let launch = || {
        let args = KernelArguments::new().binding(&sum).binding(&ones);
        client.launch(&kernel, count.clone(), args).unwrap();
    };
    launch();
    client.sync().unwrap();
    let started = Instant::now();
    (0..4).for_each(|_| launch());
    client.sync().unwrap();
    let each = (started.elapsed() / 4).max(Duration::from_micros(10));
    let launches = (duration.as_micros() / each.as_micros()).clamp(1, 100_000);
    println!("child: {launches} kernels of {each:?} queued");
    (0..launches).for_each(|_| launch());
}

/// Run in a child process: a device aborts the rank it shares with another device of its GPU.
#[test]
#[ignore = "aborts an NCCL communicator; run by a_collective_cut_short_by_a_shared_ranks_abort_fails in a child process"]
fn cut_short_child() {
    if !child::is_child(CUT_SHORT_CHILD) {
        return;
    }
    // Two devices of GPU 0 share its rank of the communicator of GPU 0 alone.
    let device = |timeout| CudaDevice::new(0).unwrap().with_collective_timeout(timeout);
    let patient = ComputeClient::new(device(Duration::from_secs(60)));
    let hasty = ComputeClient::new(device(Duration::from_secs(1)));
    let me = [patient.peer_id()];
    for client in [&patient, &hasty] {
        let h = reduce_on(&[client], &me, &[3]).remove(0);
        assert_eq!(client.read_one(h).unwrap().to_elems::<u32>(), [3]);
    }
    // Each all-reduce queued behind 3 s of kernels: the hasty device's clock passes its 1 s
    // timeout, and it aborts the shared rank while the patient one's is still pending.
    keep_busy(&patient, Duration::from_secs(3));
    let _patient_reduced = reduce_on(&[&patient], &me, &[3]);
    keep_busy(&hasty, Duration::from_secs(3));
    let _hasty_reduced = reduce_on(&[&hasty], &me, &[3]);
    let hasty_outcome = hasty.sync();
    assert!(
        matches!(
            hasty_outcome,
            Err(ServerError::Collective {
                error: CollectiveError::PeerTimeout { .. },
                ..
            })
        ),
        "the hasty device: {hasty_outcome:?}"
    );
    let patient_outcome = patient.sync();
    assert!(
        matches!(
            patient_outcome,
            Err(ServerError::Collective {
                error: CollectiveError::CommunicatorFailed { .. },
                ..
            })
        ),
        "the patient device's all-reduce, cut short by the abort, must fail: {patient_outcome:?}"
    );
    println!(
        "child: a collective cut short by the shared rank's abort failed: {patient_outcome:?}"
    );
}

#[test]
fn a_collective_cut_short_by_a_shared_ranks_abort_fails() {
    const TEST: &str = "a_collective_cut_short_by_a_shared_ranks_abort_fails";
    match CudaDevice::new(0).map(ComputeClient::new) {
        Ok(client) if client.supports_collectives() => {}
        Ok(_) => return cannot_run(Need::Nccl, TEST, NO_NCCL),
        Err(err) => return cannot_run(Need::CudaGpu, TEST, &err.to_string()),
    }
    child::run(
        "cut_short_child",
        CUT_SHORT_CHILD,
        "child: a collective cut short by the shared rank's abort failed",
        Duration::from_secs(120),
    );
}

const STUCK_READ_CHILD: &str = "LOCKSTEP_CUDA_STUCK_READ_CHILD";

/// Run in a child process (a fresh pinned pool, and the communicator it aborts).
#[test]
#[ignore = "aborts NCCL communicators; run by a_read_behind_a_stuck_collective_times_out in a child process"]
fn stuck_read_child() {
    if !child::is_child(STUCK_READ_CHILD) {
        return;
    }
    let timeout = Duration::from_secs(2);
    let clients = clients_waiting(timeout);
    let ids: Vec<DeviceId> = clients.iter().map(|c| c.peer_id()).collect();
    let both = [&clients[0], &clients[1]];
    for (client, h) in clients.iter().zip(reduce_on(&both, &ids, &[1, 2])) {
        assert_eq!(client.read_one(h).unwrap().to_elems::<u32>(), [3]);
    }
    // GPU 1 never enqueues the second all-reduce. Writes of 128 MiB and 768 MiB behind it
    // stage without a wait (the pinned pool then keeps 896 MiB of its 1 GiB cap, every block
    // in flight behind the collective); reading the 128 MiB back needs a block past the cap,
    // so one of those: it must watch the collective (failing it at the timeout) rather than
    // wait in the driver for a copy that never comes.
    let started = Instant::now();
    let lone = reduce_on(&both[..1], &ids, &[5]);
    let probe = clients[0]
        .create(Bytes::from(vec![3u8; 128 << 20]))
        .unwrap();
    let big = clients[0]
        .create(Bytes::from(vec![7u8; 768 << 20]))
        .unwrap();
    let read = clients[0].read_one(probe);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let timed_out = peer_timed_out(clients[0].stream_id(), 1, ids[1], &ids, timeout);
    match read {
        Ok(bytes) => {
            assert!(bytes.iter().all(|&b| b == 3), "the probe read back whole");
            assert_eq!(clients[0].sync(), timed_out);
        }
        Err(err) => assert_eq!(Err(err), timed_out),
    }
    let written = clients[0].read_one(big).unwrap();
    assert!(written.iter().all(|&b| b == 7), "the write landed whole");
    drop(lone);
    println!("child: a read behind a stuck collective timed out as expected");
}

#[test]
fn a_read_behind_a_stuck_collective_times_out() {
    if two_gpus("a_read_behind_a_stuck_collective_times_out").is_none() {
        return;
    }
    child::run(
        "stuck_read_child",
        STUCK_READ_CHILD,
        "child: a read behind a stuck collective timed out as expected",
        Duration::from_secs(120),
    );
}
