//! Reads lent from the device's host pool, through the client on the simulator (which lends
//! heap blocks through the same `HostPool` CUDA lends pinned ones through): the right bytes at
//! every size class, blocks reused and returned when the bytes drop, on any thread, also after
//! the client is gone.

use lockstep::{AllocationProperty, Bytes, ComputeClient, HostPoolStats, StreamId};
use lockstep_sim::{HOST_POOL_CAP_BYTES, SimConfig, SimDevice};

fn client() -> ComputeClient<SimDevice> {
    let mut c = ComputeClient::new(SimDevice::new(SimConfig::new(3)));
    c.set_stream(StreamId(0));
    c
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
}

fn host_pool(c: &ComputeClient<SimDevice>) -> HostPoolStats {
    c.memory_report()
        .unwrap()
        .host_pool
        .expect("the simulator reports its host pool")
}

/// A fresh pool's counters: nothing lent, kept, allocated, reused or freed.
fn fresh() -> HostPoolStats {
    HostPoolStats {
        cap_bytes: HOST_POOL_CAP_BYTES as u64,
        ..HostPoolStats::default()
    }
}

/// One length on each side of each class edge, from a byte to past a MiB.
const LENGTHS: [usize; 10] = [
    1,
    4096,
    4097,
    5120,
    5121,
    7169,
    8193,
    65_536 + 12,
    (1 << 20) + 4,
    (5 << 20) + 3,
];

#[test]
fn reads_return_the_written_bytes_at_every_size_class_twice_from_one_block_each() {
    let c = client();
    let handles: Vec<_> = LENGTHS
        .iter()
        .map(|&len| c.create(Bytes::from(pattern(len, 0))).unwrap())
        .collect();
    for round in 0..2u8 {
        for (handle, &len) in handles.iter().zip(&LENGTHS) {
            c.write(handle, Bytes::from(pattern(len, round))).unwrap();
            let back = c.read_one(handle.clone()).unwrap();
            assert_eq!(back.property(), AllocationProperty::Pinned, "{len} bytes");
            assert!(*back == *pattern(len, round), "{len} bytes, round {round}");
        }
    }
    // 4096 and 1 share a class, as do 5120 and 4097: 8 classes, each allocated once.
    let classes_bytes = 4096 + 5120 + 6144 + 8192 + 10_240 + 81_920 + 1_310_720 + 6_291_456;
    assert_eq!(
        host_pool(&c),
        HostPoolStats {
            blocks_kept: 8,
            bytes_kept: classes_bytes,
            allocations: 8,
            reuses: 12,
            ..fresh()
        }
    );
}

#[test]
fn a_read_block_is_lent_while_its_bytes_live_and_reused_once_they_drop() {
    let c = client();
    let h = c.create(Bytes::from(pattern(10_000, 1))).unwrap();
    let first = c.read_one(h.clone()).unwrap();
    let second = c.read_one(h.clone()).unwrap();
    assert_eq!(
        host_pool(&c),
        HostPoolStats {
            blocks_lent: 2,
            bytes_lent: 20_480,
            allocations: 2,
            ..fresh()
        }
    );
    let address = first.as_ptr();
    drop(first);
    assert_eq!(
        host_pool(&c),
        HostPoolStats {
            blocks_lent: 1,
            bytes_lent: 10_240,
            blocks_kept: 1,
            bytes_kept: 10_240,
            allocations: 2,
            ..fresh()
        }
    );
    let third = c.read_one(h).unwrap();
    assert_eq!(third.as_ptr(), address, "the block the first read returned");
    assert_eq!((*second == *third, host_pool(&c).reuses), (true, 1));
}

#[test]
fn bytes_dropped_on_another_thread_return_their_block() {
    let c = client();
    let h = c.create(Bytes::from(pattern(3000, 2))).unwrap();
    let back = c.read_one(h.clone()).unwrap();
    std::thread::spawn(move || {
        assert!(*back == *pattern(3000, 2));
    })
    .join()
    .unwrap();
    assert_eq!(
        host_pool(&c),
        HostPoolStats {
            blocks_kept: 1,
            bytes_kept: 4096,
            allocations: 1,
            ..fresh()
        }
    );
    drop(c.read_one(h).unwrap());
    assert_eq!(
        host_pool(&c),
        HostPoolStats {
            blocks_kept: 1,
            bytes_kept: 4096,
            allocations: 1,
            reuses: 1,
            ..fresh()
        }
    );
}

#[test]
fn bytes_outlive_their_client_and_device() {
    let c = client();
    let h = c.create(Bytes::from(pattern(70_000, 3))).unwrap();
    let back = c.read_one(h.clone()).unwrap();
    let lazy = c.read_lazy(lockstep::CopyDescriptor {
        shape: vec![70_000],
        strides: vec![1],
        elem_size: 1,
        handle: h.clone(),
    });
    assert_eq!(lazy.property(), AllocationProperty::Device);
    assert!(*lazy == *pattern(70_000, 3));
    assert_eq!(
        lazy.property(),
        AllocationProperty::Pinned,
        "the read's block"
    );
    drop((h, c));
    let on_thread = std::thread::spawn(move || {
        let equal = *back == *pattern(70_000, 3);
        drop(back);
        equal
    });
    assert!(on_thread.join().unwrap());
    assert!(*lazy == *pattern(70_000, 3));
}

#[test]
fn a_dense_tensor_read_is_the_block_and_a_strided_one_is_gathered() {
    let c = client();
    let words: Vec<u32> = (0..12).collect();
    let h = c.create(Bytes::from_elems(&words)).unwrap();
    let descriptor = |shape: Vec<usize>, strides: Vec<usize>| lockstep::CopyDescriptor {
        shape,
        strides,
        elem_size: 4,
        handle: h.clone(),
    };
    let read = c.read_tensor(vec![
        descriptor(vec![3, 4], vec![4, 1]),
        descriptor(vec![4, 3], vec![1, 4]),
    ]);
    assert_eq!(read[0].property(), AllocationProperty::Pinned);
    assert_eq!(read[0].to_elems::<u32>(), words);
    assert_eq!(read[1].property(), AllocationProperty::Native);
    assert_eq!(
        read[1].to_elems::<u32>(),
        vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    );
}
