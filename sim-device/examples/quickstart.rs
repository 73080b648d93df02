//! The README's example, compiled by `cargo test` so that it stays true.
//! Run: `cargo run -p lockstep-sim --example quickstart`

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CopyDescriptor, CubeCount, KernelArguments};
use lockstep_sim::{SimConfig, SimDevice};

// Every call's own error type converts into `lockstep::Error`, so `?` chains them.
fn main() -> Result<(), lockstep::Error> {
    let client = ComputeClient::new(SimDevice::new(SimConfig::new(42)));

    // data[i] *= 2, in workgroups of 64; the last workgroup may run past the end.
    let mut k = KernelBuilder::new("double", [64, 1, 1]);
    let data = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(data.len()), |k| {
        k.store(data, i, data.load(i) * 2.0f32)
    });
    let double = k.build()?;

    let handle = client.create(Bytes::from_elems(&[1.0f32, 2.0, 3.0]))?;
    let grid = CubeCount::covering(3, 64)?;
    client.launch(&double, grid, KernelArguments::new().binding(&handle))?;
    assert_eq!(
        client.read_one(handle)?.to_elems::<f32>(),
        vec![2.0, 4.0, 6.0]
    );

    // A 2 x 3 tensor: the runtime may pad its rows, so write and read it with its strides.
    let layout = client.empty_tensor(&[2, 3], 4)?;
    let tensor = CopyDescriptor::new(layout.memory, vec![2, 3], layout.strides, 4);
    let rows = Bytes::from_elems(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]);
    client.write_tensor(tensor.clone(), rows)?;
    let read = client.read_one_tensor_async(tensor);
    assert_eq!(
        lockstep::block_on(read)?.to_elems::<f32>(),
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    // Work of every thread's stream is done, and none failed.
    client.sync_all()?;
    println!("doubled and wrote a pitched tensor on the simulator");
    Ok(())
}
