//! The real kernels' speed on one device, side by side in one run: the two-pass reduction's
//! bandwidth against a raw device-to-device copy (`Device::copy`, `cuMemcpyDtoDAsync` on CUDA,
//! on a device of its own), the tiled `f32` product's GFLOP/s at several shapes, and the decode
//! step's tokens per second through graph replay against eager launches. Every figure's result
//! is checked once against its reference before it is timed. Kernels run unchecked (no bounds
//! guards, `ServerOptions::kernel_checks` unchecked), as a tuned deployment would; the reduction
//! also runs checked, to show what the guards cost.
//!
//! `scripts/gpu/torch_baseline.py` measures PyTorch on the same shapes and the same model.
//!
//! Run: `cargo bench -p lockstep-bench --bench kernels [-- cuda|wgpu|sim [small]]`
//! (`sim`, or `small`: tiny sizes, a smoke test of the harness).

use std::time::Instant;

use lockstep::device::BufferSlice;
use lockstep::kernel::{KernelChecks, Scalar};
use lockstep::{Bytes, ComputeClient, CubeCount, Device, KernelArguments, ServerOptions, StreamId};
use lockstep_cuda::CudaDevice;
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_kernels::ops::decode::{DecodeModel, Dims, Weights, check_step};
use lockstep_kernels::ops::matmul::{grid, matmul, matmul_bounds};
use lockstep_kernels::ops::reduce::{reduce_sum, reduce_sum_host};
use lockstep_kernels::ops::{check_within, uniform};
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// What one run measures.
#[derive(Clone, Copy)]
struct Sizes {
    reduce_elems: usize,
    reduce_groups: usize,
    products: &'static [usize],
    decode: Dims,
    reps: usize,
    decode_reps: usize,
}

const GPU: Sizes = Sizes {
    reduce_elems: 1 << 28,
    reduce_groups: 2048,
    products: &[512, 1024, 2048, 4096],
    decode: Dims::BENCH,
    reps: 20,
    decode_reps: 2000,
};

/// The simulator's sizes, and any device's with `small`: a smoke test of the harness.
const SMALL: Sizes = Sizes {
    reduce_elems: 1 << 14,
    reduce_groups: 8,
    products: &[32, 64],
    decode: Dims::SMALL,
    reps: 2,
    decode_reps: 3,
};

/// Seconds per repetition of `f` (after one warm-up), `client` synced around the timed part.
fn time<D: Device>(
    client: &ComputeClient<D>,
    reps: usize,
    mut f: impl FnMut() -> Result<()>,
) -> Result<f64> {
    f()?;
    client.sync()?;
    let start = Instant::now();
    for _ in 0..reps {
        f()?;
    }
    client.sync()?;
    Ok(start.elapsed().as_secs_f64() / reps as f64)
}

/// GB/s of the two-pass reduction over `s.reduce_elems` values (bytes read), checked bit for
/// bit once.
fn reduction<D: Device>(client: &ComputeClient<D>, s: &Sizes) -> Result<f64> {
    let values = uniform(1, s.reduce_elems, -1.0, 1.0);
    let input = client.create(Bytes::from_elems(&values))?;
    let partials = client.create(Bytes::from_elems(&vec![0.0f32; s.reduce_groups]))?;
    let total = client.create(Bytes::from_elems(&[0.0f32]))?;
    let kernel = reduce_sum();
    let run = || -> Result<()> {
        let args = KernelArguments::new().binding(&input).binding(&partials);
        client.launch(
            &kernel,
            CubeCount::Static(s.reduce_groups as u32, 1, 1),
            args,
        )?;
        let args = KernelArguments::new().binding(&partials).binding(&total);
        client.launch(&kernel, CubeCount::Static(1, 1, 1), args)?;
        Ok(())
    };
    let seconds = time(client, s.reps, run)?;
    let got = client.read_one(total)?.to_elems::<f32>()[0];
    let want = reduce_sum_host(&reduce_sum_host(&values, s.reduce_groups), 1)[0];
    if got.to_bits() != want.to_bits() {
        return Err(format!("the reduction gave {got:e}, the reference {want:e}").into());
    }
    Ok((s.reduce_elems * 4) as f64 / seconds / 1e9)
}

/// GB/s (bytes read plus bytes written) of device-to-device copies of `bytes`, on `device`
/// directly.
fn raw_copy<D: Device>(mut device: D, bytes: u64, reps: usize) -> Result<f64> {
    let stream = device.create_stream()?;
    let (src, dst) = (device.allocate(bytes)?, device.allocate(bytes)?);
    device.write(stream, &src, 0, &vec![0u8; bytes as usize])?;
    let slice = BufferSlice {
        buffer: &src,
        offset: 0,
        len: bytes,
    };
    let copy = |device: &mut D| device.copy(stream, BufferSlice { ..slice }, &dst, 0);
    copy(&mut device)?;
    device.synchronize(stream)?;
    let start = Instant::now();
    for _ in 0..reps {
        copy(&mut device)?;
    }
    device.synchronize(stream)?;
    let seconds = start.elapsed().as_secs_f64() / reps as f64;
    device.free(src);
    device.free(dst);
    Ok(2.0 * bytes as f64 / seconds / 1e9)
}

