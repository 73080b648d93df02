//! A decode loop on a captured graph: a tiny language model's step (embedding lookup, layer
//! norm, a `tanh` MLP with a residual, the vocabulary projection, softmax and argmax; see
//! `lockstep_kernels::ops::decode`) runs once eagerly, is captured once, then replays;
//! each replay feeds the token it picked to the next, on the device. Every step's stages are
//! read back and checked against their references.
//!
//! Run: `cargo run --release -p lockstep-bench --example decode_loop [-- sim|wgpu|cuda]`

use lockstep::{ComputeClient, Device, StreamId};
use lockstep_cuda::CudaDevice;
use lockstep_kernels::ops::decode::{Dims, Weights, run_decode};
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

const STEPS: usize = 8;
const SEED: u64 = 7;

fn decode<D: Device>(mut client: ComputeClient<D>) -> Result<(), Box<dyn std::error::Error>> {
    // Graphs replay on the stream they were captured on: pin the client to one.
    client.set_stream(StreamId(0));
    let weights = Weights::generate(Dims::SMALL, SEED);
    let tokens = run_decode(&client, &weights, 1, STEPS)?;
    println!("tokens: {tokens:?}");
    println!(
        "{STEPS} steps ({} replays) on {} matched their references at every stage",
        STEPS - 1,
        client.properties().name
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::args().nth(1).as_deref().unwrap_or("sim") {
        "sim" => decode(ComputeClient::new(SimDevice::new(SimConfig::new(0)))),
        "wgpu" => decode(ComputeClient::new(WgpuDevice::new(
            WgpuOptions::from_env()?
        )?)),
        "cuda" => decode(ComputeClient::new(CudaDevice::new(0)?)),
        other => Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
}
