//! Helpers the simulator's client tests share.

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{ComputeClient, Kernel, StreamId};
use lockstep_sim::SimDevice;

/// A clone of `client` pinned to `StreamId(stream)`.
pub fn pinned(client: &ComputeClient<SimDevice>, stream: u64) -> ComputeClient<SimDevice> {
    let mut c = client.clone();
    c.set_stream(StreamId(stream));
    c
}

/// `data[i] += 1` over a `u32` binding, in workgroups of 4.
pub fn add_one() -> Kernel {
    let mut k = KernelBuilder::new("add_one", [4, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| {
        k.store(data, i, data.load(i) + 1u32);
    });
    k.build().unwrap()
}
