//! A sum of `f32`s in two launches of one kernel: each workgroup folds its share of the input
//! into one partial, then one workgroup folds the partials. Additions only, in a fixed order,
//! so every device gives the bits of [`reduce_sum_host`].

use lockstep::Kernel;
use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};

use super::block::{Fold, fold_workgroup, fold_workgroup_host};
use super::build;

/// Invocations per workgroup.
pub const LANES: u32 = 256;
/// Independent accumulators per invocation: loads in flight, for bandwidth.
const UNROLL: u32 = 4;

/// `partials[w]` = the sum of the elements that workgroup `w`'s invocations visit: with `T` the
/// launch's invocations, invocation `t` keeps `UNROLL` accumulators, adding elements
/// `t + (4j + a)·T` to accumulator `a` while all four are in range and then the rest to the
/// first, sums them as `(a0 + a1) + (a2 + a3)`, and the workgroup folds its invocations' sums
/// in a tree. Bindings: `input` (read, fewer than 2³¹ elements), `partials` (one per
/// workgroup).
pub fn reduce_sum() -> Kernel {
    let mut k = KernelBuilder::new("reduce_sum_f32", [LANES, 1, 1]);
    let input = k.binding(ElemType::F32, Access::Read);
    let partials = k.binding(ElemType::F32, Access::ReadWrite);
    let tree = k.shared(ElemType::F32, LANES);
    let lane = k.local_id(Axis::X);
    let total = k.num_workgroups(Axis::X) * LANES;
    let stride = k.var(ElemType::U32, total);
    let j = k.var(ElemType::U32, k.global_id(Axis::X));
    let acc: Vec<_> = (0..UNROLL).map(|_| k.var(ElemType::F32, 0.0f32)).collect();
    let last = j.get() + stride.get() * (UNROLL - 1);
    k.while_(last.lt(input.len()), |k| {
        for (a, &var) in acc.iter().enumerate() {
            let at = j.get() + stride.get() * a as u32;
            k.assign(var, var.get() + input.load(at));
        }
        k.assign(j, j.get() + stride.get() * UNROLL);
    });
    k.while_(j.get().lt(input.len()), |k| {
        k.assign(acc[0], acc[0].get() + input.load(j.get()));
        k.assign(j, j.get() + stride.get());
    });
    let sum = (acc[0].get() + acc[1].get()) + (acc[2].get() + acc[3].get());
    let sum = fold_workgroup(&mut k, tree, lane, LANES, sum, Fold::Sum);
    k.if_(lane.equals(0u32), |k| {
        let w = k.workgroup_id(Axis::X);
        k.store(partials, w, sum.get());
    });
    build(k)
}

/// What [`reduce_sum`] leaves in its `groups` partials for `input`, bit for bit.
pub fn reduce_sum_host(input: &[f32], groups: usize) -> Vec<f32> {
    let total = groups * LANES as usize;
    let unroll = UNROLL as usize;
    let lane_sum = |t: usize| {
        let mut acc = [0.0f32; UNROLL as usize];
        let mut j = t;
        while j + (unroll - 1) * total < input.len() {
            for (a, acc) in acc.iter_mut().enumerate() {
                *acc += input[j + a * total];
            }
            j += unroll * total;
        }
        while j < input.len() {
            acc[0] += input[j];
            j += total;
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    };
    (0..groups)
        .map(|w| {
            let lanes = (0..LANES as usize).map(|l| lane_sum(w * LANES as usize + l));
            fold_workgroup_host(lanes.collect(), Fold::Sum)
        })
        .collect()
}

/// The sum [`reduce_sum`] gives over two launches: `groups` partials, then one workgroup over
/// them.
pub fn total_host(input: &[f32], groups: usize) -> f32 {
    reduce_sum_host(&reduce_sum_host(input, groups), 1)[0]
}
