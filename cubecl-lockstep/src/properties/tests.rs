use cubecl_ir::features::{AtomicUsage, TypeUsage};
use cubecl_ir::{ElemType, FloatKind, IntKind, Type, UIntKind};
use lockstep::Device;
use lockstep_sim::{SimConfig, SimDevice};

use super::cubecl_properties;

fn simulator() -> lockstep::DeviceProperties {
    SimDevice::new(SimConfig::new(0)).properties().clone()
}

#[test]
fn limits_are_the_devices() {
    let lockstep = simulator();
    let declared = cubecl_properties(&lockstep);
    let hardware = &declared.hardware;
    assert_eq!(
        hardware.max_shared_memory_size as u64,
        lockstep.max_shared_memory_bytes
    );
    let [x, y, z] = lockstep.max_workgroups;
    assert_eq!(hardware.max_cube_count, (x, y, z));
    assert_eq!(hardware.max_units_per_cube, 1024);
    assert_eq!(
        hardware.num_cpu_cores, None,
        "Lockstep enforces launch limits"
    );
    assert_eq!(declared.memory.max_page_size, lockstep.max_allocation_bytes);
    assert_eq!(declared.memory.alignment, lockstep.alignment_bytes);
    assert_eq!(declared.memory.max_memory(), Some(lockstep.memory_bytes));
}

#[test]
fn only_32_bit_types_are_declared_for_arithmetic() {
    let declared = cubecl_properties(&simulator());
    for elem in [
        ElemType::UInt(UIntKind::U32),
        ElemType::Int(IntKind::I32),
        ElemType::Float(FloatKind::F32),
    ] {
        assert_eq!(declared.type_usage(elem), TypeUsage::all(), "{elem:?}");
    }
    for elem in [
        ElemType::UInt(UIntKind::U64),
        ElemType::Int(IntKind::I64),
        ElemType::Float(FloatKind::F16),
    ] {
        assert!(
            declared.type_usage(elem).is_empty(),
            "{elem:?} is not declared"
        );
    }
    let e4m3 = declared.type_usage(ElemType::Float(FloatKind::E4M3));
    assert_eq!(
        e4m3,
        TypeUsage::Conversion.into(),
        "8-bit floats convert only"
    );
    assert!(declared.supports_address(cubecl_ir::AddressType::U32));
    assert!(!declared.supports_address(cubecl_ir::AddressType::U64));
}

#[test]
fn every_integer_atomic_and_no_float_atomic() {
    let declared = cubecl_properties(&simulator());
    let atomic = |elem| declared.atomic_type_usage(Type::atomic(elem));
    for elem in [ElemType::UInt(UIntKind::U32), ElemType::Int(IntKind::I32)] {
        assert_eq!(atomic(elem), AtomicUsage::all(), "{elem:?}");
    }
    assert!(atomic(ElemType::Float(FloatKind::F32)).is_empty());
}

#[test]
fn no_plane_matrix_or_reinterpretation_features() {
    let declared = cubecl_properties(&simulator());
    assert!(declared.features.plane.is_empty());
    assert!(!declared.features.memory_reinterpret);
    assert!(declared.features.matmul.cmma.is_empty());
}
