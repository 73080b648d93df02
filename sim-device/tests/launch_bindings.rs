//! Which bindings a launch accepts: views of one packed allocation that share no byte, however
//! they are written to; never two that share a byte when one of them is writable.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{
    Bytes, ComputeClient, CopyDescriptor, CubeCount, IoError, Kernel, KernelArguments,
    MemoryLayoutDescriptor, MemoryLayoutStrategy, ServerOptions,
};
use lockstep_sim::{SimConfig, SimDevice};

/// `dst[i] = src[i] * 2` over `dst`'s length.
fn double() -> Kernel {
    let mut k = KernelBuilder::new("double", [4, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let src = k.binding(ElemType::U32, Access::Read);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(dst.len()), |k| k.store(dst, i, src.load(i) * 2u32));
    k.build().unwrap()
}

fn packed_pair(c: &ComputeClient<SimDevice>) -> Vec<CopyDescriptor> {
    let desc = || MemoryLayoutDescriptor::new(MemoryLayoutStrategy::Contiguous, vec![4], 4);
    c.empty_tensors(vec![desc(), desc()])
        .unwrap()
        .into_iter()
        .map(|l| CopyDescriptor::new(l.memory, vec![4], l.strides, 4))
        .collect()
}

/// The two tensors of one `create_tensors` packing were refused as "bindings share memory":
/// the check compared allocations, not byte ranges.
#[test]
fn two_tensors_of_one_packing_bind_to_one_launch() {
    let c = ComputeClient::inline(SimDevice::new(SimConfig::new(5)), ServerOptions::default());
    let tensors = packed_pair(&c);
    let (dst, src) = (&tensors[0], &tensors[1]);
    c.write_tensor(src.clone(), Bytes::from_elems(&[1u32, 2, 3, 4]))
        .unwrap();
    let args = KernelArguments::new()
        .binding(&dst.handle)
        .binding(&src.handle);
    c.launch(&double(), CubeCount::Static(1, 1, 1), args)
        .unwrap();
    let read: Vec<Vec<u32>> = c
        .read_tensor(tensors)
        .into_iter()
        .map(|b| b.to_elems())
        .collect();
    assert_eq!(read, vec![vec![2, 4, 6, 8], vec![1, 2, 3, 4]]);
    c.sync().unwrap();
}

#[test]
fn a_view_bound_twice_once_writable_is_still_refused() {
    let c = ComputeClient::inline(SimDevice::new(SimConfig::new(5)), ServerOptions::default());
    let tensors = packed_pair(&c);
    let view = &tensors[1].handle;
    let args = KernelArguments::new().binding(view).binding(view);
    let refused = c.launch(&double(), CubeCount::Static(1, 1, 1), args);
    assert!(
        matches!(&refused, Err(IoError::InvalidLaunch { reason, .. })
            if reason == "bindings 0 and 1 share memory and one of them is writable"),
        "{refused:?}"
    );
}
