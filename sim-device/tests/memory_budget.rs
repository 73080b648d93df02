//! The device memory budget (`set_memory_budget`) on the simulator: one cap on the pages every
//! pool of every stream reserves (sliced, exclusive, persistent), refused with a typed reason
//! after cleanup has given back what it could, and shown by `memory_report`.

use lockstep::{
    Bytes, ComputeClient, MemoryBudgetError, MemoryPoolsConfig, OutOfMemoryError,
    OutOfMemoryReason, PoolLayout, ServerError, StreamId,
};
use lockstep_sim::{SimConfig, SimDevice};

#[expect(dead_code, reason = "these tests launch no kernel")]
mod common;
use common::pinned;

const KIB: u64 = 1 << 10;

/// A client on stream 0 whose only sliced pool carves 64 KiB pages into slices of at most
/// 16 KiB, capped at `cap_bytes`; larger requests get exclusive pages.
fn client(cap_bytes: u64) -> ComputeClient<SimDevice> {
    let c = pinned(&ComputeClient::new(SimDevice::new(SimConfig::new(1))), 0);
    let small = PoolLayout {
        page_bytes: 64 * KIB,
        max_slice_bytes: 16 * KIB,
        cap_bytes,
    };
    c.install_memory_pools(&MemoryPoolsConfig::Pools(vec![small]))
        .unwrap();
    c
}

/// The refusal of an allocation of `bytes`, which must be out of memory.
fn refusal(c: &ComputeClient<SimDevice>, bytes: u64) -> OutOfMemoryError {
    match c.empty(bytes as usize) {
        Err(ServerError::OutOfMemory(oom)) => oom,
        other => panic!(
            "{bytes} bytes: expected out of memory, got {:?}",
            other.map(drop)
        ),
    }
}

fn budget(page_bytes: u64, budget_bytes: u64, bytes_reserved: u64) -> OutOfMemoryReason {
    OutOfMemoryReason::Budget {
        page_bytes,
        budget_bytes,
        bytes_reserved,
    }
}

fn bytes_reserved(c: &ComputeClient<SimDevice>) -> u64 {
    c.memory_usage().unwrap().bytes_reserved
}

#[test]
fn a_request_beyond_every_slice_is_refused_at_the_budget() {
    let c = client(1 << 20);
    c.set_memory_budget(Some(512 * KIB)).unwrap();
    let oom = refusal(&c, 600 * KIB);
    assert_eq!(oom.reason, budget(600 * KIB, 512 * KIB, 0));
    assert_eq!(
        oom.to_string(),
        "out of memory: cannot allocate 614400 bytes on stream-0 (a 614400-byte page would exceed the device budget of 524288 bytes, 0 of them reserved); the pools hold 0 bytes of pages, 0 of them in use"
    );
    // Exactly the budget fits; then not one more page, however small its slice.
    let whole = c.empty(512 * KIB as usize).unwrap();
    assert_eq!(bytes_reserved(&c), 512 * KIB);
    assert_eq!(
        refusal(&c, 1).reason,
        budget(64 * KIB, 512 * KIB, 512 * KIB)
    );
    // Lifting the budget lifts the refusal.
    c.set_memory_budget(None).unwrap();
    let more = c.empty(600 * KIB as usize).unwrap();
    assert_eq!(bytes_reserved(&c), 1112 * KIB);
    drop((whole, more));
}

