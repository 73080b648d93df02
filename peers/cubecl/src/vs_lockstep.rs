//! cubecl kernels through Lockstep's CUDA device (`lockstep_cubecl::LockstepRuntime<Cuda>`)
//! beside cubecl-cuda's own runtime, in one run on one GPU (issue 34's speed table):
//!
//! - launches per second of an empty kernel (the figure `launches` of the peer table);
//! - a reduction: 64 Mi `f32` (256 MiB) summed into one partial per cube of 256 units, each
//!   unit adding 16 strided elements, then a tree in shared memory;
//! - a product: 2048×2048 `f32` matrices, tiled 16×16 through shared memory.
//!
//! Each kernel runs in both of cubecl's modes: `launch` (checked: cubecl-cuda clamps indices
//! into runtime arrays, Lockstep guards every access, shared memory included, and reports the
//! first fault) and `launch_unchecked` (no guards on either side; how cubecl's own libraries
//! launch their kernels). Each kernel's time is the median over batches of [`BATCH`] launches
//! and one `sync` on the host clock, divided by the batch, after warm-ups: the kernel's
//! throughput in a pipeline, with one launch's host cost hidden behind the previous kernel as
//! in real use (the launch figure measures that cost alone). Both runtimes' results are checked
//! against the host's. `cubecl-peer lockstep-kernels` runs the kernels alone, for a profiler
//! (`ncu`), and prints an empty kernel's launch and sync latencies. `cubecl-peer lockstep-smoke`
//! runs the same kernels, small, on Lockstep's simulator (no GPU): what CI's machine can run.

use std::time::Instant;

use cubecl::bytes::Bytes;
use cubecl::prelude::*;
use cubecl_runtime::runtime::Runtime;
use lockstep_cubecl::LockstepRuntime;

use crate::{launches, sync};

/// Units per cube of the reduction, and elements each unit adds before the tree.
const BLOCK: usize = 256;
const PER_UNIT: usize = 16;
/// The product's tile edge.
const TILE: usize = 16;
const KERNEL_REPS: usize = 11;

#[cube(launch, launch_unchecked)]
fn block_sums(input: &[f32], output: &mut [f32]) {
    let mut partial = Shared::new_slice(256usize);
    let unit = UNIT_POS as usize;
    let base = CUBE_POS_X as usize * 4096;
    let mut acc = 0.0f32;
    for k in 0..16usize {
        acc += input[base + k * 256 + unit];
    }
    partial[unit] = acc;
    sync_cube();
    let mut stride = 128usize;
    while stride > 0 {
        if unit < stride {
            partial[unit] += partial[unit + stride];
        }
        sync_cube();
        stride /= 2;
    }
    if unit == 0 {
        output[CUBE_POS_X as usize] = partial[0];
    }
}

#[cube(launch, launch_unchecked)]
fn tiled_product(a: &[f32], b: &[f32], c: &mut [f32], n: u32) {
    let mut a_tile = Shared::new_slice(256usize);
    let mut b_tile = Shared::new_slice(256usize);
    let (tx, ty) = (UNIT_POS_X, UNIT_POS_Y);
    let row = CUBE_POS_Y * 16 + ty;
    let col = CUBE_POS_X * 16 + tx;
    let mut acc = 0.0f32;
    let mut t = 0u32;
    while t < n {
        a_tile[(ty * 16 + tx) as usize] = a[(row * n + t + tx) as usize];
        b_tile[(ty * 16 + tx) as usize] = b[((t + ty) * n + col) as usize];
        sync_cube();
        for k in 0..16u32 {
            acc += a_tile[(ty * 16 + k) as usize] * b_tile[(k * 16 + tx) as usize];
        }
        sync_cube();
        t += 16;
    }
    c[(row * n + col) as usize] = acc;
}

/// Sizes: the GPU's, or the smoke test's.
#[derive(Clone, Copy)]
struct Sizes {
    reduce_elems: usize,
    product_n: usize,
}

const GPU: Sizes = Sizes {
    reduce_elems: 64 << 20,
    product_n: 2048,
};
const SMOKE: Sizes = Sizes {
    reduce_elems: 4 * BLOCK * PER_UNIT,
    product_n: 32,
};

fn f32_bytes(values: &[f32]) -> Bytes {
    Bytes::from_elems(values.to_vec())
}

