//! The kernels that do real work, once each on one device, checked against their references:
//! the two-pass reduction (bit for bit), a row softmax, a layer norm and the tiled matrix
//! product (within their derived bounds; see `lockstep_kernels::ops`).
//!
//! Run: `cargo run --release -p lockstep-bench --example real_kernels [-- sim|wgpu|cuda]`

use lockstep::{ComputeClient, Device};
use lockstep_cuda::CudaDevice;
use lockstep_kernels::ops::check::{layer_norm_rows, product, reduce, softmax_rows};
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

const SEED: u64 = 15;

fn run<D: Device>(c: ComputeClient<D>) -> Result<(), Box<dyn std::error::Error>> {
    let name = c.properties().name.clone();
    let checks: [(&str, Result<(), String>); 4] = [
        (
            "reduce_sum_f32 of 1,000,003 values, 64 + 1 workgroups (bit-exact)",
            reduce(&c, SEED, (1_000_003, 64)),
        ),
        ("row_softmax of 5×1000", softmax_rows(&c, SEED, 5, 1000)),
        ("layer_norm of 5×1000", layer_norm_rows(&c, SEED, 5, 1000)),
        ("matmul 300×150·150×200", product(&c, SEED, (300, 200, 150))),
    ];
    for (what, result) in checks {
        result.map_err(|e| format!("{what} on {name}: {e}"))?;
        println!("{what}: matches the reference on {name}");
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    match std::env::args().nth(1).as_deref().unwrap_or("sim") {
        "sim" => run(ComputeClient::new(SimDevice::new(SimConfig::new(SEED)))),
        "wgpu" => run(ComputeClient::new(WgpuDevice::new(
            WgpuOptions::from_env()?
        )?)),
        "cuda" => run(ComputeClient::new(CudaDevice::new(0)?)),
        other => Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
}
