//! Each kernel of this module run once on a client and checked against its reference: what
//! the `real_kernels` property runs per case and the `real_kernels` example runs once per
//! device. Inputs are drawn from a seed ([`uniform`]); each returns `Err` saying what differs.

use lockstep::kernel::Scalar;
use lockstep::{Bytes, ComputeClient, CubeCount, Device, Handle, Kernel, KernelArguments};

use super::layer_norm::{EPS, layer_norm, layer_norm_bounds};
use super::matmul::{grid, matmul, matmul_bounds};
use super::reduce::{reduce_sum, reduce_sum_host};
use super::softmax::{softmax, softmax_bounds};
use super::{check_within, uniform};

/// A handle holding `v`; `Err` says the create failed and why.
pub fn create<D: Device, T: bytemuck::NoUninit>(
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

/// Launches `kernel` over `groups` (x, y) workgroups with `bindings` and `params`; `Err`
/// names the kernel and why the launch was refused.
pub fn launch<D: Device>(
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
pub fn reduce<D: Device>(
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

/// The row softmax of `rows`×`cols` values in [-8, 8], within [`softmax_bounds`].
pub fn softmax_rows<D: Device>(
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

/// The layer norm of `rows`×`cols` values in [-4, 4], within [`layer_norm_bounds`].
pub fn layer_norm_rows<D: Device>(
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

/// The tiled product of an `m`×`k` and a `k`×`n` matrix of values in [-1, 1], within
/// [`matmul_bounds`].
pub fn product<D: Device>(
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
