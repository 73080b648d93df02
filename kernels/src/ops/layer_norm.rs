//! Layer normalisation, one workgroup per row: the mean, the variance about it, then
//! `(x - mean) · rsqrt(var + eps) · gamma + beta`.

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Value};

use super::block::{Fold, fold_workgroup, lane_fold, sum_chain};
use super::{U, build};

/// Invocations per workgroup (one workgroup per row).
pub const LANES: u32 = 128;
/// The `eps` the examples and the property use.
pub const EPS: f32 = 1e-5;

/// Row `r` of `out` is row `r` of `input` normalised, scaled by `gamma` and shifted by `beta`
/// (both `cols` long), for the rows the launch has workgroups for. The mean and variance
/// multiply their sums by `inv_cols` (`1 / cols`, rounded on the host), so only `rsqrt` is
/// inexact. Bindings: `input` (read), `gamma` (read), `beta` (read), `out`; parameters: `cols`
/// (`u32`, at least 1), `inv_cols` (`f32`), `eps` (`f32`).
pub fn layer_norm() -> Kernel {
    let mut k = KernelBuilder::new("layer_norm", [LANES, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let gamma = k.binding(ElemType::F32, Access::Read);
    let beta = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let cols = k.param(ElemType::U32);
    let inv_cols = k.param(ElemType::F32);
    let eps = k.param(ElemType::F32);
    let tree = k.shared(ElemType::F32, LANES);
    let lane = k.local_id(Axis::X);
    let base = k.var(ElemType::U32, k.workgroup_id(Axis::X) * cols);
    let x = |c: Value| input.load(base.get() + c);
    let sum = lane_fold(&mut k, lane, LANES, cols, 0.0, Fold::Sum, x);
    let sum = fold_workgroup(&mut k, tree, lane, LANES, sum.get(), Fold::Sum);
    let mean = k.var(ElemType::F32, sum.get() * inv_cols);
    let centred = |c: Value| x(c) - mean.get();
    let square = |c: Value| centred(c) * centred(c);
    let sq = lane_fold(&mut k, lane, LANES, cols, 0.0, Fold::Sum, square);
    let sq = fold_workgroup(&mut k, tree, lane, LANES, sq.get(), Fold::Sum);
    let rstd = k.var(ElemType::F32, (sq.get() * inv_cols + eps).rsqrt());
    let c = k.var(ElemType::U32, lane);
    k.while_(c.get().lt(cols), |k| {
        let y = centred(c.get()) * rstd.get() * gamma.load(c.get()) + beta.load(c.get());
        k.store(out, base.get() + c.get(), y);
        k.assign(c, c.get() + LANES);
    });
    build(k)
}

/// For each element of one row, its exact layer norm and how far a device may be from it.
///
/// Exact in `f64`: `t = x - μ`, `σ² = mean(t²)`, `r = 1/√(σ² + eps)`, `a = t·r·γ`, `y = a + β`.
/// Each `f32` operation rounds at most once (`u = 2⁻²⁴` relative; a fused multiply-add only
/// removes roundings). Over a sum chain of `L` additions ([`sum_chain`]), with `inv_cols` and
/// the product rounded, the mean is within `δμ = (L + 2)·u·mean|x|`; the variance within
/// `(L + 5)·u·σ² + δμ²` (`δμ` enters only squared, as `Σt = 0`), so `σ² + eps` within
/// `v = ((L + 5)·u·σ² + δμ²)/(σ² + eps)` relative, with one more
/// rounding; `rsqrt` is within 2 ULP (`4u`), so `r` is within `(v + u)/2 + 4u`. Then
/// `|y' - y| ≤ (r·|γ|·(δμ + u·|t|) + |a|·((v + u)/2 + 4u + 2u) + u·(|a| + |β|))·1.01`, the
/// factor covering second-order terms.
pub fn layer_norm_bounds(row: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Vec<(f64, f64)> {
    let n = row.len() as f64;
    let mean = row.iter().map(|&x| x as f64).sum::<f64>() / n;
    let mean_abs = row.iter().map(|&x| (x as f64).abs()).sum::<f64>() / n;
    let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    let r = 1.0 / (var + eps as f64).sqrt();
    let chain = sum_chain(row.len(), LANES) as f64;
    let mean_error = (chain + 2.0) * U * mean_abs;
    let var_rel = ((chain + 5.0) * U * var + mean_error * mean_error) / (var + eps as f64);
    let r_rel = (var_rel + U) / 2.0 + 4.0 * U;
    row.iter()
        .zip(gamma.iter().zip(beta))
        .map(|(&x, (&g, &b))| {
            let t = x as f64 - mean;
            let a = t * r * g as f64;
            let bound = r * (g as f64).abs() * (mean_error + U * t.abs())
                + a.abs() * (r_rel + 2.0 * U)
                + U * (a.abs() + (b as f64).abs());
            (a + b as f64, bound * 1.01)
        })
        .collect()
}
