//! The two patterns every workgroup-wide kernel here repeats, each with its host mirror: a
//! lane folding a strided run of a row, and a workgroup folding one value per lane into one
//! through a tree in shared memory. The mirrors perform the kernel's operations in the
//! kernel's order, so where those operations are exact (`+`, `max`) a mirror gives the
//! device's bits.

use lockstep::kernel::{ElemType, KernelBuilder, Shared, Value, Var};

/// How two values fold into one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// `a + b`.
    Sum,
    /// The larger of `a` and `b`.
    Max,
}

impl Fold {
    /// The fold in the IR.
    pub fn expr(self, a: Value, b: Value) -> Value {
        match self {
            Fold::Sum => a + b,
            Fold::Max => a.max(b),
        }
    }

    /// The fold on the host, with the IR's semantics (inputs hold no NaN).
    pub fn host(self, a: f32, b: f32) -> f32 {
        match self {
            Fold::Sum => a + b,
            Fold::Max => a.max(b),
        }
    }
}

/// Emits, for the invocation with local id `lane` of a workgroup of `lanes`:
/// `acc = init; for c in (lane, lane + lanes, …) while c < end { acc = fold(acc, item(c)) }`,
/// and returns `acc`.
pub fn lane_fold(
    k: &mut KernelBuilder,
    lane: Value,
    lanes: u32,
    end: Value,
    init: f32,
    fold: Fold,
    item: impl Fn(Value) -> Value,
) -> Var {
    let acc = k.var(ElemType::F32, init);
    let c = k.var(ElemType::U32, lane);
    k.while_(c.get().lt(end), |k| {
        k.assign(acc, fold.expr(acc.get(), item(c.get())));
        k.assign(c, c.get() + lanes);
    });
    acc
}

/// The host mirror of [`lane_fold`] over `items`: one accumulator per lane.
pub fn lane_fold_host(items: &[f32], lanes: u32, init: f32, fold: Fold) -> Vec<f32> {
    let lanes = lanes as usize;
    (0..lanes)
        .map(|lane| {
            items
                .iter()
                .skip(lane)
                .step_by(lanes)
                .fold(init, |acc, &x| fold.host(acc, x))
        })
        .collect()
}

/// Emits a fold of `value` over the `lanes` invocations of a 1-D workgroup (a power of two,
/// at most `tree`'s length): each stores its value to `tree[lane]`, then `log2(lanes)` levels
/// `tree[l] = fold(tree[l], tree[l + stride])` for `l < stride`, halving `stride`, a barrier
/// after each. Returns a variable holding `tree[0]`, read by every invocation before a last
/// barrier, so the caller may reuse `tree` at once. Every invocation of the workgroup must
/// reach it (uniform control flow).
pub fn fold_workgroup(
    k: &mut KernelBuilder,
    tree: Shared,
    lane: Value,
    lanes: u32,
    value: Value,
    fold: Fold,
) -> Var {
    debug_assert!(lanes.is_power_of_two(), "a tree over {lanes} lanes");
    k.store(tree, lane, value);
    k.workgroup_barrier();
    let mut stride = lanes / 2;
    while stride > 0 {
        k.if_(lane.lt(stride), |k| {
            let folded = fold.expr(tree.load(lane), tree.load(lane + stride));
            k.store(tree, lane, folded);
        });
        k.workgroup_barrier();
        stride /= 2;
    }
    let result = k.var(ElemType::F32, tree.load(0u32));
    k.workgroup_barrier();
    result
}

/// The host mirror of [`fold_workgroup`] over one value per lane (a power of two of them).
pub fn fold_workgroup_host(mut values: Vec<f32>, fold: Fold) -> f32 {
    let mut stride = values.len() / 2;
    while stride > 0 {
        for l in 0..stride {
            values[l] = fold.host(values[l], values[l + stride]);
        }
        stride /= 2;
    }
    values[0]
}

/// Additions on the longest chain from an input to the result of a [`lane_fold`] over `len`
/// items followed by a [`fold_workgroup`] of `lanes`: what bounds a sum's rounding error.
pub fn sum_chain(len: usize, lanes: u32) -> usize {
    len.div_ceil(lanes as usize) + lanes.trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_mirrors_fold_in_the_kernel_order() {
        let items: Vec<f32> = (1..=10).map(|x| x as f32).collect();
        let lanes = lane_fold_host(&items, 4, 0.0, Fold::Sum);
        assert_eq!(
            lanes,
            vec![1.0 + 5.0 + 9.0, 2.0 + 6.0 + 10.0, 3.0 + 7.0, 4.0 + 8.0]
        );
        assert_eq!(fold_workgroup_host(lanes.clone(), Fold::Sum), 55.0);
        assert_eq!(fold_workgroup_host(lanes, Fold::Max), 18.0);
        assert_eq!(sum_chain(10, 4), 3 + 2);
    }
}
