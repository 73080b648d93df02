//! Kernels that do real work (`crate::ops`) compute their references on every device: the
//! reduction bit for bit, the softmax, layer norm and tiled matrix product within their stated
//! bounds, and a captured decode step replayed as a decode loop, each stage checked.

use lockstep::kernel::Scalar;
use lockstep::{
    Bytes, ComputeClient, CubeCount, Device, Handle, Kernel, KernelArguments, StreamId,
};
use proptest::prelude::*;

use super::{Failure, RunConfig, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use crate::ops::decode::{Dims, Weights, run_decode};
use crate::ops::layer_norm::{EPS, layer_norm, layer_norm_bounds};
use crate::ops::matmul::{grid, matmul, matmul_bounds};
use crate::ops::reduce::{reduce_sum, reduce_sum_host};
use crate::ops::softmax::{softmax, softmax_bounds};
use crate::ops::{check_within, uniform};

/// One case: sizes, and the seed every input is drawn from.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    reduce: (usize, usize),
    rows: usize,
    cols: usize,
    product: (usize, usize, usize),
    decode_steps: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        (0usize..3000, 1usize..4),
        1usize..4,
        1usize..300,
        (1usize..160, 1usize..160, 1usize..40),
        1usize..4,
    )
        .prop_map(|(seed, reduce, rows, cols, product, decode_steps)| Case {
            seed,
            reduce,
            rows,
            cols,
            product,
            decode_steps,
        })
}

pub(super) fn real_kernels<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(config, "real_kernels", case(), |case| {
        let session = factory.open(case.seed);
        let mut c = session.client.clone();
        reduce(&c, case.seed, case.reduce)?;
        softmax_rows(&c, case.seed, case.rows, case.cols)?;
        layer_norm_rows(&c, case.seed, case.rows, case.cols)?;
        product(&c, case.seed, case.product)?;
        // A graph replays on the stream it was captured on.
        c.set_stream(StreamId(0));
        let weights = Weights::generate(Dims::SMALL, case.seed);
        let first = (case.seed % Dims::SMALL.vocab as u64) as u32;
        run_decode(&c, &weights, first, case.decode_steps)?;
        expect_clean(&session)
    })
}

fn create<D: Device, T: bytemuck::NoUninit>(
    c: &ComputeClient<D>,
    v: &[T],
) -> Result<Handle, String> {
    c.create(Bytes::from_elems(v))
        .map_err(|e| format!("create: {e}"))
}

fn read<D: Device>(c: &ComputeClient<D>, h: &Handle) -> Result<Vec<f32>, String> {
    c.read_one(h.clone())
        .map(|b| b.to_elems())
        .map_err(|e| format!("read: {e}"))
}

fn launch<D: Device>(
    c: &ComputeClient<D>,
    kernel: &Kernel,
    groups: (usize, usize),
    bindings: &[&Handle],
    params: &[Scalar],
) -> Result<(), String> {
    let args = bindings
        .iter()
        .fold(KernelArguments::new(), |a, h| a.binding(h));
    let args = params.iter().fold(args, |a, &p| a.param(p));
    let count = CubeCount::Static(groups.0 as u32, groups.1 as u32, 1);
    c.launch(kernel, count, args)
        .map_err(|e| format!("launch of `{}`: {e}", kernel.name()))
}

/// Two launches of the reduction (`groups` partials, then their sum), bit for bit.
fn reduce<D: Device>(
    c: &ComputeClient<D>,
    seed: u64,
    (len, groups): (usize, usize),
) -> Result<(), String> {
    let values = uniform(seed, len, -1.0, 1.0);
    let kernel = reduce_sum();
    let input = create(c, &values)?;
    let partials = create(c, &vec![0.0f32; groups])?;
    let total = create(c, &[0.0f32])?;
    launch(c, &kernel, (groups, 1), &[&input, &partials], &[])?;
    launch(c, &kernel, (1, 1), &[&partials, &total], &[])?;
    let want = reduce_sum_host(&values, groups);
    let want_total = reduce_sum_host(&want, 1);
    let got = (read(c, &partials)?, read(c, &total)?);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    if (bits(&got.0), bits(&got.1)) != (bits(&want), bits(&want_total)) {
        return Err(format!(
            "reduce_sum of {len} values over {groups} workgroups: {got:?}, reference {:?}",
            (want, want_total)
        ));
    }
    Ok(())
}

fn softmax_rows<D: Device>(
    c: &ComputeClient<D>,
    seed: u64,
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    let values = uniform(seed ^ 1, rows * cols, -8.0, 8.0);
    let input = create(c, &values)?;
    let out = create(c, &vec![0.0f32; rows * cols])?;
    launch(
        c,
        &softmax(),
        (rows, 1),
        &[&input, &out],
        &[Scalar::U32(cols as u32)],
    )?;
    let bounds: Vec<_> = values.chunks(cols).flat_map(softmax_bounds).collect();
    check_within(
        &format!("softmax of {rows}×{cols}"),
        &read(c, &out)?,
        &bounds,
    )
}

fn layer_norm_rows<D: Device>(
    c: &ComputeClient<D>,
    seed: u64,
    rows: usize,
    cols: usize,
) -> Result<(), String> {
    let values = uniform(seed ^ 2, rows * cols, -4.0, 4.0);
    let gamma = uniform(seed ^ 3, cols, 0.5, 1.5);
    let beta = uniform(seed ^ 4, cols, -1.0, 1.0);
    let handles = [&values, &gamma, &beta].map(|v| create(c, v));
    let [input, g, b] = &handles;
    let (input, g, b) = (input.clone()?, g.clone()?, b.clone()?);
    let out = create(c, &vec![0.0f32; rows * cols])?;
    let params = [
        Scalar::U32(cols as u32),
        Scalar::F32(1.0 / cols as f32),
        Scalar::F32(EPS),
    ];
    launch(
        c,
        &layer_norm(),
        (rows, 1),
        &[&input, &g, &b, &out],
        &params,
    )?;
    let bounds: Vec<_> = values
        .chunks(cols)
        .flat_map(|row| layer_norm_bounds(row, &gamma, &beta, EPS))
        .collect();
    check_within(
        &format!("layer norm of {rows}×{cols}"),
        &read(c, &out)?,
        &bounds,
    )
}

fn product<D: Device>(
    c: &ComputeClient<D>,
    seed: u64,
    (m, n, k): (usize, usize, usize),
) -> Result<(), String> {
    let a = uniform(seed ^ 5, m * k, -1.0, 1.0);
    let b = uniform(seed ^ 6, k * n, -1.0, 1.0);
    let (ha, hb) = (create(c, &a)?, create(c, &b)?);
    let out = create(c, &vec![0.0f32; m * n])?;
    let params = [m, n, k].map(|x| Scalar::U32(x as u32));
    let (gx, gy) = grid(m as u32, n as u32);
    launch(
        c,
        &matmul(),
        (gx as usize, gy as usize),
        &[&ha, &hb, &out],
        &params,
    )?;
    let bounds = matmul_bounds(&a, &b, (m, n, k));
    check_within(&format!("matmul {m}×{k}·{k}×{n}"), &read(c, &out)?, &bounds)
}
