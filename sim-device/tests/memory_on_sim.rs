//! Memory management through the client on the simulator: reports a person reads, layouts
//! that are refused (typed), persistent windows.

use lockstep::{
    Bytes, ComputeClient, InstallMemoryPoolsError, LayoutError, MemoryAllocationMode,
    MemoryPoolsConfig, PoolKind, PoolLayout, PoolPreset, StreamId,
};
use lockstep_sim::{SimConfig, SimDevice};

fn client() -> ComputeClient<SimDevice> {
    let mut c = ComputeClient::new(SimDevice::new(SimConfig::new(1)));
    c.set_stream(StreamId(0));
    c
}

#[test]
fn memory_report_reads_well() {
    let c = client();
    let small: Vec<_> = (0..3)
        .map(|_| c.create(Bytes::from(vec![1u8; 100])).unwrap())
        .collect();
    // One read held (its host block lent), one dropped (its block kept for reuse).
    let _held = c.read_one(small[0].clone()).unwrap();
    drop(c.read_one(small[1].clone()).unwrap());
    let medium = c.empty(300 << 10).unwrap();
    let _large = c.empty(40 << 20).unwrap();
    drop(medium);
    c.sync().unwrap();
    let weights = c.memory_persistent_allocation((), |()| c.empty(1 << 20).unwrap());
    insta::assert_snapshot!(c.memory_report().unwrap().to_string());
    drop(weights);
}

#[test]
fn an_invalid_layout_is_refused_naming_the_problem() {
    let layout = |page_bytes, max_slice_bytes| PoolLayout {
        page_bytes,
        max_slice_bytes,
        cap_bytes: 1 << 20,
    };
    let c = client();
    let invalid = MemoryPoolsConfig::Pools(vec![layout(4096, 1024), layout(4096, 8192)]);
    let err = c.install_memory_pools(&invalid).unwrap_err();
    assert_eq!(
        err,
        InstallMemoryPoolsError::InvalidLayout(LayoutError::SliceLargerThanPage {
            pool: 1,
            slice_bytes: 8192,
            page_bytes: 4096,
        })
    );
    assert_eq!(
        err.to_string(),
        "invalid memory pools configuration: pool 1 allows slices of 8192 bytes, larger than its 4096-byte pages"
    );
    // Nothing changed: the default pools still serve, a valid layout still installs.
    let before = c.memory_report().unwrap();
    assert_eq!(
        before.pools.len(),
        4,
        "the default's two sliced pools, exclusive, persistent"
    );
    c.install_memory_pools(&MemoryPoolsConfig::Pools(vec![layout(4096, 1024)]))
        .unwrap();
    assert_eq!(c.memory_report().unwrap().pools.len(), 3);
}

#[test]
fn an_unavailable_preset_is_refused() {
    let err = client()
        .install_memory_pools(&MemoryPoolsConfig::Preset(PoolPreset::LargePages))
        .unwrap_err();
    let InstallMemoryPoolsError::InvalidLayout(LayoutError::UnavailablePreset { preset, reason }) =
        err
    else {
        panic!("expected an unavailable preset, got {err:?}");
    };
    assert_eq!(preset, PoolPreset::LargePages);
    assert_eq!(
        reason,
        "it needs 1 GiB pages and 2 GiB of memory; the device allows 268435456 bytes per allocation and has 1073741824 bytes"
    );
}

#[test]
fn persistent_windows_nest_and_honour_a_pinned_stream() {
    let c = client();
    let persistent_slices = |c: &ComputeClient<SimDevice>| {
        c.memory_report()
            .unwrap()
            .pools
            .iter()
            .find(|p| p.kind == PoolKind::Persistent)
            .unwrap()
            .slices
    };
    let (outer, inner, after_inner) = c.memory_persistent_allocation((), |()| {
        let outer = c.empty(64).unwrap();
        let inner = c.memory_persistent_allocation((), |()| c.empty(64).unwrap());
        let after_inner = c.empty(64).unwrap();
        (outer, inner, after_inner)
    });
    assert_eq!(
        persistent_slices(&c),
        3,
        "all three came from the persistent pool"
    );
    let auto = c.empty(64).unwrap();
    assert_eq!(persistent_slices(&c), 3, "the window closed");
    // The client is pinned, so another thread's allocations through it are persistent too.
    std::thread::scope(|s| {
        s.spawn(|| {
            let h = c.memory_persistent_allocation((), |()| c.empty(64).unwrap());
            assert_eq!(persistent_slices(&c), 4);
            drop(h);
        });
    });
    c.allocation_mode(MemoryAllocationMode::Persistent);
    let explicit = c.empty(64).unwrap();
    c.allocation_mode(MemoryAllocationMode::Auto);
    assert!(persistent_slices(&c) >= 4);
    drop((outer, inner, after_inner, auto, explicit));
}
