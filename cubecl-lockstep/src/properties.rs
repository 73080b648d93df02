//! What the adapter declares to cubecl: Lockstep's device properties in cubecl's terms.
//!
//! A pure function of Lockstep's [`DeviceProperties`], so the declaration is the device's and
//! unit-tested here. cubecl's suite reads it to decide what to run: a type or atomic usage
//! left undeclared makes its tests return early (they pass without running a kernel), so the
//! declaration says only what the translator can serve or refuses by name:
//! - address type `u32`; every usage of `u32`, `i32`, `f32` (and `Flex32`, `Index`, `bool`);
//! - the 8-bit floats `E4M3`, `E5M2`, `UE8M0` for conversion only, packed four to a `u32`
//!   word, as cubecl-wgpu declares them;
//! - every atomic on `u32` and `i32` (load, store, exchange, compare-exchange, add, sub, min,
//!   max, and, or, xor), none on floats (the IR's atomics are on integers);
//! - no planes, matrix units, tensor memory accelerator, clusters or memory reinterpretation;
//! - limits from Lockstep's properties (shared memory, workgroup counts, allocation size,
//!   alignment, memory), 1024 invocations per workgroup, vectors of up to 4 lanes;
//! - `num_cpu_cores: None`: Lockstep enforces the launch limits a GPU does.

use cubecl_common::profile::TimingMethod;
use cubecl_ir::features::{AtomicUsage, Features, TypeUsage};
use cubecl_ir::{
    AddressType, DeviceIdentity, DeviceProperties as CubeclProperties, ElemType, FloatKind,
    HardwareProperties, IntKind, MemoryDeviceProperties, Type, UIntKind,
};
use lockstep::DeviceProperties;
use lockstep::kernel::MAX_WORKGROUP_INVOCATIONS;

/// Invocations per workgroup along any axis: every device takes 1024 in all.
const MAX_CUBE_DIM: u32 = 1024;

/// cubecl's properties of a Lockstep device with `properties`.
pub fn cubecl_properties(properties: &DeviceProperties) -> CubeclProperties {
    let mut declared = CubeclProperties::new(
        Features::default(),
        memory(properties),
        hardware(properties),
        TimingMethod::System,
        identity(properties),
    );
    declared.register_address_type(AddressType::U32);
    for elem in full_types() {
        declared.register_type_usage(elem, TypeUsage::all());
    }
    for kind in [FloatKind::E4M3, FloatKind::E5M2, FloatKind::UE8M0] {
        declared.register_type_usage(ElemType::Float(kind), TypeUsage::Conversion);
    }
    for elem in [ElemType::UInt(UIntKind::U32), ElemType::Int(IntKind::I32)] {
        declared.register_atomic_type_usage(Type::atomic(elem), AtomicUsage::all());
    }
    declared
}

/// The types kernels may use in every way.
fn full_types() -> [ElemType; 6] {
    [
        ElemType::Index,
        ElemType::UInt(UIntKind::U32),
        ElemType::Int(IntKind::I32),
        ElemType::Float(FloatKind::F32),
        ElemType::Float(FloatKind::Flex32),
        ElemType::Bool,
    ]
}

fn memory(properties: &DeviceProperties) -> MemoryDeviceProperties {
    MemoryDeviceProperties::new(properties.max_allocation_bytes, properties.alignment_bytes)
        .with_max_memory(properties.memory_bytes)
}

fn hardware(properties: &DeviceProperties) -> HardwareProperties {
    let [x, y, z] = properties.max_workgroups;
    HardwareProperties {
        load_width: 128,
        vector_register_count: None,
        plane_size_min: 32,
        plane_size_max: 32,
        max_bindings: 31,
        max_shared_memory_size: properties.max_shared_memory_bytes as usize,
        max_cube_count: (x, y, z),
        max_units_per_cube: MAX_WORKGROUP_INVOCATIONS as u32,
        max_cube_dim: (MAX_CUBE_DIM, MAX_CUBE_DIM, MAX_CUBE_DIM),
        num_streaming_multiprocessors: None,
        num_cpu_cores: None,
        last_level_cache_size: None,
        num_tensor_cores: None,
        min_tensor_cores_dim: None,
        max_vector_size: 4,
        cube_mma_reserved_shared_memory: 0,
    }
}

fn identity(properties: &DeviceProperties) -> DeviceIdentity {
    DeviceIdentity {
        name: properties.name.clone(),
        fingerprint: format!(
            "lockstep-{}-{}",
            properties.backend,
            env!("CARGO_PKG_VERSION")
        ),
        physical: None,
    }
}

#[cfg(test)]
mod tests;
