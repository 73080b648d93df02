use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;
use crate::bytes::AllocationProperty;

/// Heap blocks that count how many are alive, and can be marked as read by a copy in flight
/// (which `wait_idle` completes).
#[derive(Default)]
struct Probe {
    live: AtomicUsize,
    waits: AtomicUsize,
    refuse: AtomicBool,
}

struct TestAllocator(Arc<Probe>);

struct TestBlock {
    bytes: Box<[u8]>,
    in_flight: bool,
    probe: Arc<Probe>,
}

impl HostBlock for TestBlock {
    fn as_slice(&self) -> &[u8] {
        &self.bytes
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.wait_idle();
        &mut self.bytes
    }
    fn is_idle(&mut self) -> bool {
        !self.in_flight
    }
    fn wait_idle(&mut self) {
        if std::mem::take(&mut self.in_flight) {
            self.probe.waits.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for TestBlock {
    fn drop(&mut self) {
        assert!(!self.in_flight, "a block freed while a copy uses it");
        self.probe.live.fetch_sub(1, Ordering::Relaxed);
    }
}

impl HostAllocator for TestAllocator {
    type Block = TestBlock;
    fn allocate(&self, capacity: usize) -> Result<TestBlock, DeviceError> {
        if self.0.refuse.load(Ordering::Relaxed) {
            return Err(DeviceError::TransferFailed {
                reason: "no pinned memory".to_owned(),
            });
        }
        self.0.live.fetch_add(1, Ordering::Relaxed);
        Ok(TestBlock {
            bytes: vec![0; capacity].into_boxed_slice(),
            in_flight: false,
            probe: self.0.clone(),
        })
    }
}

fn pool(cap_bytes: usize) -> (Arc<HostPool<TestAllocator>>, Arc<Probe>) {
    let probe = Arc::new(Probe::default());
    (
        HostPool::new(TestAllocator(probe.clone()), cap_bytes),
        probe,
    )
}

fn stats(
    pool: &HostPool<TestAllocator>,
    lent: (u64, u64),
    kept: (u64, u64),
    counts: [u64; 3],
) -> HostPoolStats {
    HostPoolStats {
        cap_bytes: pool.stats().cap_bytes,
        blocks_lent: lent.0,
        bytes_lent: lent.1,
        blocks_kept: kept.0,
        bytes_kept: kept.1,
        allocations: counts[0],
        reuses: counts[1],
        frees: counts[2],
    }
}

#[test]
fn classes_are_four_per_doubling_above_the_smallest() {
    let classes: Vec<usize> = [0, 1, 4096, 4097, 5121, 6000, 7169, 8192, 8193]
        .into_iter()
        .map(class_of)
        .collect();
    assert_eq!(
        classes,
        [4096, 4096, 4096, 5120, 6144, 6144, 8192, 8192, 10240]
    );
    assert_eq!(class_of(256 << 20), 256 << 20);
    assert_eq!(class_of((256 << 20) + 1), 320 << 20);
    assert_eq!(class_of(usize::MAX), usize::MAX);
}

#[test]
fn a_returned_block_is_reused_by_the_next_request_of_its_class() {
    let (pool, probe) = pool(1 << 20);
    let mut first = pool.lend(5000).unwrap();
    first.as_mut_slice().fill(7);
    let address = first.block().as_slice().as_ptr();
    let bytes = first.into_bytes();
    assert_eq!(
        (bytes.len(), bytes.property()),
        (5000, AllocationProperty::Pinned)
    );
    assert_eq!(pool.stats(), stats(&pool, (1, 5120), (0, 0), [1, 0, 0]));
    drop(bytes);
    assert_eq!(pool.stats(), stats(&pool, (0, 0), (1, 5120), [1, 0, 0]));

    let again = pool.lend(5100).unwrap();
    assert_eq!(again.block().as_slice().as_ptr(), address, "the same block");
    assert_eq!(again.len(), 5100);
    let other_class = pool.lend(100).unwrap();
    assert_eq!(
        pool.stats(),
        stats(&pool, (2, 5120 + 4096), (0, 0), [2, 1, 0])
    );
    drop((again, other_class));
    assert_eq!(probe.live.load(Ordering::Relaxed), 2);
}

#[test]
fn bytes_dropped_on_another_thread_after_the_pool_owner_left_return_their_block() {
    let (pool, probe) = pool(1 << 20);
    let bytes = pool.lend(10).unwrap().into_bytes();
    let kept_by_test = Arc::downgrade(&pool);
    drop(pool);
    assert_eq!(probe.live.load(Ordering::Relaxed), 1);
    std::thread::spawn(move || drop(bytes)).join().unwrap();
    assert!(
        kept_by_test.upgrade().is_none(),
        "the last block took the pool along"
    );
    assert_eq!(
        probe.live.load(Ordering::Relaxed),
        0,
        "and the pool freed it"
    );
}

#[test]
fn blocks_returned_past_the_cap_are_freed() {
    let (pool, probe) = pool(8192);
    let blocks: Vec<_> = (0..3).map(|_| pool.lend(4096).unwrap()).collect();
    drop(blocks);
    assert_eq!(pool.stats(), stats(&pool, (0, 0), (2, 8192), [3, 0, 1]));
    assert_eq!(probe.live.load(Ordering::Relaxed), 2);
}

#[test]
fn a_block_still_read_by_a_copy_is_reused_only_after_it_completed() {
    let (pool, probe) = pool(8192);
    let mut busy = pool.lend(4096).unwrap();
    busy.block_mut().in_flight = true;
    drop(busy);
    // Under the cap: a fresh block rather than waiting.
    let fresh = pool.lend(4096).unwrap();
    assert!(!fresh.block().in_flight);
    assert_eq!(pool.stats(), stats(&pool, (1, 4096), (1, 4096), [2, 0, 0]));
    // At the cap: the kept block, once its copy completed.
    let waited = pool.lend(4096).unwrap();
    assert!(!waited.block().in_flight);
    assert_eq!(probe.waits.load(Ordering::Relaxed), 1);
    assert_eq!(pool.stats(), stats(&pool, (2, 8192), (0, 0), [2, 1, 0]));
    drop((fresh, waited));
}

#[test]
fn a_refused_allocation_changes_no_counter() {
    let (pool, probe) = pool(8192);
    probe.refuse.store(true, Ordering::Relaxed);
    assert!(matches!(
        pool.lend(1),
        Err(DeviceError::TransferFailed { .. })
    ));
    assert_eq!(pool.stats(), stats(&pool, (0, 0), (0, 0), [0, 0, 0]));
}

#[test]
fn a_pool_dropped_with_blocks_in_flight_waits_for_them_before_freeing() {
    let (pool, probe) = pool(8192);
    let mut busy = pool.lend(1).unwrap();
    busy.block_mut().in_flight = true;
    drop(busy);
    drop(pool);
    assert_eq!(
        (
            probe.live.load(Ordering::Relaxed),
            probe.waits.load(Ordering::Relaxed)
        ),
        (0, 1)
    );
}

#[test]
fn a_request_takes_a_kept_block_up_to_twice_its_class_smallest_first() {
    let (pool, _probe) = pool(1 << 20);
    let blocks: Vec<_> = [16_384, 8192, 6144]
        .map(|len| pool.lend(len).unwrap())
        .into();
    let addresses: Vec<_> = blocks
        .iter()
        .map(|b| b.block().as_slice().as_ptr())
        .collect();
    drop(blocks);
    let small = pool.lend(4096).unwrap();
    assert_eq!(
        small.block().as_slice().as_ptr(),
        addresses[2],
        "6 KiB serves 4 KiB"
    );
    let next = pool.lend(4096).unwrap();
    assert_eq!(next.block().as_slice().as_ptr(), addresses[1], "then 8 KiB");
    let fresh = pool.lend(4096).unwrap();
    assert_ne!(
        fresh.block().as_slice().as_ptr(),
        addresses[0],
        "16 KiB is too large"
    );
    assert_eq!(
        pool.stats(),
        stats(&pool, (3, 6144 + 8192 + 4096), (1, 16_384), [4, 2, 0])
    );
    drop((small, next, fresh));
    assert_eq!(
        pool.stats(),
        stats(&pool, (0, 0), (4, 16_384 + 8192 + 6144 + 4096), [4, 2, 0])
    );
}

#[test]
fn a_held_block_is_read_after_its_drop_and_only_then_returned() {
    let (pool, _) = pool(1 << 20);
    let mut block = pool.lend(5000).unwrap();
    block.as_mut_slice().fill(9);
    let mut bytes = block.into_bytes();
    let held = bytes.pinned_mut().and_then(|p| p.hold()).expect("held");
    assert!(
        bytes.pinned_mut().and_then(|p| p.hold()).is_none(),
        "one hold at a time"
    );
    // The reader waits for the drop, on another thread.
    let reader = std::thread::spawn(move || {
        let mut read = Vec::new();
        held.read_released(&mut |b| read = b.to_vec());
        read
    });
    drop(bytes);
    assert_eq!(reader.join().unwrap(), vec![9; 5000]);
    assert_eq!(pool.stats(), stats(&pool, (0, 0), (1, 5120), [1, 0, 0]));
}

#[test]
fn a_held_block_counts_as_lent_until_read_and_returns_if_never_read() {
    let (pool, _) = pool(1 << 20);
    let mut bytes = pool.lend(5000).unwrap().into_bytes();
    let held = bytes.pinned_mut().and_then(|p| p.hold()).expect("held");
    drop(bytes);
    assert_eq!(pool.stats(), stats(&pool, (1, 5120), (0, 0), [1, 0, 0]));
    drop(held);
    assert_eq!(pool.stats(), stats(&pool, (0, 0), (1, 5120), [1, 0, 0]));
}
