//! Runs a [`ProcessWorld`]: the rendezvous over the simulator's network, then its rounds on
//! each joined process's client, and checks the outcome against the model.

use lockstep::distributed::world_devices;
use lockstep::kernel::Fnv1a;
use lockstep::{Bytes, ComputeClient, Device, Handle, ServerError};
use lockstep_sim::{
    FaultKind, FaultPlan, Rendezvous, SanitizerReport, ScriptedFault, SimConfig, SimProbe, SimWorld,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::model::{Seen, Step, expected, round_stream};
use super::{OPTIONS, ProcessFault, ProcessWorld};
use crate::Opener;
use crate::failure::{Check, ExploreFailure, ReportKind, Stage, Violation};
use lockstep_conformance::properties::{all_reduce_reference, all_reduce_values};

/// The most errors one wait of a step collects (a step fails in one or two ways).
const MAX_ERRORS: usize = 8;

/// What one run of a [`ProcessWorld`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessRun {
    /// What each process saw, in [`ProcessWorld::processes`]'s order.
    pub seen: Vec<Vec<Seen>>,
    /// The hash of the network's events.
    pub network_hash: u64,
    /// A hash of every world device's trace hash, in process order.
    pub device_hash: u64,
    /// What the world devices' sanitizers reported.
    pub reports: Vec<SanitizerReport>,
}

/// A joined process: its rank and its client.
struct Member<D: Device> {
    rank: u32,
    client: ComputeClient<D>,
}

/// Runs `world` once, on devices `opener` opens.
pub fn run<O: Opener>(opener: &O, world: &ProcessWorld) -> ProcessRun {
    let processes = world.processes();
    let sim = SimWorld::rendezvous(&processes, OPTIONS);
    let mut seen: Vec<Vec<Seen>> = sim
        .rendezvous
        .iter()
        .map(|outcome| vec![Seen::Rendezvous(outcome.clone())])
        .collect();
    let mut probes: Vec<SimProbe> = Vec::new();
    let mut members: Vec<Option<Member<O::Device>>> = processes
        .iter()
        .zip(&sim.rendezvous)
        .map(|(process, outcome)| {
            let Rendezvous::Joined(place) = outcome else {
                // A process that died after joining never opens its device.
                if let Some(devices) = sim.devices() {
                    devices.leave(process.env.rank);
                }
                return None;
            };
            let device = sim
                .devices_for(place)?
                .device(place.rank, device_config(world, place.rank))?;
            probes.push(device.probe());
            let client = ComputeClient::inline(opener.open(device), opener.options());
            Some(Member {
                rank: place.rank,
                client,
            })
        })
        .collect();
    for round in 0..world.rounds {
        for (member, seen) in members.iter_mut().zip(&mut seen) {
            let Some(m) = member else { continue };
            if world.fault
                == Some(ProcessFault::Crashes {
                    rank: m.rank,
                    round,
                })
            {
                // The process ends: its device drops, and leaves the hub.
                *member = None;
                seen.push(Seen::Ended { round });
            } else {
                m.client.set_stream(round_stream(round));
            }
        }
        for step in [Step::AllReduce, Step::Ring] {
            run_step(world, &mut members, &mut seen, round, step);
        }
    }
    drop(members);
    let mut device_hash = Fnv1a::default();
    let mut reports = Vec::new();
    for probe in &probes {
        let observations = probe.observations();
        device_hash.write_u64(observations.trace_hash);
        reports.extend(observations.reports.iter().cloned());
    }
    ProcessRun {
        seen,
        network_hash: sim.trace_hash,
        device_hash: device_hash.0,
        reports,
    }
}

/// Rank `rank`'s device: seeded from the world, losing itself where the world's fault says.
fn device_config(world: &ProcessWorld, rank: u32) -> SimConfig {
    let config = SimConfig::new(world.device_seed(rank));
    match world.fault {
        Some(ProcessFault::DeviceLost { rank: lost, round }) if lost == rank => {
            let loss = ScriptedFault::at(FaultKind::DeviceLoss, 1)
                .on_stream(round_stream(round))
                .expect("a device loss can be aimed at a stream");
            config.with_faults(FaultPlan::scripted([loss]))
        }
        _ => config,
    }
}

/// One step of `round`: every member enqueues its part, then every member waits and reads.
/// A member whose call failed, or whose device is lost, ends there (its device leaves the hub,
/// so its peers' waits end).
fn run_step<D: Device>(
    world: &ProcessWorld,
    members: &mut [Option<Member<D>>],
    seen: &mut [Vec<Seen>],
    round: u32,
    step: Step,
) {
    let parts: Vec<Option<Result<Handle, ServerError>>> = members
        .iter()
        .map(|m| m.as_ref().map(|m| enqueue(world, m, round, step)))
        .collect();
    for ((member, part), seen) in members.iter_mut().zip(&parts).zip(seen.iter_mut()) {
        if let Some(Err(error)) = part {
            let errors = vec![error.clone()];
            seen.push(Seen::Failed {
                round,
                step,
                errors,
            });
            *member = None;
        }
    }
    for ((member, part), seen) in members.iter_mut().zip(parts).zip(seen.iter_mut()) {
        let (Some(m), Some(Ok(handle))) = (member.as_ref(), part) else {
            continue;
        };
        let outcome = wait(world, m, handle, round, step);
        let lost = matches!(&outcome, Seen::Failed { errors, .. }
            if errors.iter().any(|e| matches!(e, ServerError::DeviceLost { .. })));
        seen.push(outcome);
        if lost {
            *member = None;
        }
    }
}

