//! A row softmax, one workgroup per row: the row's maximum, the sum of `exp(x - max)`, then
//! `exp(x - max) / sum`, each fold through [`fold_workgroup`].

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Value};

use super::block::{
    Fold, fold_workgroup, fold_workgroup_host, lane_fold, lane_fold_host, sum_chain,
};
use super::{U, build};

/// Invocations per workgroup (one workgroup per row).
pub const LANES: u32 = 128;

/// `out[r·cols + c] = exp(x - m) / Σ exp(x' - m)` over row `r` of `input` (`m` its maximum),
/// for the `rows` rows the launch has workgroups for. Bindings: `input` (read), `out`;
/// parameter: `cols` (`u32`, at least 1).
pub fn softmax() -> Kernel {
    let mut k = KernelBuilder::new("row_softmax", [LANES, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let cols = k.param(ElemType::U32);
    let tree = k.shared(ElemType::F32, LANES);
    let lane = k.local_id(Axis::X);
    let base = k.var(ElemType::U32, k.workgroup_id(Axis::X) * cols);
    let x = |c: Value| input.load(base.get() + c);
    let m = lane_fold(&mut k, lane, LANES, cols, -f32::MAX, Fold::Max, x);
    let m = fold_workgroup(&mut k, tree, lane, LANES, m.get(), Fold::Max);
    let e = |c: Value| (x(c) - m.get()).exp();
    let s = lane_fold(&mut k, lane, LANES, cols, 0.0, Fold::Sum, e);
    let s = fold_workgroup(&mut k, tree, lane, LANES, s.get(), Fold::Sum);
    let c = k.var(ElemType::U32, lane);
    k.while_(c.get().lt(cols), |k| {
        k.store(out, base.get() + c.get(), e(c.get()) / s.get());
        k.assign(c, c.get() + LANES);
    });
    build(k)
}

/// For each element of one row, its exact softmax and how far a device may be from it.
///
/// The row's maximum `m` and each `d = x - m` are exact operations, so every device has the
/// same ones. `exp(d)` is within `(3 + 2|d|)` ULP, at most `eₘ = (3 + 2·max|d|)·2⁻²³` relative;
/// the sum of positive terms adds at most one rounding (`2⁻²⁴`) per addition on its longest
/// chain (`L`, [`sum_chain`]); the quotient is within 2.5 ULP. So the result is within
/// `(e(d) + eₘ + L·2⁻²⁴ + 2.5·2⁻²³)·1.001` relative (the factor covers second-order terms)
/// plus the smallest normal `f32` (a device may flush subnormal results to zero).
pub fn softmax_bounds(row: &[f32]) -> Vec<(f64, f64)> {
    let m = fold_workgroup_host(lane_fold_host(row, LANES, -f32::MAX, Fold::Max), Fold::Max);
    let d: Vec<f32> = row.iter().map(|&x| x - m).collect();
    let exact: Vec<f64> = d.iter().map(|&d| libm::exp(d as f64)).collect();
    let sum: f64 = exact.iter().sum();
    let exp_rel = |d: f32| (3.0 + 2.0 * d.abs() as f64) * 2.0 * U;
    let worst = d.iter().map(|&d| exp_rel(d)).fold(0.0, f64::max);
    let sum_rel = worst + sum_chain(row.len(), LANES) as f64 * U;
    d.iter()
        .zip(&exact)
        .map(|(&d, &e)| {
            let p = e / sum;
            let rel = (exp_rel(d) + sum_rel + 5.0 * U) * 1.001;
            (p, p * rel + f32::MIN_POSITIVE as f64)
        })
        .collect()
}
