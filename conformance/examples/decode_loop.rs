//! A decode loop on a captured graph: capture one step's launches once, then replay them with a
//! fresh input each iteration, reading the output between replays.
//!
//! Run: `cargo run --release -p lockstep-conformance --example decode_loop [-- sim|wgpu|cuda]`

use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments, StreamId};
use lockstep_cuda::CudaDevice;
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

const WIDTH: usize = 256;
const STEPS: usize = 8;

/// `state[i] = state[i] * 0.5 + token[i]`: one "layer" of the step.
fn mix() -> Kernel {
    let mut k = KernelBuilder::new("mix", [64, 1, 1]);
    let state = k.binding(ElemType::F32, Access::ReadWrite);
    let token = k.binding(ElemType::F32, Access::Read);
    let i = k.global_id(Axis::X);
    k.if_(i.clone().lt(state.len()), |k| {
        k.store(
            state,
            i.clone(),
            state.load(i.clone()) * 0.5f32 + token.load(i),
        );
    });
    Kernel::new(k.build().expect("mix is valid")).expect("and validates")
}

fn decode<D: Device>(client: ComputeClient<D>) -> Result<(), Box<dyn std::error::Error>> {
    let mut client = client;
    // Graphs replay on the stream they were captured on: pin the client to one.
    client.set_stream(StreamId(0));
    let mix = mix();
    let launch = |state: &lockstep::Handle, token: &lockstep::Handle| {
        let args = KernelArguments::new().binding(state).binding(token);
        client.launch(&mix, CubeCount::Static((WIDTH / 64) as u32, 1, 1), args)
    };

    // Buffers the graph will own are allocated between graph_prepare and start_capture, and
    // the warm-up run compiles everything the step needs.
    client.graph_prepare()?;
    let state = client.create(Bytes::from_elems(&[0.0f32; WIDTH]))?;
    let token = client.create(Bytes::from_elems(&[0.0f32; WIDTH]))?;
    launch(&state, &token)?;
    client.sync()?;

    client.start_capture()?;
    launch(&state, &token)?;
    launch(&state, &token)?;
    let step = client.stop_capture()?;

    let mut expected = vec![0.0f32; WIDTH];
    for n in 0..STEPS {
        let fresh: Vec<f32> = (0..WIDTH).map(|i| (n * WIDTH + i) as f32 / 100.0).collect();
        client.write(&token, Bytes::from_elems(&fresh))?;
        step.replay();
        for _ in 0..2 {
            for (e, t) in expected.iter_mut().zip(&fresh) {
                *e = *e * 0.5 + t;
            }
        }
        let out = client.read_one(state.clone())?.to_elems::<f32>();
        assert_eq!(out, expected, "step {n} differs from eager execution");
        println!("step {n}: state[0..4] = {:?}", &out[..4]);
    }
    println!(
        "{STEPS} replays on {} matched eager execution",
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
