//! Kernels that use what invocations share and what only GPUs compute: shared arrays,
//! barriers (passed by invocations that returned early), atomics on global and shared memory,
//! `while` loops with `break` and `continue`, local arrays, and the math functions. Each comes
//! with its host reference; all guard their accesses and are race-free (see the memory model
//! in `lockstep::kernel`), so every device must compute the reference: exactly, or within the
//! IR's stated accuracy for the math functions, or, where atomics race for a word, one of the
//! outcomes the reference accepts.

use std::f32::consts::PI;

use lockstep::Kernel;
use lockstep::kernel::accuracy::MathCall;
use lockstep::kernel::{Access, AtomicOp, Axis, ElemType, KernelBuilder, UnaryOp, Value};

/// Invocations per workgroup of the reduction and the histogram.
pub const REDUCE_WORKGROUP: u32 = 64;
/// Invocations per workgroup of the other kernels.
pub const WORKGROUP: u32 = 32;
/// Bins of the histogram.
pub const BINS: u32 = 16;

fn kernel(builder: KernelBuilder) -> Kernel {
    builder.build().expect("workgroup kernels are valid")
}

/// Every kernel of this module, in the order it defines them.
pub fn all() -> [Kernel; 5] {
    [reduce_sum(), histogram(), claims(), loops(), math()]
}

