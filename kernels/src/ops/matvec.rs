//! The decode step's other kernels: a matrix–vector product with bias (optionally through
//! `tanh`, optionally plus a residual), an embedding lookup and an argmax.

use lockstep::Kernel;
use lockstep::kernel::accuracy::MathCall;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, UnaryOp};

use super::block::{Fold, fold_workgroup, sum_chain};
use super::{U, build};

/// Invocations per workgroup of the matrix–vector product (one workgroup per output row) and
/// of the argmax.
pub const LANES: u32 = 128;

/// What follows the product in [`matvec`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Epilogue {
    /// `y = W·x + bias`.
    Bias,
    /// `y = tanh(W·x + bias)`.
    Tanh,
    /// `y = W·x + bias + residual`.
    Residual,
}

/// `y[r]` for each row `r` the launch has workgroups for, `W` row-major with `len(x)` columns:
/// each invocation accumulates `fma(W[r][c], x[c], acc)` over its strided columns, the
/// workgroup sums them in a tree, and lane 0 applies the epilogue. Bindings: `w`, `x`, `bias`
/// (read), then `residual` (read) for [`Epilogue::Residual`], then `y`.
pub fn matvec(epilogue: Epilogue) -> Kernel {
    let name = match epilogue {
        Epilogue::Bias => "matvec_bias",
        Epilogue::Tanh => "matvec_tanh",
        Epilogue::Residual => "matvec_residual",
    };
    let mut k = KernelBuilder::new(name, [LANES, 1, 1]);
    let w = k.binding(ElemType::F32, Access::Read);
    let x = k.binding(ElemType::F32, Access::Read);
    let bias = k.binding(ElemType::F32, Access::Read);
    let residual = (epilogue == Epilogue::Residual).then(|| k.binding(ElemType::F32, Access::Read));
    let y = k.binding(ElemType::F32, Access::ReadWrite);
    let tree = k.shared(ElemType::F32, LANES);
    let lane = k.local_id(Axis::X);
    let row = k.var(ElemType::U32, k.workgroup_id(Axis::X));
    let base = k.var(ElemType::U32, row.get() * x.len());
    let acc = k.var(ElemType::F32, 0.0f32);
    let c = k.var(ElemType::U32, lane);
    k.while_(c.get().lt(x.len()), |k| {
        let term = w.load(base.get() + c.get()).fma(x.load(c.get()), acc.get());
        k.assign(acc, term);
        k.assign(c, c.get() + LANES);
    });
    let dot = fold_workgroup(&mut k, tree, lane, LANES, acc.get(), Fold::Sum);
    k.if_(lane.equals(0u32), |k| {
        let z = dot.get() + bias.load(row.get());
        let out = match (epilogue, residual) {
            (Epilogue::Tanh, _) => z.tanh(),
            (Epilogue::Residual, Some(res)) => z + res.load(row.get()),
            _ => z,
        };
        k.store(y, row.get(), out);
    });
    build(k)
}

/// `y` exactly from what a device read (`w`, `x`, `bias`, `residual`), and how far the device
/// may be from it. The dot product is a chain of `len(x) / LANES` fused-or-not steps then a
/// tree: within `γ₂ₗ·Σ|w·x|` for a chain of `l` roundings ([`sum_chain`] plus the strided
/// steps' products). Each addition of the epilogue rounds once more (at most `2⁻²⁴` of
/// `Σ|terms|`), and `tanh`, 1-Lipschitz, carries that error and adds its own bound (the IR's
/// table) at the exact argument.
pub fn matvec_bounds(
    epilogue: Epilogue,
    w: &[f32],
    x: &[f32],
    bias: &[f32],
    residual: &[f32],
) -> Vec<(f64, f64)> {
    let cols = x.len();
    let chain = 2 * sum_chain(cols, LANES) + 2;
    let gamma = chain as f64 * U / (1.0 - chain as f64 * U);
    bias.iter()
        .enumerate()
        .map(|(r, &b)| {
            let terms = w[r * cols..(r + 1) * cols].iter().zip(x);
            let terms = terms.map(|(&w, &x)| w as f64 * x as f64);
            let (dot, abs) = terms.fold((0.0, 0.0), |(s, t), v| (s + v, t + v.abs()));
            let z = dot + b as f64;
            let z_error = gamma * (abs + (b as f64).abs());
            match epilogue {
                Epilogue::Bias => (z, z_error),
                Epilogue::Residual => {
                    let res = residual[r] as f64;
                    (z + res, z_error + U * (z.abs() + res.abs()) * 1.01)
                }
                Epilogue::Tanh => {
                    let own = [z - z_error, z, z + z_error]
                        .map(|at| MathCall::Unary(UnaryOp::Tanh, at as f32).max_error())
                        .into_iter()
                        .try_fold(0.0f64, |m, e| e.map(|e| m.max(e)))
                        .unwrap_or(f64::INFINITY);
                    (libm::tanh(z), z_error + own)
                }
            }
        })
        .collect()
}

