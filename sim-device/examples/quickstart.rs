//! The README's example, compiled by `cargo test` so that it stays true.
//! Run: `cargo run -p lockstep-sim --example quickstart`

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments};
use lockstep_sim::{SimConfig, SimDevice};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = ComputeClient::new(SimDevice::new(SimConfig::new(42)));

    let mut k = KernelBuilder::new("double", [64, 1, 1]);
    let data = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.clone().lt(data.len()), |k| {
        k.store(data, i.clone(), data.load(i) * 2.0f32)
    });
    let double = Kernel::new(k.build()?)?;

    let handle = client.create(Bytes::from_elems(&[1.0f32, 2.0, 3.0]))?;
    client.launch(
        &double,
        CubeCount::Static(1, 1, 1),
        KernelArguments::new().binding(&handle),
    )?;
    assert_eq!(
        client.read_one(handle)?.to_elems::<f32>(),
        vec![2.0, 4.0, 6.0]
    );
    println!("doubled on the simulator");
    Ok(())
}
