//! Kernels that do real work (`lockstep_kernels::ops`) compute their references on every device: the
//! reduction bit for bit, the softmax, layer norm and tiled matrix product within their stated
//! bounds, and a captured decode step replayed as a decode loop, each stage checked.

use lockstep::StreamId;
use proptest::prelude::*;

use super::{Failure, RunConfig, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::ops::check::{layer_norm_rows, product, reduce, softmax_rows};
use lockstep_kernels::ops::decode::{Dims, Weights, run_decode};

/// One case: sizes, and the seed every input is drawn from.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    reduce: (usize, usize),
    rows: usize,
    cols: usize,
    product: (usize, usize, usize),
    decode_steps: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        (0usize..3000, 1usize..4),
        1usize..4,
        1usize..300,
        (1usize..160, 1usize..160, 1usize..40),
        1usize..4,
    )
        .prop_map(|(seed, reduce, rows, cols, product, decode_steps)| Case {
            seed,
            reduce,
            rows,
            cols,
            product,
            decode_steps,
        })
}

pub(super) fn real_kernels<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(config, "real_kernels", case(), |case| {
        let session = factory.open(case.seed);
        let mut c = session.client.clone();
        reduce(&c, case.seed, case.reduce)?;
        softmax_rows(&c, case.seed, case.rows, case.cols)?;
        layer_norm_rows(&c, case.seed, case.rows, case.cols)?;
        product(&c, case.seed, case.product)?;
        // A graph replays on the stream it was captured on.
        c.set_stream(StreamId(0));
        let weights = Weights::generate(Dims::SMALL, case.seed);
        let first = (case.seed % Dims::SMALL.vocab as u64) as u32;
        run_decode(&c, &weights, first, case.decode_steps)?;
        expect_clean(&session)
    })
}