fn read_f32(client: &Client, handle: cubecl::server::Handle) -> Vec<f32> {
    let bytes = client.read_one(handle).expect("read");
    f32::from_bytes(&bytes).to_vec()
}

/// cubecl's launch modes, both measured.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Checked,
    Unchecked,
}

/// Launches per timed batch.
const BATCH: usize = 10;

/// Median seconds per launch over batches of [`BATCH`] launches and a `sync`, after warm-ups.
fn timed(client: &Client, launch: impl Fn()) -> f64 {
    launch();
    launch();
    sync(client);
    let mut samples: Vec<f64> = (0..KERNEL_REPS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..BATCH {
                launch();
            }
            sync(client);
            start.elapsed().as_secs_f64() / BATCH as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Inputs whose sums and products are exact in `f32`: small integers.
fn inputs(len: usize, salt: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7 + salt) % 5) as f32).collect()
}

/// The reduction's seconds, its partial sums checked against the host's.
#[allow(
    unsafe_code,
    reason = "launch_unchecked of a kernel whose accesses are in range for these sizes"
)]
fn reduction(client: &Client, sizes: Sizes, mode: Mode) -> f64 {
    let data = inputs(sizes.reduce_elems, 1);
    let cubes = sizes.reduce_elems / (BLOCK * PER_UNIT);
    let input = client.create(f32_bytes(&data));
    let output = client.empty(cubes * 4);
    let seconds = timed(client, || {
        // SAFETY (cubecl's contract): the handles hold the lengths given.
        let (i, o) = unsafe {
            (
                BufferArg::from_raw_parts(input.clone(), sizes.reduce_elems),
                BufferArg::from_raw_parts(output.clone(), cubes),
            )
        };
        let (count, dim) = (
            CubeCount::Static(cubes as u32, 1, 1),
            CubeDim::new_1d(BLOCK as u32),
        );
        match mode {
            Mode::Checked => block_sums::launch(client, count, dim, i, o),
            // SAFETY: cube c's units read input[c * 4096 .. (c + 1) * 4096], within the
            // `cubes * 4096` elements, and write output[c]; shared indices stay below 256.
            Mode::Unchecked => unsafe { block_sums::launch_unchecked(client, count, dim, i, o) },
        }
    });
    let expected: Vec<f32> = data
        .chunks(BLOCK * PER_UNIT)
        .map(|c| c.iter().sum())
        .collect();
    assert_eq!(read_f32(client, output), expected, "block sums");
    seconds
}

/// The product's seconds, its result checked against the host's on a sample of rows.
#[allow(
    unsafe_code,
    reason = "launch_unchecked of a kernel whose accesses are in range for these sizes"
)]
fn product(client: &Client, sizes: Sizes, mode: Mode) -> f64 {
    let n = sizes.product_n;
    let (a, b) = (inputs(n * n, 2), inputs(n * n, 3));
    let (ha, hb) = (client.create(f32_bytes(&a)), client.create(f32_bytes(&b)));
    let hc = client.empty(n * n * 4);
    let tiles = (n / TILE) as u32;
    let seconds = timed(client, || {
        // SAFETY (cubecl's contract): each handle holds n * n f32.
        let (la, lb, lc) = unsafe {
            (
                BufferArg::from_raw_parts(ha.clone(), n * n),
                BufferArg::from_raw_parts(hb.clone(), n * n),
                BufferArg::from_raw_parts(hc.clone(), n * n),
            )
        };
        let (count, dim) = (
            CubeCount::Static(tiles, tiles, 1),
            CubeDim::new_2d(TILE as u32, TILE as u32),
        );
        let n = n as u32;
        match mode {
            Mode::Checked => tiled_product::launch(client, count, dim, la, lb, lc, n),
            // SAFETY: n is a multiple of the tile, so every row, column and tile index stays
            // below n, every element index below n * n, and shared indices below 256.
            Mode::Unchecked => unsafe {
                tiled_product::launch_unchecked(client, count, dim, la, lb, lc, n)
            },
        }
    });
    let c = read_f32(client, hc);
    for row in (0..n).step_by(n / 8) {
        for col in 0..n {
            let want: f32 = (0..n).map(|k| a[row * n + k] * b[k * n + col]).sum();
            assert_eq!(c[row * n + col], want, "product at ({row}, {col})");
        }
    }
    seconds
}

