//! Error surfacing: an asynchronous failure is returned once, on its stream, in order.

use proptest::prelude::*;

use super::ordering::{MAX_OPS, MAX_STREAMS, run_program};
use super::{Failure, RunConfig, run_cases};
use crate::factory::DeviceFactory;
use crate::program::{Op, SLOTS, Step, program};

pub(super) fn error_surfacing<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    // Programs with random faults, plus one guaranteed fault at a random point.
    let strategy = (
        program(MAX_STREAMS, MAX_OPS, true),
        any::<prop::sample::Index>(),
        any::<usize>(),
        0..SLOTS,
        0u32..8,
    )
        .prop_map(|(mut program, at, stream, slot, past_end)| {
            let at = SLOTS + at.index(program.ops.len() - SLOTS + 1);
            let op = Op {
                stream: stream % program.streams,
                step: Step::Fault { slot, past_end },
            };
            program.ops.insert(at, op);
            program
        });
    run_cases(config, "error_surfacing", strategy, |program| {
        run_program(factory, &program).map(|_| ())
    })
}
