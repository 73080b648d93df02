//! Injected device faults: random multi-stream programs on a device that fails transfers,
//! kernels and allocations on purpose, judged by [`FaultAudit`](crate::audit::FaultAudit).
//! Only devices that inject faults (the simulator) run these properties.

use std::cell::Cell;

use lockstep_sim::{FaultKind, FaultPlan, FaultRates, ScriptedFault};
use proptest::collection::vec;
use proptest::prelude::*;

use super::ordering::{MAX_OPS, MAX_STREAMS};
use super::{Failure, RunConfig, expect_baseline, run_cases};
use crate::audit::FaultStats;
use crate::factory::DeviceFactory;
use crate::program::{Executor, Program, program};

pub(super) fn injected_faults<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    audited(
        factory,
        config,
        "injected_faults",
        execution_faults(),
        &Cell::default(),
    )
}

pub(super) fn allocation_refusals<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    audited(
        factory,
        config,
        "allocation_refusals",
        allocation_faults(),
        &Cell::default(),
    )
}

/// How often `property` (`injected_faults` or `allocation_refusals`) reached the paths it
/// exists for, over the cases `config` draws; `None` for another name.
pub fn coverage<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
    property: &str,
) -> Option<Result<FaultStats, Failure>> {
    let stats = Cell::default();
    let outcome = match property {
        "injected_faults" => audited(factory, config, property, execution_faults(), &stats),
        "allocation_refusals" => audited(factory, config, property, allocation_faults(), &stats),
        _ => return None,
    };
    Some(outcome.map(|()| stats.get()))
}

/// Transfer and kernel failures: windows of consecutive ones (several in one batch, often on
/// two streams at once) and low per-operation rates.
fn execution_faults() -> BoxedStrategy<FaultPlan> {
    let windows = |kind| vec(window(kind, 24, 4), 0..=2);
    (
        windows(FaultKind::TransferFailure),
        windows(FaultKind::KernelFault),
        rate(),
        rate(),
    )
        .prop_map(
            |(transfers, kernels, transfer_failure, kernel_fault)| FaultPlan {
                scripted: transfers.into_iter().chain(kernels).collect(),
                rates: FaultRates {
                    transfer_failure,
                    kernel_fault,
                    ..FaultRates::default()
                },
            },
        )
        .boxed()
}

/// Allocation refusals: windows of one (the runtime's retry succeeds) to three (the retry
/// fails too, and maybe the next allocation), among the first allocations of a program.
fn allocation_faults() -> BoxedStrategy<FaultPlan> {
    (
        vec(window(FaultKind::AllocationFailure, 8, 3), 1..=2),
        rate(),
    )
        .prop_map(|(scripted, allocation_failure)| FaultPlan {
            scripted,
            rates: FaultRates {
                allocation_failure,
                ..FaultRates::default()
            },
        })
        .boxed()
}

/// `1..=count` consecutive triggers of `kind` fault, from one of the first `last` triggers.
fn window(kind: FaultKind, last: u64, count: u64) -> impl Strategy<Value = ScriptedFault> {
    (1..=last, 1..=count).prop_map(move |(nth, count)| ScriptedFault::window(kind, nth, count))
}

/// No random faults in half the cases, a low rate in the others.
fn rate() -> BoxedStrategy<f64> {
    prop_oneof![Just(0.0), 0.01..0.08].boxed()
}

/// Runs programs without planted kernel faults on devices that inject `plans`' faults.
fn audited<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
    name: &str,
    plans: BoxedStrategy<FaultPlan>,
    stats: &Cell<FaultStats>,
) -> Result<(), Failure> {
    let strategy = (program(MAX_STREAMS, MAX_OPS, false), plans);
    run_cases(config, name, strategy, |(program, plan)| {
        let case = run_with_faults(factory, &program, &plan)?;
        let mut total = stats.get();
        total += case;
        stats.set(total);
        Ok(())
    })
}

/// Runs `program` on a fresh device injecting `plan`'s faults, audits every error and read,
/// then checks that memory returns to its baseline and that the sanitizer saw nothing but
/// reads of bytes a failed write never wrote.
fn run_with_faults<F: DeviceFactory>(
    factory: &F,
    program: &Program,
    plan: &FaultPlan,
) -> Result<FaultStats, String> {
    let session = factory
        .open_with_faults(program.sim_seed, plan)
        .ok_or("the device cannot inject faults")?;
    let observer = session
        .observer
        .as_deref()
        .ok_or("the device does not list the faults it injects")?;
    let client = &session.client;
    let baseline = client.memory_usage().map_err(|e| e.to_string())?;
    let mut executor = Executor::with_faults(client, program.streams, observer)?;
    executor.run(&program.ops)?;
    executor.finish()?;
    executor.release_all();
    executor.finish()?;
    let stats = executor.audit.as_ref().map(|a| a.stats).unwrap_or_default();
    drop(executor);
    expect_baseline(client, baseline)?;
    match session.reports(true).as_slice() {
        [] => Ok(stats),
        reports => Err(format!("sanitizer reports: {reports:#?}")),
    }
}
