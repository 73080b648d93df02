//! One seed of a recording: its calls in the seed's order ([`Plan::order`]) through the
//! replay's one path ([`Replayer`]) on simulators seeded from it, each call checked as it
//! runs (a panic, a sanitizer finding, the watchdog, a result other than recorded), then
//! every recorded stream drained and every injected fault looked for among the errors the
//! calls returned.
//!
//! Results are compared only until a fault is injected: after it, what a call returns is the
//! fault's doing, and the checks are that it comes back as an error, never a panic or a hang.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

use lockstep::record::{DeviceRecord, RecordTo};
use lockstep::replay::{ReplayError, Replayer};
use lockstep::{ComputeClient, ServerOptions, StreamId};
use lockstep_sim::{FaultKind, FaultPlan, InjectedFault, SimConfig, SimDevice, SimProbe};

use super::faults::{self, Fault};
use super::order::Plan;
use super::recording::Recording;
use super::verdict::{CallAt, RecordedFailure};
use crate::driver::audit_observed;
use crate::failure::{Check, Violation};
use crate::world::WATCHDOG_NS;

/// What one seed of a recording did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedRun {
    /// The seed: the order of the threads, the simulators' interleaving, the fault.
    pub seed: u64,
    /// Calls run.
    pub calls_run: u64,
    /// Results (reads and waiting calls' outcomes) found equal to the recorded run's.
    pub results_compared: u64,
    /// Faults the simulators injected.
    pub faults_injected: u64,
    /// Why the seed failed; `None` when every check held.
    pub failure: Option<RecordedFailure>,
}

/// The simulators a seed opened, with their probes, in the order the recording declared them.
type Opened = Rc<RefCell<Vec<(ComputeClient<SimDevice>, SimProbe)>>>;

/// Runs `recording` (whose [`Plan`] is `plan`) under seed `seed`, injecting one fault drawn
/// from the seed if `faults`.
///
/// # Errors
/// [`ReplayError`] if a call names a device the recording never declared.
pub fn run_seed(
    recording: &Recording,
    plan: &Plan,
    seed: u64,
    faults: bool,
) -> Result<SeedRun, ReplayError> {
    let fault = faults.then(|| faults::draw(recording, seed)).flatten();
    run_in_order(recording, &plan.order(seed), seed, fault.as_ref())
}

/// Runs `recording`'s calls in `order` (indices into its calls) on simulators seeded from
/// `seed`, one injecting `fault`: what a seed does once its order and fault are drawn, and
/// what the shrinker runs with the failing order and fault kept.
///
/// # Errors
/// [`ReplayError`] if a call names a device the recording never declared.
pub fn run_in_order(
    recording: &Recording,
    order: &[usize],
    seed: u64,
    fault: Option<&Fault>,
) -> Result<SeedRun, ReplayError> {
    let opened = Opened::default();
    let mut replayer = Replayer::new(opener(opened.clone(), seed, fault.cloned()));
    for declaration in &recording.declarations {
        replayer.event(declaration.clone())?;
    }
    let mut run = SeedRun {
        seed,
        ..SeedRun::default()
    };
    run.failure = run_calls(recording, order, &mut replayer, &opened, &mut run)?;
    let mut errors: Vec<String> = replayer.errors().iter().map(|(_, e)| e.clone()).collect();
    errors.extend(drain(recording, &opened));
    let unknown_contents = replayer.has_unknown_contents();
    let report = replayer.report();
    run.results_compared = report.reads_matched + report.outcomes_matched;
    // Releases what the replay holds, then the clients: every operation has run.
    drop(replayer);
    let probes: Vec<SimProbe> = opened.borrow_mut().drain(..).map(|(_, p)| p).collect();
    run.faults_injected = probes
        .iter()
        .map(|p| p.observations().faults.len() as u64)
        .sum();
    if run.failure.is_none() {
        run.failure = audit_end(&probes, &errors, unknown_contents).err();
    }
    Ok(run)
}

/// Opens each recorded device as a simulator seeded from `seed` (device `d` gets `seed + d`,
/// as `lockstep replay --recording` does), the fault's device injecting it, not recording.
fn opener(
    opened: Opened,
    seed: u64,
    fault: Option<Fault>,
) -> impl FnMut(&DeviceRecord) -> ComputeClient<SimDevice> {
    move |device| {
        let faults = (fault.as_ref())
            .filter(|fault| fault.device == device.device)
            .map_or_else(FaultPlan::default, |fault| fault.plan.clone());
        let config = SimConfig {
            watchdog_ns: WATCHDOG_NS,
            ..SimConfig::new(seed.wrapping_add(u64::from(device.device))).with_faults(faults)
        };
        let sim = SimDevice::new(config);
        let probe = sim.probe();
        let options = ServerOptions {
            record: RecordTo::Off,
            ..ServerOptions::default()
        };
        let client = ComputeClient::inline(sim, options);
        opened.borrow_mut().push((client.clone(), probe));
        client
    }
}

