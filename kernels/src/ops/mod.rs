//! Kernels that do real work, with their host references: a sum reduction, a row softmax, a
//! layer norm, a tiled matrix product with shared-memory tiles, and the pieces of a decode step
//! (embedding lookup, matrix–vector products, argmax; [`decode`] puts them together). They are
//! written with `KernelBuilder` and run unchanged on every device.
//!
//! # What a device must compute
//!
//! Where a kernel uses only the IR's exact operations (`+`, `*`, `max`, comparisons), its
//! result is the same bits on every device, and its reference performs the same operations in
//! the same order (the reduction, the argmax, the embedding). Elsewhere each reference gives
//! the exact value (in `f64`) and a bound on a device's distance from it, derived from the
//! IR's accuracy table (`lockstep::kernel`, module doc) and one rounding (`u = 2⁻²⁴`
//! relative) per `f32` operation; each `*_bounds` function states its derivation. `fma` may
//! round once or twice, so the matrix products are bounded, not bit-exact (the simulator and
//! CUDA fuse: [`matmul::matmul_fused_host`] is their bits).
//!
//! Every kernel is race-free under the IR's memory model; [`faulty`] holds two that are not,
//! for the kernel sanitizer's self-tests.

pub mod block;
pub mod check;
pub mod decode;
pub mod faulty;
pub mod layer_norm;
pub mod matmul;
pub mod matvec;
pub mod reduce;
pub mod softmax;

use lockstep::Kernel;
use lockstep::kernel::KernelBuilder;

/// The unit roundoff of `f32`: the largest relative error of one correctly rounded operation.
pub const U: f64 = 1.0 / (1u64 << 24) as f64;

fn build(builder: KernelBuilder) -> Kernel {
    builder.build().expect("the ops kernels are valid")
}

/// Every race-free kernel of this module.
pub fn all() -> Vec<Kernel> {
    use matvec::Epilogue;
    vec![
        reduce::reduce_sum(),
        softmax::softmax(),
        layer_norm::layer_norm(),
        matmul::matmul(),
        matvec::matvec(Epilogue::Bias),
        matvec::matvec(Epilogue::Tanh),
        matvec::matvec(Epilogue::Residual),
        matvec::embedding(),
        matvec::argmax(),
    ]
}

/// Checks each of `got` against its `(exact, bound)`: `Err` names the first element out of
/// bounds (or not finite), what it is, and how far it is.
pub fn check_within(what: &str, got: &[f32], bounds: &[(f64, f64)]) -> Result<(), String> {
    if got.len() != bounds.len() {
        return Err(format!(
            "{what}: {} values, the reference has {}",
            got.len(),
            bounds.len()
        ));
    }
    for (i, (&got, &(exact, bound))) in got.iter().zip(bounds).enumerate() {
        let distance = (got as f64 - exact).abs();
        // A NaN distance (a non-finite result) is out of bounds too.
        if distance.is_nan() || distance > bound {
            return Err(format!(
                "{what}[{i}] = {got:e}, exact {exact:e}: off by {distance:e}, bound {bound:e}"
            ));
        }
    }
    Ok(())
}

/// `len` values in `[lo, hi)` drawn from `seed` by [`decode::splitmix64`], the same on every
/// host (the inputs of the examples and benchmarks).
pub fn uniform(seed: u64, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..len as u64)
        .map(|i| lo + (hi - lo) * decode::unit(seed, i))
        .collect()
}
