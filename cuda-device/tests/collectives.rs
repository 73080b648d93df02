//! Collectives on real GPUs through NCCL: exact results on two devices, peer copies, and the
//! conformance properties of several devices through `CudaFactory`.
//!
//! Every test looks for two GPUs and `libnccl` at run time. Without them it prints a visible
//! `SKIPPED: ...` line and returns, or fails under `LOCKSTEP_REQUIRE_GPU=1`
//! ([`lockstep_conformance::requirement`]).

use lockstep::kernel::ElemType;
use lockstep::{Bytes, ComputeClient, DeviceId, ReduceOperation};
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_conformance::suite::{self, Outcome};
use lockstep_conformance::{CudaFactory, DeviceFactory};
use lockstep_cuda::CudaDevice;

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

#[test]
fn collective_properties_hold_on_every_gpu() {
    const TEST: &str = "collective_properties_hold_on_every_gpu";
    let factory = match CudaFactory::new(0) {
        Ok(factory) => factory,
        Err(err) => {
            cannot_run(Need::CudaGpu, TEST, &err.to_string());
            return;
        }
    };
    // Without NCCL `all_reduce` would be reported not applicable: nothing checked.
    if !factory.open(0).client.supports_collectives() {
        cannot_run(Need::Nccl, TEST, NO_NCCL);
        return;
    }
    let config = RunConfig { cases: 16, seed: 3 };
    for name in ["all_reduce", "to_client"] {
        let results = suite::check(&factory, config, Some(name), |_| {});
        assert_eq!(results.len(), 1, "{name} is a property of the suite");
        assert_eq!(results[0].outcome, Outcome::Passed, "{name}");
    }
}
