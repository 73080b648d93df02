//! A tiled matrix product `C = A·B` (row-major `f32`): each workgroup computes a
//! [`TILE`]×[`TILE`] block of `C`, stepping through `K` [`DEPTH`] columns of `A` and rows of `B`
//! at a time, each step's tiles staged in shared memory between two barriers; each invocation
//! keeps a [`MICRO`]×[`MICRO`] block of accumulators in registers.

use lockstep::Kernel;
use lockstep::kernel::semantics::fma;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder, Shared, Value, Var};

use super::{U, build};

/// Invocations per workgroup along each axis.
pub const SIDE: u32 = 16;
/// Outputs per invocation along each axis.
pub const MICRO: u32 = 8;
/// Rows and columns of `C` per workgroup.
pub const TILE: u32 = SIDE * MICRO;
/// Depth of one shared-memory step.
pub const DEPTH: u32 = 8;
const LANES: u32 = SIDE * SIDE;

/// The product over a launch of `(⌈n / TILE⌉, ⌈m / TILE⌉)` workgroups. Invocation `(tx, ty)`
/// owns rows `ty + SIDE·i` and columns `tx + SIDE·j` of its block, and accumulates
/// `acc = fma(a, b, acc)` over `k` in order from zero. Bindings: `a` (`m×k`, read), `b` (`k×n`,
/// read), `c` (`m×n`); parameters `m`, `n`, `k` (`u32`). With `barriers` false the second
/// barrier of each step is left out, a bug the kernel sanitizer must find (see `faulty`).
pub fn matmul_with(name: &str, barriers: bool) -> Kernel {
    let mut k = KernelBuilder::new(name, [SIDE, SIDE, 1]);
    let a = k.binding(ElemType::F32, Access::Read);
    let b = k.binding(ElemType::F32, Access::Read);
    let c = k.binding(ElemType::F32, Access::ReadWrite);
    let (m, n, depth) = (
        k.param(ElemType::U32),
        k.param(ElemType::U32),
        k.param(ElemType::U32),
    );
    let a_tile = k.shared(ElemType::F32, DEPTH * TILE);
    let b_tile = k.shared(ElemType::F32, DEPTH * TILE);
    let (tx, ty) = (k.local_id(Axis::X), k.local_id(Axis::Y));
    let row0 = k.var(ElemType::U32, k.workgroup_id(Axis::Y) * TILE);
    let col0 = k.var(ElemType::U32, k.workgroup_id(Axis::X) * TILE);
    let lane = k.var(ElemType::U32, ty * SIDE + tx);
    let acc: Vec<Var> = (0..MICRO * MICRO)
        .map(|_| k.var(ElemType::F32, 0.0f32))
        .collect();
    let regs = |k: &mut KernelBuilder| -> Vec<Var> {
        (0..MICRO).map(|_| k.var(ElemType::F32, 0.0f32)).collect()
    };
    let (a_reg, b_reg) = (regs(&mut k), regs(&mut k));
    let k0 = k.var(ElemType::U32, 0u32);
    k.while_(k0.get().lt(depth), |k| {
        for r in 0..DEPTH * TILE / LANES {
            let e = lane.get() + r * LANES;
            // A's tile is stored transposed, so an invocation's rows of one step are strided.
            let (am, ak) = (e / DEPTH, e % DEPTH);
            let (row, col) = (row0.get() + am, k0.get() + ak);
            let inside = row.lt(m).and(col.lt(depth));
            let from = a.load(row * depth + col);
            stage(k, a_tile, ak * TILE + am, inside, from);
            let (bk, bn) = (e / TILE, e % TILE);
            let (row, col) = (k0.get() + bk, col0.get() + bn);
            let inside = row.lt(depth).and(col.lt(n));
            stage(k, b_tile, bk * TILE + bn, inside, b.load(row * n + col));
        }
        k.workgroup_barrier();
        k.for_range(ElemType::U32, 0u32, DEPTH, |k, s| {
            for i in 0..MICRO {
                let at = s * TILE + ty + i * SIDE;
                k.assign(a_reg[i as usize], a_tile.load(at));
                let at = s * TILE + tx + i * SIDE;
                k.assign(b_reg[i as usize], b_tile.load(at));
            }
            for (x, &acc) in acc.iter().enumerate() {
                let (i, j) = (x / MICRO as usize, x % MICRO as usize);
                k.assign(acc, a_reg[i].get().fma(b_reg[j].get(), acc.get()));
            }
        });
        if barriers {
            k.workgroup_barrier();
        }
        k.assign(k0, k0.get() + DEPTH);
    });
    for (x, &acc) in acc.iter().enumerate() {
        let (i, j) = (x as u32 / MICRO, x as u32 % MICRO);
        let (row, col) = (row0.get() + ty + i * SIDE, col0.get() + tx + j * SIDE);
        let inside = row.lt(m).and(col.lt(n));
        k.if_(inside, |k| k.store(c, row * n + col, acc.get()));
    }
    build(k)
}

/// `tile[at] = from` where `inside`, else zero: the edge of a matrix pads its tiles with zeros.
fn stage(k: &mut KernelBuilder, tile: Shared, at: Value, inside: Value, from: Value) {
    k.if_else(
        inside,
        |k| k.store(tile, at, from),
        |k| k.store(tile, at, 0.0f32),
    );
}

/// The tiled product with its barriers.
pub fn matmul() -> Kernel {
    matmul_with("matmul", true)
}

/// Workgroups of a launch of [`matmul`] for an `m×n` result: `(x, y)`.
pub fn grid(m: u32, n: u32) -> (u32, u32) {
    (n.div_ceil(TILE).max(1), m.div_ceil(TILE).max(1))
}

/// What [`matmul`] computes on a device that fuses `fma`, bit for bit: `fma` over `k` in order.
pub fn matmul_fused_host(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f32> {
    let mut c = vec![0.0f32; m * n];
    for (r, row) in c.chunks_mut(n.max(1)).enumerate().take(m) {
        for (j, out) in row.iter_mut().enumerate() {
            *out = (0..k).fold(0.0, |acc, p| fma(a[r * k + p], b[p * n + j], acc));
        }
    }
    c
}

/// Each element of `A·B` exactly, and how far a device may be from it: a chain of `k` steps of
/// `acc = fma(a, b, acc)`, each rounding once or twice (the IR's `fma`), is within
/// `γ₂ₖ·Σ|a·b|` with `γₙ = n·u/(1 - n·u)`, `u = 2⁻²⁴` (the classical bound of a dot product).
pub fn matmul_bounds(a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<(f64, f64)> {
    let gamma = 2.0 * k as f64 * U / (1.0 - 2.0 * k as f64 * U);
    (0..m * n)
        .map(|x| {
            let (r, j) = (x / n, x % n);
            let terms = (0..k).map(|p| a[r * k + p] as f64 * b[p * n + j] as f64);
            let (sum, abs) = terms.fold((0.0, 0.0), |(s, t), v| (s + v, t + v.abs()));
            (sum, gamma * abs)
        })
        .collect()
}
