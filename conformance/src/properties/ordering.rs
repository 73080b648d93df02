//! Stream ordering: what one thread or several submit is executed as a sequential model says.

use proptest::collection::vec;

use super::{Failure, RunConfig, expect_baseline, expect_clean, run_cases};
use crate::factory::{DeviceFactory, Session};
use crate::program::{Executor, Program, program};

/// Most streams a generated program uses.
pub const MAX_STREAMS: usize = 4;
/// Most operations after the initial creates.
pub const MAX_OPS: usize = 40;

pub(super) fn stream_ordering<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(
        config,
        "stream_ordering",
        program(MAX_STREAMS, MAX_OPS, false),
        |program| run_program(factory, &program).map(|_| ()),
    )
}

/// Runs `program` on a fresh device pinned stream by stream, then checks that every fault was
/// surfaced, that memory returns to its baseline once all handles drop, and that the device's
/// sanitizer saw nothing. Returns the session, whose observer holds the device's trace.
pub fn run_program<F: DeviceFactory>(
    factory: &F,
    program: &Program,
) -> Result<Session<F::Device>, String> {
    let session = factory.open(program.sim_seed);
    let client = &session.client;
    let baseline = client.memory_usage().map_err(|e| e.to_string())?;
    let mut executor = Executor::new(client, program.streams, true);
    executor.run(&program.ops)?;
    executor.finish()?;
    executor.release_all();
    executor.finish()?;
    expect_baseline(client, baseline)?;
    expect_clean(&session)?;
    Ok(session)
}

pub(super) fn concurrent_submitters<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let programs = vec(program(1, 30, false), 2..=4);
    run_cases(config, "concurrent_submitters", programs, |programs| {
        let session = factory.open(programs[0].sim_seed);
        let client = &session.client;
        let baseline = client.memory_usage().map_err(|e| e.to_string())?;
        // Each OS thread runs its own program on its own (thread) stream.
        let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let threads: Vec<_> = programs
                .iter()
                .map(|p| {
                    scope.spawn(move || {
                        let mut executor = Executor::new(client, 1, false);
                        executor.run(&p.ops)?;
                        executor.finish()?;
                        executor.release_all();
                        executor.finish()
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err("submitter thread panicked".into()))
                })
                .collect()
        });
        for (thread, result) in results.into_iter().enumerate() {
            result.map_err(|why| format!("thread {thread}: {why}"))?;
        }
        expect_baseline(client, baseline)?;
        expect_clean(&session)
    })
}
