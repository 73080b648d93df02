//! The end of a run reads back everything still live, so that a silent corruption no read of
//! the workload happened to look at still fails the seed.

use std::collections::VecDeque;

use lockstep::{Bytes, ComputeClient, Device, Handle, StreamId, block_on};

use super::{Tensor, descriptors, judge_read};
use crate::coverage::Method;
use crate::failure::Violation;
use crate::model::Model;

/// Reads every live slot's buffer, then every live tensor group's tensors, on `base`: one
/// `read_async` and one `read_tensor_async`, each skipped when there is nothing to read.
///
/// **Precondition:** every stream drained, so no model window is pending and each value is
/// exact (an injected fault's spoils excepted). [`materialize_pending`] follows; the shrinker's
/// printer makes the same calls in the same order after its drain (`rust_test`'s `teardown`).
pub(super) fn read_back_everything<D: Device>(
    base: &ComputeClient<D>,
    slots: &[Option<(Handle, u64)>],
    tensors: &[Option<Vec<Tensor>>],
    model: &mut Model,
) -> Result<(), Violation> {
    let s = base.stream_id();
    let (handles, bufs): (Vec<Handle>, Vec<u64>) = slots
        .iter()
        .flatten()
        .map(|(handle, buf)| (handle.clone(), *buf))
        .unzip();
    if !handles.is_empty() {
        let result = block_on(base.read_async(handles));
        let read = result.map(|r| bufs.into_iter().zip(r).collect());
        judge_read(model, (s, Method::ReadAsync), read)?;
    }
    let groups: Vec<&Vec<Tensor>> = tensors.iter().flatten().collect();
    if groups.is_empty() || model.lost {
        return Ok(());
    }
    let descriptors = groups.iter().flat_map(|g| descriptors(g)).collect();
    let bufs: Vec<u64> = groups.iter().flat_map(|g| g.iter().map(|t| t.2)).collect();
    let result = block_on(base.read_tensor_async(descriptors));
    let read = result.map(|r| bufs.into_iter().zip(r).collect());
    judge_read(model, (s, Method::ReadTensorAsync), read)
}

/// Materialises every lazy read not accessed yet, oldest first, each judged as a read on the
/// stream that made it (a lazy read's bytes are the device's at first access: after the drain,
/// what the model holds now). Stops once the device is lost.
pub(super) fn materialize_pending(
    lazies: &mut VecDeque<(Bytes, u64, StreamId)>,
    model: &mut Model,
) -> Result<(), Violation> {
    while let Some((lazy, buf, s)) = lazies.pop_front() {
        if model.lost {
            return Ok(());
        }
        let result = lazy.materialize().map(|b| Bytes::from(b.to_vec()));
        judge_read(
            model,
            (s, Method::Materialize),
            result.map(|b| vec![(buf, b)]),
        )?;
    }
    Ok(())
}