/// GFLOP/s of the tiled product of two `side`×`side` matrices, checked once.
fn product<D: Device>(client: &ComputeClient<D>, side: usize, reps: usize) -> Result<f64> {
    let (a, b) = (
        uniform(2, side * side, -1.0, 1.0),
        uniform(3, side * side, -1.0, 1.0),
    );
    let (ha, hb) = (
        client.create(Bytes::from_elems(&a))?,
        client.create(Bytes::from_elems(&b))?,
    );
    let c = client.create(Bytes::from_elems(&vec![0.0f32; side * side]))?;
    let kernel = matmul();
    let (x, y) = grid(side as u32, side as u32);
    let run = || -> Result<()> {
        let args = KernelArguments::new().binding(&ha).binding(&hb).binding(&c);
        let args = [side; 3]
            .iter()
            .fold(args, |a, &d| a.param(Scalar::U32(d as u32)));
        client.launch(&kernel, CubeCount::Static(x, y, 1), args)?;
        Ok(())
    };
    let seconds = time(client, reps, run)?;
    let got: Vec<f32> = client.read_one(c)?.to_elems();
    // One row of the result, checked against its bound: the whole reference costs side³ on the host.
    let row: Vec<_> = matmul_bounds(&a[..side], &b, (1, side, side));
    check_within(&format!("matmul {side}³ row 0"), &got[..side], &row)?;
    Ok(2.0 * (side as f64).powi(3) / seconds / 1e9)
}

/// Tokens per second of the decode step: graph replays, then eager launches. The first step
/// is checked stage by stage.
fn decode<D: Device>(client: &mut ComputeClient<D>, s: &Sizes) -> Result<(f64, f64)> {
    client.set_stream(StreamId(0));
    let weights = Weights::generate(s.decode, 7);
    client.graph_prepare()?;
    let model = DecodeModel::upload(client, &weights, 1, 1)?;
    model.launch_step(client)?;
    check_step(&weights, 1, &model.read_stages(client)?)?;
    client.start_capture()?;
    model.launch_step(client)?;
    let step = client.stop_capture()?;
    let replay = time(client, s.decode_reps, || {
        step.replay();
        Ok(())
    })?;
    let eager = time(client, s.decode_reps, || Ok(model.launch_step(client)?))?;
    Ok((1.0 / replay, 1.0 / eager))
}

fn measure<D: Device>(open: impl Fn() -> Result<D>, s: &Sizes) -> Result<()> {
    let unchecked = ServerOptions {
        // SAFETY: this client launches only the ops kernels, each over buffers sized for the
        // shape it is launched with (`Sizes`): every index they compute is then in range, as
        // their checked runs on the simulator show (`lockstep check`'s ops properties, and this
        // bench's `sim` run, which checks each result before timing it).
        kernel_checks: unsafe { KernelChecks::unchecked() },
        ..ServerOptions::default()
    };
    let mut client = ComputeClient::with_options(open()?, unchecked);
    let checked = ComputeClient::new(open()?);
    let props = client.properties();
    println!("device: {} ({})", props.name, props.backend);
    // The reduction's input is one allocation: no larger than the device allows (wgpu caps a
    // storage binding), a power of two of elements.
    let fits = (props.max_allocation_bytes / 4).max(1);
    let s = &Sizes {
        reduce_elems: s.reduce_elems.min(1 << fits.ilog2()),
        ..*s
    };
    let gib = (s.reduce_elems * 4) as f64 / (1u64 << 30) as f64;
    let copy = raw_copy(open()?, (s.reduce_elems * 4) as u64, s.reps)?;
    let reduce = reduction(&client, s)?;
    let reduce_checked = reduction(&checked, s)?;
    drop(checked);
    println!(
        "reduction of {gib:.2} GiB of f32 ({} + 1 workgroups):",
        s.reduce_groups
    );
    println!("  reduce_sum_f32, unchecked   {reduce:>10.1} GB/s read");
    println!("  reduce_sum_f32, checked     {reduce_checked:>10.1} GB/s read");
    println!("  raw device-to-device copy   {copy:>10.1} GB/s read + written");
    println!(
        "  ratio reduction/copy        {:>10.2} (goal >= 0.80)",
        reduce / copy
    );
    println!("tiled f32 matmul (m = n = k), unchecked:");
    for &side in s.products {
        let reps = (s.reps * 512 / side).clamp(2, s.reps);
        let gflops = product(&client, side, reps)?;
        println!("  {side:>5}³                      {gflops:>10.1} GFLOP/s");
    }
    let (replay, eager) = decode(&mut client, s)?;
    let Dims {
        model,
        hidden,
        vocab,
    } = s.decode;
    println!("decode step (model {model}, hidden {hidden}, vocab {vocab}; 7 launches), unchecked:");
    println!("  graph replay                {replay:>10.0} tokens/s");
    println!("  eager launches              {eager:>10.0} tokens/s");
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let sizes = if args.get(1).is_some_and(|a| a == "small") {
        &SMALL
    } else {
        &GPU
    };
    match args.first().map_or("cuda", String::as_str) {
        "sim" => measure(|| Ok(SimDevice::new(SimConfig::new(0))), &SMALL),
        "wgpu" => measure(|| Ok(WgpuDevice::new(WgpuOptions::from_env()?)?), sizes),
        "cuda" => match CudaDevice::new(0) {
            Ok(_) => measure(|| Ok(CudaDevice::new(0)?), sizes),
            Err(e) => {
                cannot_run(Need::CudaGpu, "kernels bench", &e.to_string());
                Ok(())
            }
        },
        other => Err(format!("unknown device `{other}`: use cuda, wgpu or sim").into()),
    }
}