/// Member `m`'s part of a step: the handle its result lands in.
fn enqueue<D: Device>(
    world: &ProcessWorld,
    m: &Member<D>,
    round: u32,
    step: Step,
) -> Result<Handle, ServerError> {
    let c = &m.client;
    let src = c.create(input(world, m.rank, round, step))?;
    let devices = world_devices(D::TYPE_ID, world.world_size);
    match step {
        Step::AllReduce => {
            let dst = c.empty(world.elems * 4)?;
            c.all_reduce(src, dst.clone(), world.elem, devices, world.op)?;
            Ok(dst)
        }
        Step::Ring => {
            let size = world.world_size;
            c.send_to(src, devices[((m.rank + 1) % size) as usize])?;
            let from = devices[((m.rank + size - 1) % size) as usize];
            c.receive_from(from, world.elems * 4)
        }
    }
}

/// Member `m` waits for its step: every error its stream holds, else its bytes against the
/// reference.
fn wait<D: Device>(
    world: &ProcessWorld,
    m: &Member<D>,
    handle: Handle,
    round: u32,
    step: Step,
) -> Seen {
    let mut errors = Vec::new();
    while errors.len() < MAX_ERRORS {
        match m.client.sync() {
            Ok(()) => break,
            Err(error) => {
                let lost = matches!(error, ServerError::DeviceLost { .. });
                errors.push(error);
                if lost {
                    break;
                }
            }
        }
    }
    if !errors.is_empty() {
        return Seen::Failed {
            round,
            step,
            errors,
        };
    }
    let read = match m.client.read_one(handle) {
        Ok(bytes) => bytes.to_elems::<u32>(),
        Err(error) => {
            let errors = vec![error];
            return Seen::Failed {
                round,
                step,
                errors,
            };
        }
    };
    let reference = match step {
        Step::AllReduce => {
            let inputs: Vec<Bytes> = (0..world.world_size)
                .map(|rank| input(world, rank, round, step))
                .collect();
            all_reduce_reference(&inputs, world.elem, world.op)
        }
        Step::Ring => {
            let previous = (m.rank + world.world_size - 1) % world.world_size;
            input(world, previous, round, step).to_elems::<u32>()
        }
    };
    if read == reference {
        Seen::Exact { round, step }
    } else {
        let detail = format!("expected words {reference:?}, read {read:?}");
        Seen::Wrong {
            round,
            step,
            detail,
        }
    }
}

/// What rank `rank` contributes to a step of `round`.
fn input(world: &ProcessWorld, rank: u32, round: u32, step: Step) -> Bytes {
    let mut hash = Fnv1a::default();
    for word in [world.seed, u64::from(rank), u64::from(round), step as u64] {
        hash.write_u64(word);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(hash.0);
    all_reduce_values(world.elem, world.op, world.elems, &mut rng)
}

/// Runs `world` twice and checks it: each process saw what the model says, no sanitizer
/// report, and the second run did exactly what the first did. Returns the first run, or why
/// the world failed.
///
/// # Errors
/// Why it failed: a process's outcome, a sanitizer report or nondeterminism, in
/// [`Stage::Processes`].
pub fn check<O: Opener>(opener: &O, world: &ProcessWorld) -> Result<ProcessRun, ExploreFailure> {
    let failed = |check, detail| Err(Violation::new(check, detail).in_stage(Stage::Processes));
    let first = run(opener, world);
    let model = expected(world);
    if let Some(why) = differs(world, &first.seen, &model) {
        let detail = format!("process world ({}): {why}", world.outcome());
        return failed(Check::ProcessOutcome, detail);
    }
    if let Some(report) = first.reports.first() {
        let detail = format!("process world: a world device reported {report:?}");
        return failed(Check::Sanitizer(ReportKind::of(report)), detail);
    }
    let second = run(opener, world);
    if second != first {
        let detail = format!(
            "process world: nondeterminism: two runs gave network hashes {:016x} and {:016x}, device hashes {:016x} and {:016x}",
            first.network_hash, second.network_hash, first.device_hash, second.device_hash
        );
        return failed(Check::Nondeterminism, detail);
    }
    Ok(first)
}

/// The first difference between what processes saw and what the model expects.
pub(super) fn differs(
    world: &ProcessWorld,
    seen: &[Vec<Seen>],
    model: &[Vec<Seen>],
) -> Option<String> {
    let processes = world.processes();
    for ((process, seen), model) in processes.iter().zip(seen).zip(model) {
        let index = (0..seen.len().max(model.len())).find(|&i| seen.get(i) != model.get(i));
        if let Some(i) = index {
            let show = |seen: Option<&Seen>| seen.map_or("nothing".to_owned(), Seen::to_string);
            return Some(format!(
                "rank {} saw \"{}\" where the model expects \"{}\"",
                process.env.rank,
                show(seen.get(i)),
                show(model.get(i))
            ));
        }
    }
    None
}