/// `partials[w]` = the wrapping sum of `input`'s workgroup `w` (of [`REDUCE_WORKGROUP`]
/// elements), by a tree through shared memory with a barrier per level, which the lanes no
/// later level reads have left by an early `return` (they count as arrived at it); lane 0 then
/// adds the sum to `total[0]` atomically. Bindings: `input` (read), `partials`, `total`.
pub fn reduce_sum() -> Kernel {
    let mut k = KernelBuilder::new("reduce_sum", [REDUCE_WORKGROUP, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let partials = k.binding(ElemType::U32, Access::ReadWrite);
    let total = k.binding(ElemType::U32, Access::ReadWrite);
    let tree = k.shared(ElemType::U32, REDUCE_WORKGROUP);
    let (i, lid) = (k.global_id(Axis::X), k.local_id(Axis::X));
    let x = k.var(ElemType::U32, 0u32);
    k.if_(i.lt(input.len()), |k| k.assign(x, input.load(i)));
    k.store(tree, lid, x.get());
    k.workgroup_barrier();
    let stride = k.var(ElemType::U32, REDUCE_WORKGROUP / 2);
    k.while_(stride.get().gt(0u32), |k| {
        k.if_(lid.ge(stride.get() * 2u32), |k| k.return_());
        k.if_(lid.lt(stride.get()), |k| {
            let sum = tree.load(lid) + tree.load(lid + stride.get());
            k.store(tree, lid, sum);
        });
        k.workgroup_barrier();
        k.assign(stride, stride.get() >> 1u32);
    });
    k.if_(lid.equals(0u32), |k| {
        let wg = k.workgroup_id(Axis::X);
        k.if_(wg.lt(partials.len()), |k| {
            k.store(partials, wg, tree.load(0u32))
        });
        k.atomic_add(total, 0u32, tree.load(0u32));
    });
    kernel(k)
}

/// The reference of [`reduce_sum`]: the partial sums, and `total` plus all of them.
pub fn reduce_sum_reference(input: &[u32], total: u32) -> (Vec<u32>, u32) {
    let partials: Vec<u32> = input
        .chunks(REDUCE_WORKGROUP as usize)
        .map(|c| c.iter().fold(0, |a: u32, &x| a.wrapping_add(x)))
        .collect();
    let sum = partials.iter().fold(total, |a, &p| a.wrapping_add(p));
    (partials, sum)
}

/// A histogram of `input % BINS` counted in shared memory, then added to `bins` with global
/// atomics; `extremes[0]` and `[1]` take the atomic min and max of `input` as `i32`; `bits[0]`
/// gets bit `x % 32` of every `x` set (atomic or), `bits[1]` cleared (atomic and), and
/// `bits[2]` the exclusive or of every `x` (atomic xor).
/// Bindings: `input` (read), `bins`, `extremes` (`i32`), `bits` (three words).
pub fn histogram() -> Kernel {
    let mut k = KernelBuilder::new("histogram", [REDUCE_WORKGROUP, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let bins = k.binding(ElemType::U32, Access::ReadWrite);
    let extremes = k.binding(ElemType::I32, Access::ReadWrite);
    let bits = k.binding(ElemType::U32, Access::ReadWrite);
    let local = k.shared(ElemType::U32, BINS);
    let (i, lid) = (k.global_id(Axis::X), k.local_id(Axis::X));
    k.if_(lid.lt(BINS), |k| k.store(local, lid, 0u32));
    k.workgroup_barrier();
    k.if_(i.lt(input.len()), |k| {
        let x = k.var(ElemType::U32, input.load(i));
        k.atomic_add(local, x.get() % BINS, 1u32);
        let signed = x.get().cast(ElemType::I32);
        k.atomic(AtomicOp::Min, extremes, 0u32, signed);
        k.atomic(AtomicOp::Max, extremes, 1u32, signed);
        let bit = Value::from(1u32) << (x.get() % 32u32);
        k.if_(bits.len().ge(3u32), |k| {
            k.atomic(AtomicOp::Or, bits, 0u32, bit);
            k.atomic(AtomicOp::And, bits, 1u32, bit ^ u32::MAX);
            k.atomic(AtomicOp::Xor, bits, 2u32, x.get());
        });
    });
    k.workgroup_barrier();
    k.if_(lid.lt(BINS), |k| k.atomic_add(bins, lid, local.load(lid)));
    kernel(k)
}

/// The reference of [`histogram`] from `bins`, `extremes` and `bits` as they were.
pub fn histogram_reference(
    input: &[u32],
    bins: &mut [u32],
    extremes: &mut [i32; 2],
    bits: &mut [u32; 3],
) {
    for &x in input {
        bins[(x % BINS) as usize] += 1;
        extremes[0] = extremes[0].min(x as i32);
        extremes[1] = extremes[1].max(x as i32);
        bits[0] |= 1 << (x % 32);
        bits[1] &= !(1 << (x % 32));
        bits[2] ^= x;
    }
}

/// Claims and hand-offs, whose winners depend on the order atomics execute in. Per invocation
/// `i < len(keys)`: `owners[keys[i] % len(owners)]` is compare-exchanged from 0 to `i + 1`
/// (`seen[i]` gets the previous value); `i + 1` is exchanged into `chain[0]` (`taken[i]` gets
/// what it took out); and within each workgroup the same exchange runs on a shared word,
/// whose last value lane 0 stores to `chain[1 + workgroup]`. Bindings: `keys` (read),
/// `owners`, `seen`, `chain`, `taken`.
pub fn claims() -> Kernel {
    let mut k = KernelBuilder::new("claims", [WORKGROUP, 1, 1]);
    let keys = k.binding(ElemType::U32, Access::Read);
    let owners = k.binding(ElemType::U32, Access::ReadWrite);
    let seen = k.binding(ElemType::U32, Access::ReadWrite);
    let chain = k.binding(ElemType::U32, Access::ReadWrite);
    let taken = k.binding(ElemType::U32, Access::ReadWrite);
    let last = k.shared(ElemType::U32, 1);
    let (i, lid) = (k.global_id(Axis::X), k.local_id(Axis::X));
    k.if_(lid.equals(0u32), |k| k.store(last, 0u32, 0u32));
    k.workgroup_barrier();
    k.if_(i.lt(keys.len()), |k| {
        let slot = keys.load(i) % owners.len();
        let before = k.compare_exchange(owners, slot, 0u32, i + 1u32);
        k.store(seen, i, before.get());
        let out = k.fetch_atomic(AtomicOp::Exchange, chain, 0u32, i + 1u32);
        k.store(taken, i, out.get());
        k.atomic(AtomicOp::Exchange, last, 0u32, i + 1u32);
    });
    k.workgroup_barrier();
    k.if_(lid.equals(0u32), |k| {
        let wg = k.workgroup_id(Axis::X);
        k.store(chain, wg + 1u32, last.load(0u32));
    });
    kernel(k)
}

/// What [`claims`] left, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    /// The `owners` binding: which invocation (plus one) claimed each slot, 0 where none did.
    pub owners: Vec<u32>,
    /// The `seen` binding: what each invocation's compare-exchange found.
    pub seen: Vec<u32>,
    /// The `chain` binding: the last exchanged value globally, then per workgroup.
    pub chain: Vec<u32>,
    /// The `taken` binding: what each invocation's exchange took out.
    pub taken: Vec<u32>,
}

/// Checks what [`claims`] left for `keys` (owners and `chain[0]` zero before) against what
/// any order of its atomics allows.
pub fn check_claims(keys: &[u32], out: &Claims) -> Result<(), String> {
    let n = keys.len();
    for (slot, &owner) in out.owners.iter().enumerate() {
        let claimants: Vec<u32> = (0..n as u32)
            .filter(|&i| keys[i as usize] as usize % out.owners.len() == slot)
            .collect();
        match owner {
            0 if claimants.is_empty() => {}
            0 => return Err(format!("slot {slot} unclaimed by {claimants:?}")),
            o if !claimants.contains(&(o - 1)) => {
                return Err(format!(
                    "slot {slot} owned by {o}, not one of {claimants:?}"
                ));
            }
            // The owner saw 0; every other claimant saw the owner.
            o => {
                for &c in &claimants {
                    let want = if c + 1 == o { 0 } else { o };
                    if out.seen[c as usize] != want {
                        return Err(format!(
                            "invocation {c} saw {} in slot {slot}, owned by {o}",
                            out.seen[c as usize]
                        ));
                    }
                }
            }
        }
    }
    // The exchanges hand every value on exactly once: what was taken out, plus what is left,
    // is the initial 0 and every id + 1.
    let mut handed: Vec<u32> = out.taken[..n].to_vec();
    handed.push(out.chain[0]);
    handed.sort_unstable();
    if handed != (0..=n as u32).collect::<Vec<u32>>() {
        return Err(format!(
            "exchanges handed on {handed:?}, not 0..={n} once each"
        ));
    }
    for (wg, &last) in out.chain[1..].iter().enumerate() {
        let lanes = (wg * WORKGROUP as usize)..((wg + 1) * WORKGROUP as usize).min(n);
        if !(last == 0 && lanes.is_empty() || lanes.contains(&(last as usize).wrapping_sub(1))) {
            return Err(format!(
                "workgroup {wg}'s shared exchange ended at {last}, not one of its ids + 1"
            ));
        }
    }
    Ok(())
}

/// Per invocation `i < len(input)`, with `x = input[i] % 1000 + 1`: `out[3i]` = the Collatz
/// steps from `x` to 1 (a `while` left by `break`, at most 500); `out[3i + 1]` = the sum of
/// `j < x % 64` that are not multiples of 3 (a `for` with `continue`, summing into four
/// buckets of a local array by `j % 4`); `out[3i + 2]` = the smallest `r` with `r * r > x` (a
/// `while` whose inner `for` a `break` leaves).
pub fn loops() -> Kernel {
    let mut k = KernelBuilder::new("loops", [WORKGROUP, 1, 1]);
    let input = k.binding(ElemType::U32, Access::Read);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(input.len()), |k| {
        let x = k.var(ElemType::U32, input.load(i) % 1000u32 + 1u32);
        let n = k.var(ElemType::U32, x.get());
        let steps = k.var(ElemType::U32, 0u32);
        k.while_(n.get().not_equals(1u32), |k| {
            k.if_(steps.get().ge(500u32), |k| k.break_());
            let odd = (n.get() % 2u32).equals(1u32);
            k.assign(n, odd.select(n.get() * 3u32 + 1u32, n.get() / 2u32));
            k.assign(steps, steps.get() + 1u32);
        });
        let buckets = k.local_array(ElemType::U32, 4);
        k.for_range(ElemType::U32, 0u32, x.get() % 64u32, |k, j| {
            k.if_((j % 3u32).equals(0u32), |k| k.continue_());
            let bucket = j % buckets.len();
            k.store(buckets, bucket, buckets.load(bucket) + j);
        });
        let sum = k.var(ElemType::U32, buckets.load(0u32) + buckets.load(1u32));
        k.assign(sum, sum.get() + buckets.load(2u32) + buckets.load(3u32));
        let root = k.var(ElemType::U32, 0u32);
        let found = k.var(ElemType::U32, 0u32);
        k.while_(found.get().equals(0u32), |k| {
            k.for_range(ElemType::U32, 0u32, 8u32, |k, _| {
                k.if_((root.get() * root.get()).gt(x.get()), |k| {
                    k.assign(found, 1u32);
                    k.break_();
                });
                k.assign(root, root.get() + 1u32);
            });
        });
        k.store(out, i * 3u32, steps.get());
        k.store(out, i * 3u32 + 1u32, sum.get());
        k.store(out, i * 3u32 + 2u32, root.get());
    });
    kernel(k)
}

/// The reference of [`loops`].
pub fn loops_reference(input: &[u32]) -> Vec<u32> {
    input
        .iter()
        .flat_map(|&v| {
            let x = v % 1000 + 1;
            let (mut n, mut steps) = (x, 0);
            while n != 1 && steps < 500 {
                n = if n % 2 == 1 { n * 3 + 1 } else { n / 2 };
                steps += 1;
            }
            let sum = (0..x % 64).filter(|j| j % 3 != 0).sum();
            let root = (0..)
                .find(|r: &u32| r * r > x)
                .expect("some root exceeds x");
            [steps, sum, root]
        })
        .collect()
}

/// The math functions [`math`] applies, in row order: every unary function, then `pow`
/// (two input rows), `atan2` (two) and `fma` (three).
pub const MATH_INPUT_ROWS: usize = UnaryOp::ALL.len() + 2 + 2 + 3;
/// Output rows of [`math`]: one per unary function, then `pow`, `atan2` and `fma`.
pub const MATH_OUTPUT_ROWS: usize = UnaryOp::ALL.len() + 3;

/// `out[r * n + i]` = function `r` of row `r`'s operands at `i`, for `i < n` (parameter `n`;
/// `input` holds [`MATH_INPUT_ROWS`] rows of `n`, `out` [`MATH_OUTPUT_ROWS`]).
pub fn math() -> Kernel {
    let mut k = KernelBuilder::new("math", [WORKGROUP, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let n = k.param(ElemType::U32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(n), |k| {
        let row = |r: usize| input.load(n * r as u32 + i);
        let at = |r: usize| n * r as u32 + i;
        for (r, op) in UnaryOp::ALL.into_iter().enumerate() {
            k.store(out, at(r), row(r).unary(op));
        }
        let u = UnaryOp::ALL.len();
        k.store(out, at(u), row(u).pow(row(u + 1)));
        k.store(out, at(u + 1), row(u + 2).atan2(row(u + 3)));
        k.store(out, at(u + 2), row(u + 4).fma(row(u + 5), row(u + 6)));
    });
    kernel(k)
}

/// The call each output of [`math`] makes, from its `n`-wide input rows.
pub fn math_calls(input: &[f32], n: usize) -> Vec<MathCall> {
    let row = |r: usize| &input[r * n..(r + 1) * n];
    let u = UnaryOp::ALL.len();
    let mut calls: Vec<MathCall> = UnaryOp::ALL
        .into_iter()
        .enumerate()
        .flat_map(|(r, op)| row(r).iter().map(move |&x| MathCall::Unary(op, x)))
        .collect();
    calls.extend((0..n).map(|i| MathCall::Pow(row(u)[i], row(u + 1)[i])));
    calls.extend((0..n).map(|i| MathCall::Atan2(row(u + 2)[i], row(u + 3)[i])));
    calls.extend((0..n).map(|i| MathCall::Fma(row(u + 4)[i], row(u + 5)[i], row(u + 6)[i])));
    calls
}

/// Where [`math`]'s input row `r` is drawn from, inside the function's domain and where its
/// bound is finite: `lo + (hi - lo) * u` for `u` in [0, 1].
pub fn math_domain(r: usize) -> (f32, f32) {
    match UnaryOp::ALL.get(r) {
        Some(UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Round) => {
            (-1e4, 1e4)
        }
        Some(UnaryOp::Sqrt | UnaryOp::InverseSqrt | UnaryOp::Log) => (1e-6, 1e6),
        Some(UnaryOp::Exp) => (-80.0, 80.0),
        Some(UnaryOp::Tanh) => (-9.0, 9.0),
        // The largest f32 below pi: f32 pi itself lies just above it.
        Some(UnaryOp::Sin | UnaryOp::Cos) => (-PI.next_down(), PI.next_down()),
        // Away from cos's zeros, where tan's inherited bound would leave f32's range.
        Some(UnaryOp::Tan) => (-1.4, 1.4),
        Some(UnaryOp::Sinh | UnaryOp::Cosh) => (-9.0, 9.0),
        // At ±1 the inherited bound takes `sqrt` of `1 - x * x`, which may round below 0.
        Some(UnaryOp::Asin | UnaryOp::Acos) => (-0.999, 0.999),
        Some(UnaryOp::Atan | UnaryOp::Asinh) => (-1e3, 1e3),
        Some(UnaryOp::Acosh) => (1.001, 1e3),
        Some(UnaryOp::Atanh) => (-0.999, 0.999),
        // pow's base and exponent, atan2's y and x, then fma's operands.
        None if r == UnaryOp::ALL.len() => (1e-3, 100.0),
        None if r == UnaryOp::ALL.len() + 1 => (-4.0, 4.0),
        None if r == UnaryOp::ALL.len() + 2 || r == UnaryOp::ALL.len() + 3 => (-1e3, 1e3),
        None => (-1e3, 1e3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_match_hand_computed_cases() {
        let input: Vec<u32> = (0..70).collect();
        let (partials, total) = reduce_sum_reference(&input, 5);
        assert_eq!(partials, vec![2016, 64 + 65 + 66 + 67 + 68 + 69]);
        assert_eq!(total, 5 + (0..70).sum::<u32>());
        let mut bins = vec![0; BINS as usize];
        let mut extremes = [i32::MAX, i32::MIN];
        let mut bits = [0, u32::MAX, 5];
        histogram_reference(&[3, 19, u32::MAX], &mut bins, &mut extremes, &mut bits);
        assert_eq!(
            bits,
            [
                1 << 3 | 1 << 19 | 1 << 31,
                !(1 << 3 | 1 << 19 | 1 << 31),
                5 ^ 3 ^ 19 ^ u32::MAX
            ]
        );
        assert_eq!((bins[3], bins[15]), (2, 1));
        assert_eq!(extremes, [-1, 19]);
        // x = 6: 8 Collatz steps; 1 + 2 + 4 + 5 = 12; 3 * 3 > 6.
        assert_eq!(loops_reference(&[5]), vec![8, 12, 3]);
    }

    #[test]
    fn check_claims_accepts_any_order_and_refuses_lost_values() {
        // Keys 0 and 2 collide in 2 slots; invocation 1 won slot 0.
        let keys = [0, 1, 2];
        let good = Claims {
            owners: vec![2, 2],
            seen: vec![2, 0, 0],
            chain: vec![2, 3],
            taken: vec![3, 0, 1],
        };
        // Slot 0's claimants are 0 and 2; 2 is not one of them...
        assert!(check_claims(&keys, &good).is_err());
        let good = Claims {
            owners: vec![3, 2],
            seen: vec![3, 0, 0],
            ..good
        };
        assert_eq!(check_claims(&keys, &good), Ok(()));
        let lost = Claims {
            taken: vec![3, 3, 1],
            ..good.clone()
        };
        assert!(
            check_claims(&keys, &lost)
                .unwrap_err()
                .contains("handed on")
        );
    }
}