/// `out[i] = table[token[0]·len(out) + i]`. Bindings: `table` (read), `token` (`u32`, read),
/// `out`.
pub fn embedding() -> Kernel {
    let mut k = KernelBuilder::new("embedding", [LANES, 1, 1]);
    let table = k.binding(ElemType::F32, Access::Read);
    let token = k.binding(ElemType::U32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(out.len()), |k| {
        let at = token.load(0u32) * out.len() + i;
        k.store(out, i, table.load(at));
    });
    build(k)
}

/// One workgroup: `token[0]` = the first index of the largest of `values`, which is also
/// appended to `history` at `count[0]`, which then grows by one (while `history` has room).
/// Bindings: `values` (read), `token` (`u32`), `history` (`u32`), `count` (`u32`).
pub fn argmax() -> Kernel {
    let mut k = KernelBuilder::new("argmax", [LANES, 1, 1]);
    let values = k.binding(ElemType::F32, Access::Read);
    let token = k.binding(ElemType::U32, Access::ReadWrite);
    let history = k.binding(ElemType::U32, Access::ReadWrite);
    let count = k.binding(ElemType::U32, Access::ReadWrite);
    let best = k.shared(ElemType::F32, LANES);
    let at = k.shared(ElemType::U32, LANES);
    let lane = k.local_id(Axis::X);
    // Each lane's first maximum over its strided indices, which it visits in increasing order.
    let (v, i) = (
        k.var(ElemType::F32, -f32::MAX),
        k.var(ElemType::U32, u32::MAX),
    );
    let c = k.var(ElemType::U32, lane);
    k.while_(c.get().lt(values.len()), |k| {
        k.if_(values.load(c.get()).gt(v.get()), |k| {
            k.assign(v, values.load(c.get()));
            k.assign(i, c.get());
        });
        k.assign(c, c.get() + LANES);
    });
    k.store(best, lane, v.get());
    k.store(at, lane, i.get());
    k.workgroup_barrier();
    let mut stride = LANES / 2;
    while stride > 0 {
        k.if_(lane.lt(stride), |k| {
            let other = lane + stride;
            let (ov, oi) = (best.load(other), at.load(other));
            let (mv, mi) = (best.load(lane), at.load(lane));
            let wins = ov.gt(mv).or(ov.equals(mv).and(oi.lt(mi)));
            k.if_(wins, |k| {
                k.store(best, lane, ov);
                k.store(at, lane, oi);
            });
        });
        k.workgroup_barrier();
        stride /= 2;
    }
    k.if_(lane.equals(0u32), |k| {
        let winner = k.var(ElemType::U32, at.load(0u32));
        k.store(token, 0u32, winner.get());
        let n = k.var(ElemType::U32, count.load(0u32));
        k.if_(n.get().lt(history.len()), |k| {
            k.store(history, n.get(), winner.get());
            k.store(count, 0u32, n.get() + 1u32);
        });
    });
    build(k)
}

/// The index [`argmax`] picks: the first of the largest values (`u32::MAX` for none).
pub fn argmax_host(values: &[f32]) -> u32 {
    let mut best = (-f32::MAX, u32::MAX);
    for (i, &v) in values.iter().enumerate() {
        if v > best.0 {
            best = (v, i as u32);
        }
    }
    best.1
}
