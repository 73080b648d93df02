//! Tensor writes: `write_tensor` puts dense data where the strides say and nowhere else.

use lockstep::{Bytes, CopyDescriptor, IoError, MemoryLayoutDescriptor, MemoryLayoutStrategy};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;

use super::data::random_bytes;
use super::{Failure, RunConfig, expect_baseline, expect_clean, run_cases};
use crate::factory::DeviceFactory;

/// How the tensor written lies in its memory.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// As `create_tensor` laid it out: dense, or with pitched rows.
    Created(MemoryLayoutStrategy),
    /// The first columns of a dense matrix `extra` columns wider (a 1-D tensor: the first
    /// elements of a longer buffer).
    ColumnBlock { extra: usize },
    /// A dense buffer read column-major: the innermost stride is the outer dimension's size.
    Transposed,
}

#[derive(Clone, Debug)]
struct Case {
    placement: Placement,
    shape: Vec<usize>,
    elem_size: usize,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    let placement = prop_oneof![
        Just(Placement::Created(MemoryLayoutStrategy::Optimized)),
        Just(Placement::Created(MemoryLayoutStrategy::Contiguous)),
        (1..=3usize).prop_map(|extra| Placement::ColumnBlock { extra }),
        Just(Placement::Transposed),
    ];
    (
        placement,
        vec(0..=6usize, 0..=3),
        select(vec![1usize, 2, 4, 8, 12]),
        any::<u64>(),
    )
        .prop_map(|(placement, shape, elem_size, seed)| Case {
            placement,
            shape,
            elem_size,
            seed,
        })
}

/// Element strides of a tensor of `shape` placed as `placement` in a buffer the test
/// creates, and that buffer's size in elements.
fn strides_and_elems(placement: Placement, shape: &[usize]) -> (Vec<usize>, usize) {
    match (placement, shape) {
        (Placement::ColumnBlock { extra }, [outer @ .., columns]) => {
            let mut parent = outer.to_vec();
            parent.push(columns + extra);
            (
                lockstep::contiguous_strides(&parent),
                parent.iter().product(),
            )
        }
        (Placement::Transposed, _) => {
            let reversed: Vec<usize> = shape.iter().rev().copied().collect();
            let mut strides = lockstep::contiguous_strides(&reversed);
            strides.reverse();
            (strides, shape.iter().product())
        }
        _ => (lockstep::contiguous_strides(shape), shape.iter().product()),
    }
}

/// The bytes of a buffer holding `before` after dense `data` is written with `strides`: the
/// reference, computed element by element.
fn expected_after(
    before: &[u8],
    data: &[u8],
    shape: &[usize],
    strides: &[usize],
    elem_size: usize,
) -> Vec<u8> {
    let mut after = before.to_vec();
    let mut index = vec![0usize; shape.len()];
    for elem in data.chunks_exact(elem_size) {
        let offset: usize =
            index.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>() * elem_size;
        after[offset..offset + elem_size].copy_from_slice(elem);
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    after
}

pub(super) fn tensor_writes<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(config, "tensor_writes", case(), |case| {
        let session = factory.open(case.seed);
        let c = &session.client;
        let baseline = c.memory_usage().map_err(|e| format!("memory_usage: {e}"))?;
        let Case {
            placement,
            shape,
            elem_size,
            seed,
        } = case;
        let data_bytes = shape.iter().product::<usize>() * elem_size;
        let (memory, strides) = match placement {
            Placement::Created(strategy) => {
                let desc = MemoryLayoutDescriptor::new(strategy, shape.clone(), elem_size);
                let initial = Bytes::from(random_bytes(data_bytes, seed ^ 1));
                let mut layouts = c
                    .create_tensors(vec![(desc, initial)])
                    .map_err(|e| format!("create_tensors: {e}"))?;
                let layout = layouts.remove(0);
                (layout.memory, layout.strides)
            }
            _ => {
                let (strides, elems) = strides_and_elems(placement, &shape);
                let initial = Bytes::from(random_bytes(elems * elem_size, seed ^ 1));
                let memory = c.create(initial).map_err(|e| format!("create: {e}"))?;
                (memory, strides)
            }
        };
        let read_raw = |what: &str| {
            c.read_one(memory.clone())
                .map(|b| b.into_vec())
                .map_err(|e| format!("{what}: {e}"))
        };
        let before = read_raw("read before the write")?;
        let tensor = CopyDescriptor::new(memory.clone(), shape.clone(), strides.clone(), elem_size);

        // Data of the wrong size is refused and writes nothing.
        let short = Bytes::from(vec![0u8; data_bytes + elem_size]);
        match c.write_tensor(tensor.clone(), short) {
            Err(IoError::SizeMismatch { .. }) => {}
            other => return Err(format!("data one element too long: {other:?}")),
        }

        let data = random_bytes(data_bytes, seed ^ 2);
        c.write_tensor(tensor.clone(), Bytes::from(data.clone()))
            .map_err(|e| format!("write_tensor with strides {strides:?}: {e}"))?;
        let after = read_raw("read after the write")?;
        ensure!(
            after == expected_after(&before, &data, &shape, &strides, elem_size),
            "write_tensor with strides {strides:?} left other bytes than the reference"
        );
        let read = lockstep::block_on(c.read_one_tensor_async(tensor))
            .map_err(|e| format!("read_tensor: {e}"))?;
        ensure!(
            read[..] == data[..],
            "read_tensor after write_tensor with strides {strides:?} differs"
        );
        drop(memory);
        expect_baseline(c, baseline)?;
        expect_clean(&session)
    })
}