#[test]
fn sliced_and_exclusive_pages_of_every_stream_share_the_budget() {
    let a = client(128 * KIB);
    let b = pinned(&a, 1);
    a.set_memory_budget(Some(320 * KIB)).unwrap();
    // Eight 16 KiB slices fill the sliced pool's two pages: its cap.
    let small: Vec<_> = (0..8)
        .map(|_| a.empty(16 * KIB as usize).unwrap())
        .collect();
    assert_eq!(
        refusal(&a, 16 * KIB).reason,
        OutOfMemoryReason::PoolCap {
            pool: 0,
            max_slice_bytes: 16 * KIB,
            cap_bytes: 128 * KIB,
        },
        "the pool's own cap is tighter than the budget"
    );
    // Another stream's exclusive page takes the rest of the budget, exactly.
    let large = b.empty(192 * KIB as usize).unwrap();
    assert_eq!(bytes_reserved(&a), 320 * KIB);
    assert_eq!(
        refusal(&b, 32 * KIB).reason,
        budget(32 * KIB, 320 * KIB, 320 * KIB)
    );
    assert_eq!(
        refusal(&b, 4 * KIB).reason,
        budget(64 * KIB, 320 * KIB, 320 * KIB),
        "stream 1's own sliced pool has no page yet"
    );
    drop((small, large));
}

#[test]
fn cleanup_before_refusing_gives_back_enough_to_succeed() {
    let c = client(1 << 20);
    c.set_memory_budget(Some(256 * KIB)).unwrap();
    let large = c.empty(192 * KIB as usize).unwrap();
    let small = c.empty(16 * KIB as usize).unwrap();
    drop(large);
    // The exclusive page is free but cached: a request under half its size does not reuse it,
    // and its own page would exceed the budget until the cached one goes back to the device.
    let medium = c.empty(80 * KIB as usize).unwrap();
    assert_eq!(bytes_reserved(&c), 64 * KIB + 80 * KIB);
    drop((small, medium));
}

#[test]
fn the_persistent_pool_of_graphs_counts_against_the_budget() {
    let c = client(1 << 20);
    c.set_memory_budget(Some(1 << 20)).unwrap();
    c.graph_prepare().unwrap();
    let weights = c
        .create(Bytes::from(vec![7u8; 768 * KIB as usize]))
        .unwrap();
    assert_eq!(
        refusal(&c, 512 * KIB).reason,
        budget(512 * KIB, 1 << 20, 768 * KIB)
    );
    let windowed = c.memory_persistent_allocation((), |()| refusal(&c, 512 * KIB));
    assert_eq!(windowed.reason, budget(512 * KIB, 1 << 20, 768 * KIB));
    let persistent = c
        .memory_report()
        .unwrap()
        .pools
        .last()
        .unwrap()
        .bytes_reserved;
    assert_eq!(persistent, 768 * KIB);
    drop(weights);
}

#[test]
fn a_budget_under_what_the_pools_reserve_is_refused_after_cleanup() {
    let c = client(1 << 20);
    let live = c.empty(100 * KIB as usize).unwrap();
    let cached = c.empty(200 * KIB as usize).unwrap();
    drop(cached);
    // Cleanup gives the cached page back: the budget then fits.
    c.set_memory_budget(Some(150 * KIB)).unwrap();
    assert_eq!(bytes_reserved(&c), 100 * KIB);
    let err = c.set_memory_budget(Some(99 * KIB)).unwrap_err();
    assert_eq!(
        err,
        MemoryBudgetError::BelowReserved {
            budget_bytes: 99 * KIB,
            bytes_reserved: 100 * KIB,
        }
    );
    assert_eq!(
        err.to_string(),
        "the pools reserve 102400 bytes after cleanup, more than a budget of 101376 bytes; the budget is unchanged"
    );
    assert_eq!(c.memory_report().unwrap().budget_bytes, Some(150 * KIB));
    drop(live);
}

#[test]
fn the_report_shows_each_pool_cap_and_the_device_budget() {
    let c = client(256 * KIB);
    let other = pinned(&c, 1);
    c.set_memory_budget(Some(4 << 20)).unwrap();
    let small: Vec<_> = (0..5)
        .map(|_| c.empty(16 * KIB as usize).unwrap())
        .collect();
    let large = c.empty(1 << 20).unwrap();
    let elsewhere = other.empty(2 << 20).unwrap();
    assert_eq!(c.stream_id(), StreamId(0));
    insta::assert_snapshot!(c.memory_report().unwrap().to_string());
    drop((small, large, elsewhere));
}
