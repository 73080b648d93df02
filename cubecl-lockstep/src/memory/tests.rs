use cubecl_common::device::{DeviceId, ServiceId};
use cubecl_environment::stream::StreamId;
use cubecl_runtime::memory_management::ManagedMemoryHandle;
use cubecl_runtime::server::BufferBinding;
use lockstep::{Bytes, ComputeClient, ServerOptions};
use lockstep_sim::{SimConfig, SimDevice};

use super::{MemoryError, MemoryTable, region};

fn binding(handle: &ManagedMemoryHandle, size: u64, start: u64, end_offset: u64) -> BufferBinding {
    BufferBinding {
        memory: handle.clone().binding(),
        service: ServiceId::of::<MemoryTable>(DeviceId {
            type_id: 0,
            index_id: 0,
        }),
        offset_start: Some(start),
        offset_end: Some(end_offset),
        stream: StreamId { value: 0 },
        size,
    }
}

#[test]
fn a_binding_views_its_bytes_of_the_allocation() {
    let client = ComputeClient::inline(SimDevice::new(SimConfig::new(0)), ServerOptions::default());
    let mut table = MemoryTable::default();
    let handle = ManagedMemoryHandle::new();
    table.insert(
        handle.clone(),
        Some(client.create(Bytes::from_elems(&[1u32, 2, 3, 4])).unwrap()),
    );
    assert!(
        handle.descriptor().is_allocated(),
        "cubecl sees the memory allocated"
    );
    let tail = binding(&handle, 16, 8, 0);
    let view = table.view(&tail).unwrap().expect("eight bytes");
    assert_eq!(client.read_one(view).unwrap().to_elems::<u32>(), vec![3, 4]);
    assert_eq!(region(&tail).bytes, 8..16);
    assert_eq!(
        table
            .view(&binding(&handle, 16, 4, 12))
            .unwrap()
            .map(|v| v.size()),
        None,
        "zero bytes"
    );
}

#[test]
fn a_binding_of_unknown_or_too_small_memory_is_refused() {
    let mut table = MemoryTable::default();
    let unknown = ManagedMemoryHandle::new();
    let id = unknown.descriptor().id;
    assert_eq!(
        table.view(&binding(&unknown, 4, 0, 0)).unwrap_err(),
        MemoryError::Unknown(id)
    );
    let empty = ManagedMemoryHandle::new();
    table.insert(empty.clone(), None);
    assert!(matches!(
        table.view(&binding(&empty, 4, 0, 0)),
        Err(MemoryError::OutOfRange { .. })
    ));
}

#[test]
fn the_sweep_drops_memory_only_the_server_holds() {
    let mut table = MemoryTable::default();
    let kept = ManagedMemoryHandle::new();
    let dropped = ManagedMemoryHandle::new();
    let dropped_id = dropped.descriptor().id;
    table.insert(kept.clone(), None);
    table.insert(dropped.clone(), None);
    let bound = dropped.clone().binding();
    drop(dropped);
    assert!(table.sweep().is_empty(), "a binding still holds it");
    drop(bound);
    assert_eq!(table.sweep(), vec![dropped_id]);
    assert!(table.sweep().is_empty());
    drop(kept);
}
