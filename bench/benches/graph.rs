//! Kernels per second of a 100-launch sequence: eager launches vs replays of the same sequence
//! captured as a graph, in one run, on one device.
//!
//! Run: `cargo bench -p lockstep-bench --bench graph [-- sim|wgpu|cuda] [ROUNDS]`

use std::time::Instant;

use lockstep::kernel::{Access, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Kernel, KernelArguments, StreamId};
use lockstep_cuda::CudaDevice;
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

const LAUNCHES: u32 = 100;

/// A kernel that does nothing with its one binding: the cost measured is the launch path.
fn empty_kernel() -> Kernel {
    let mut k = KernelBuilder::new("empty", [1, 1, 1]);
    k.binding(ElemType::U32, Access::ReadWrite);
    k.build().expect("valid")
}

/// Measures on `client`, whose device the command line named `device` (sim, wgpu or cuda).
fn measure<D: Device>(
    client: ComputeClient<D>,
    device: &str,
    rounds: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut client = client;
    client.set_stream(StreamId(0));
    let kernel = empty_kernel();
    client.graph_prepare()?;
    let buffer = client.create(Bytes::from_elems(&[0u32]))?;
    let launch_all = || -> Result<(), lockstep::IoError> {
        for _ in 0..LAUNCHES {
            let args = KernelArguments::new().binding(&buffer);
            client.launch(&kernel, CubeCount::Static(1, 1, 1), args)?;
        }
        Ok(())
    };
    launch_all()?;
    client.sync()?;

    let start = Instant::now();
    for _ in 0..rounds {
        launch_all()?;
    }
    client.sync()?;
    let eager = (LAUNCHES * rounds) as f64 / start.elapsed().as_secs_f64();

    client.start_capture()?;
    launch_all()?;
    let graph = client.stop_capture()?;
    graph.replay();
    client.sync()?;
    let start = Instant::now();
    for _ in 0..rounds {
        graph.replay();
    }
    client.sync()?;
    let replay = (LAUNCHES * rounds) as f64 / start.elapsed().as_secs_f64();

    println!(
        "device: {} ({})",
        client.properties().name,
        client.properties().backend
    );
    println!("{LAUNCHES}-launch sequence, {rounds} rounds:");
    println!("  eager launches:  {eager:>12.0} kernels/s");
    println!("  graph replays:   {replay:>12.0} kernels/s");
    println!("  ratio replay/eager: {:>9.2}", replay / eager);
    // For scripts/gpu/peers_table.py, which sets the CUDA run beside cubecl's and PyTorch's.
    println!("FIGURE\tgraph_replay_100\tlockstep-{device}\t{replay}");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let device = args.first().map_or("sim", String::as_str);
    let rounds = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(200);
    match device {
        "sim" => measure(
            ComputeClient::new(SimDevice::new(SimConfig::new(0))),
            device,
            rounds,
        ),
        "wgpu" => measure(
            ComputeClient::new(WgpuDevice::new(WgpuOptions::from_env()?)?),
            device,
            rounds,
        ),
        "cuda" => measure(ComputeClient::new(CudaDevice::new(0)?), device, rounds),
        other => Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
}
