//! Running the suite: every property on one device, and the replay of one seeded case.

use crate::factory::{DeviceFactory, SimFactory};
use crate::program::Program;
use crate::properties::{self, Failure, RunConfig};

/// How one property fared.
#[derive(Debug)]
pub struct PropertyResult {
    pub name: &'static str,
    pub summary: &'static str,
    pub cases: u32,
    pub outcome: Result<(), Failure>,
}

/// Runs every property (or only `only`) on `factory`'s device. `on_start` is called with each
/// property's name before it runs.
pub fn check<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
    only: Option<&str>,
    mut on_start: impl FnMut(&str),
) -> Vec<PropertyResult> {
    properties::all::<F>()
        .into_iter()
        .filter(|p| only.is_none_or(|name| name == p.name))
        .map(|p| {
            on_start(p.name);
            PropertyResult {
                name: p.name,
                summary: p.summary,
                cases: config.cases,
                outcome: (p.check)(factory, config),
            }
        })
        .collect()
}

/// Names of every property, in suite order.
pub fn property_names() -> Vec<&'static str> {
    properties::all::<SimFactory>()
        .into_iter()
        .map(|p| p.name)
        .collect()
}

/// The command that reruns `property` exactly as it ran.
pub fn replay_command(device: &str, property: &str, config: RunConfig) -> String {
    format!(
        "lockstep check --device {device} --property {property} --seed {} --cases {}",
        config.seed, config.cases
    )
}

/// The default multi-stream case of a seed: the first `stream_ordering` program a run with
/// that seed draws, on a simulator seeded with the same seed.
pub fn default_case(seed: u64) -> Program {
    let mut program = properties::first_case(
        seed,
        "stream_ordering",
        crate::program::program(
            properties::ordering_limits().0,
            properties::ordering_limits().1,
            false,
        ),
    );
    program.sim_seed = seed;
    program
}

/// A replayed case: its trace hash and every operation it executed.
#[derive(Debug)]
pub struct Replay {
    pub trace_hash: u64,
    pub trace: Vec<lockstep_sim::TraceEntry>,
}

/// Runs a program twice on the simulator and checks that both runs executed the same
/// operations; a difference names the first diverging operation.
pub fn replay(program: &Program) -> Result<Replay, String> {
    let factory = SimFactory {
        record_trace: true,
        ..SimFactory::default()
    };
    let run = || -> Result<Replay, String> {
        let session = properties::run_program(&factory, program)?;
        let observer = session
            .observer
            .as_ref()
            .expect("the simulator has an observer");
        Ok(Replay {
            trace_hash: observer
                .trace_hash()
                .expect("the simulator hashes its trace"),
            trace: observer.trace(),
        })
    };
    let (first, second) = (run()?, run()?);
    if first.trace_hash != second.trace_hash {
        let at = first
            .trace
            .iter()
            .zip(&second.trace)
            .position(|(a, b)| a != b)
            .unwrap_or(first.trace.len().min(second.trace.len()));
        return Err(format!(
            "nondeterminism: two runs of seed {} diverge at operation #{at}: {:?} vs {:?}",
            program.sim_seed,
            first.trace.get(at),
            second.trace.get(at)
        ));
    }
    Ok(first)
}