/// Runs the calls in `order`, stopping at the first that fails a check.
fn run_calls<F: FnMut(&DeviceRecord) -> ComputeClient<SimDevice>>(
    recording: &Recording,
    order: &[usize],
    replayer: &mut Replayer<SimDevice, F>,
    opened: &Opened,
    run: &mut SeedRun,
) -> Result<Option<RecordedFailure>, ReplayError> {
    for &i in order {
        let call = &recording.calls[i];
        let at = CallAt {
            call: call.call,
            thread: call.thread,
            stream: call.stream,
        };
        let place = Some((at, call.op.kind()));
        match catch_unwind(AssertUnwindSafe(|| replayer.event(call.event()))) {
            Ok(result) => result?,
            Err(panic) => {
                let violation = Violation::panicked(panic.as_ref());
                return Ok(Some(RecordedFailure::observed(violation, place)));
            }
        }
        run.calls_run += 1;
        let probes: Vec<SimProbe> = opened.borrow().iter().map(|(_, p)| p.clone()).collect();
        if let Err(violation) = audit(&probes, replayer.has_unknown_contents()) {
            return Ok(Some(RecordedFailure::observed(violation, place)));
        }
        let injected = probes.iter().any(|p| !p.observations().faults.is_empty());
        if let (false, Some(outcome)) = (injected, call.outcome_event()) {
            replayer.event(outcome)?;
        }
        if let Some(mismatch) = replayer.report().mismatches.first() {
            return Ok(Some(RecordedFailure::differs(mismatch)));
        }
    }
    Ok(None)
}

/// The simulators' own verdicts so far: the watchdog and the sanitizers. Reads of bytes never
/// written are excused where a transfer failed or the replay skipped a call that wrote
/// (`unknown_contents`): they are the fault's or the skip's doing.
fn audit(probes: &[SimProbe], unknown_contents: bool) -> Result<(), Violation> {
    for probe in probes {
        let observed = probe.observations();
        let transfer_faults =
            (observed.faults.iter()).any(|f| f.kind == FaultKind::TransferFailure);
        audit_observed(transfer_faults || unknown_contents, &observed)?;
    }
    Ok(())
}

/// Syncs every recorded stream of every device until it succeeds (a sync returns one failure
/// at a time), returning the errors.
fn drain(recording: &Recording, opened: &Opened) -> Vec<String> {
    /// More syncs than failures a stream can owe when one fault is injected.
    const SYNCS_PER_STREAM_MAX: usize = 4;
    let streams: BTreeSet<(u32, u64)> = (recording.calls.iter())
        .map(|c| (c.device, c.stream))
        .collect();
    let clients: Vec<ComputeClient<SimDevice>> =
        opened.borrow().iter().map(|(c, _)| c.clone()).collect();
    let mut errors = Vec::new();
    for (device, stream) in streams {
        let Some(mut client) = clients.get(device as usize).cloned() else {
            continue;
        };
        client.set_stream(StreamId(stream));
        for _ in 0..SYNCS_PER_STREAM_MAX {
            match client.sync() {
                Ok(()) => break,
                Err(err) => errors.push(err.to_string()),
            }
        }
    }
    errors
}

/// The checks after the calls: the simulators' verdicts, then every injected transfer or
/// kernel fault returned by some call (by its tag), or on a lost device some error returned.
/// An allocation failure is returned by its create at once: the replay counts it refused.
fn audit_end(
    probes: &[SimProbe],
    errors: &[String],
    unknown_contents: bool,
) -> Result<(), RecordedFailure> {
    audit(probes, unknown_contents)
        .map_err(|violation| RecordedFailure::observed(violation, None))?;
    for probe in probes {
        let observed = probe.observations();
        let lost = observed
            .faults
            .iter()
            .any(|f| f.kind == FaultKind::DeviceLoss);
        let surfaced = |fault: &InjectedFault| {
            (errors.iter()).any(|e| InjectedFault::id_in(e) == Some(fault.id))
                || (lost && !errors.is_empty())
        };
        let missing = (observed.faults.iter())
            .find(|f| f.kind != FaultKind::AllocationFailure && !surfaced(f));
        if let Some(fault) = missing {
            let violation = Violation::new(
                Check::FaultNeverSurfaced(fault.kind),
                format!(
                    "the injected {:?} {} never surfaced as an error",
                    fault.kind,
                    fault.tag()
                ),
            );
            return Err(RecordedFailure::observed(violation, None));
        }
    }
    Ok(())
}