/// One runtime's figures: launches/s, then reduction GB/s and product GFLOP/s checked, then
/// unchecked.
fn figures(client: &Client, sizes: Sizes) -> [f64; 5] {
    let n = sizes.product_n as f64;
    let bandwidth = |mode| (sizes.reduce_elems * 4) as f64 / reduction(client, sizes, mode) / 1e9;
    let flops = |mode| 2.0 * n * n * n / product(client, sizes, mode) / 1e9;
    [
        launches(client),
        bandwidth(Mode::Checked),
        flops(Mode::Checked),
        bandwidth(Mode::Unchecked),
        flops(Mode::Unchecked),
    ]
}

const ROWS: [(&str, &str); 5] = [
    (
        "cubecl_launches",
        "launches of an empty cubecl kernel (launches/s)",
    ),
    ("cubecl_reduce", "block sums of 256 MiB of f32 (GB/s)"),
    ("cubecl_product", "2048x2048 f32 tiled product (GFLOP/s)"),
    (
        "cubecl_reduce_unchecked",
        "block sums, launch_unchecked (GB/s)",
    ),
    (
        "cubecl_product_unchecked",
        "tiled product, launch_unchecked (GFLOP/s)",
    ),
];

/// `cubecl-peer lockstep`: cubecl-cuda beside Lockstep's CUDA device, one table.
pub fn on_cuda() {
    let cuda = cubecl::Device::cuda(0).expect("a CUDA GPU").client();
    let ours = LockstepRuntime::<lockstep_cubecl::Cuda>::client(&Default::default());
    let theirs = figures(&cuda, GPU);
    let lockstep = figures(&ours, GPU);
    println!(
        "{:<50} {:>14} {:>14} {:>8}",
        "cubecl kernel, one H200", "cubecl-cuda", "Lockstep CUDA", "ratio"
    );
    for (((key, what), theirs), ours) in ROWS.iter().zip(theirs).zip(lockstep) {
        println!(
            "{what:<50} {theirs:>14.1} {ours:>14.1} {:>7.3}x",
            ours / theirs
        );
        println!("FIGURE\t{key}\tcubecl-cuda\t{theirs}");
        println!("FIGURE\t{key}\tlockstep-cuda\t{ours}");
    }
}

/// `cubecl-peer lockstep-kernels`: an empty kernel's launch and sync latencies, then the two
/// kernels in both modes on both runtimes without the launch loop, for a profiler to time each
/// kernel on the device (`ncu`).
pub fn kernels_on_cuda() {
    let cuda = cubecl::Device::cuda(0).expect("a CUDA GPU").client();
    let ours = LockstepRuntime::<lockstep_cubecl::Cuda>::client(&Default::default());
    for (name, client) in [("cubecl-cuda", &cuda), ("Lockstep CUDA", &ours)] {
        let [launch, wait] = round_trip(client);
        println!("{name}: empty kernel, launch {launch:.2} us, then sync {wait:.2} us (medians)");
    }
    for mode in [Mode::Checked, Mode::Unchecked] {
        for (name, client) in [("cubecl-cuda", &cuda), ("Lockstep CUDA", &ours)] {
            let reduce = reduction(client, GPU, mode) * 1e6;
            let multiply = product(client, GPU, mode) * 1e6;
            println!("{name}, {mode:?}: block sums {reduce:.1} us, product {multiply:.1} us");
        }
    }
}

/// Median microseconds of an empty kernel's launch call and of the `sync` after it.
fn round_trip(client: &Client) -> [f64; 2] {
    let out = client.empty(4);
    let (mut launch, mut wait) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        let start = Instant::now();
        crate::empty::launch(
            client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_single(),
            crate::one_u32(&out),
        );
        let launched = Instant::now();
        sync(client);
        launch.push((launched - start).as_secs_f64() * 1e6);
        wait.push(launched.elapsed().as_secs_f64() * 1e6);
    }
    [launch, wait].map(|mut samples| {
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    })
}

/// `cubecl-peer lockstep-smoke`: the kernels, small, on Lockstep's simulator, in both modes.
pub fn smoke() {
    let client = <LockstepRuntime>::client(&Default::default());
    for mode in [Mode::Checked, Mode::Unchecked] {
        reduction(&client, SMOKE, mode);
        product(&client, SMOKE, mode);
    }
    println!(
        "cubecl kernels on Lockstep's simulator, launch and launch_unchecked: block sums and \
         tiled product match the host"
    );
}
