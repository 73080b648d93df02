//! Self-test of `check`'s fault properties: a simulator that mishandles failures on purpose, one
//! way at a time, must fail the property named for it within `check`'s default budget; the
//! honest wrapper passes the same seeds, so what is caught is the misbehaviour. What a wrapper
//! cannot run reads `n/a`: the fault properties where it injects none, `all_reduce` always (it
//! has no collectives).
//!
//! Run with `--nocapture` to see the cases-to-detection and the message of each.

use lockstep::{ComputeClient, Device, DeviceError};
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::properties::faults::coverage;
use lockstep_conformance::suite::{self, Outcome};
use lockstep_conformance::{DeviceFactory, Session, SimFactory};
use lockstep_harness::misbehaving::{Behaviour, Misbehaving};
use lockstep_sim::{FaultPlan, SimConfig, SimDevice};

/// `lockstep check`'s default number of cases per property.
const DEFAULT_CASES: u32 = 128;
const SEEDS: u64 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Misbehaviour {
    /// `take_errors` returning several failures drops the second.
    DropOneOfSeveral,
    /// `take_errors` holds a stream's failures back and returns them for the next other stream
    /// that asks.
    WrongStream,
    /// An allocation the device refuses panics instead of returning `OutOfMemory`.
    PanicOnRefusal,
}

/// One way of mishandling failures (or none), and the failures it holds back. It keeps the
/// trait's default of no collectives.
#[derive(Debug)]
struct Mishandling<D: Device> {
    kind: Option<Misbehaviour>,
    /// Failures held back, with the stream they happened on.
    held: Vec<(D::Stream, DeviceError)>,
}

impl<D: Device> Mishandling<D> {
    fn take_errors_misrouted(&mut self, inner: &mut D, stream: D::Stream) -> Vec<DeviceError> {
        let (others, own): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(origin, _)| *origin != stream);
        self.held = own;
        let errors = inner.take_errors(stream);
        self.held.extend(errors.into_iter().map(|e| (stream, e)));
        others.into_iter().map(|(_, e)| e).collect()
    }
}

impl<D: Device> Behaviour<D> for Mishandling<D> {
    const COLLECTIVES: bool = false;

    fn allocate(&mut self, inner: &mut D, bytes: u64) -> Result<D::Buffer, DeviceError> {
        match inner.allocate(bytes) {
            Err(err @ DeviceError::OutOfMemory { .. })
                if self.kind == Some(Misbehaviour::PanicOnRefusal) =>
            {
                panic!("allocation refused: {err}")
            }
            other => other,
        }
    }
    fn take_errors(&mut self, inner: &mut D, stream: D::Stream) -> Vec<DeviceError> {
        match self.kind {
            Some(Misbehaviour::DropOneOfSeveral) => {
                let mut errors = inner.take_errors(stream);
                if errors.len() >= 2 {
                    errors.remove(1);
                }
                errors
            }
            Some(Misbehaviour::WrongStream) => self.take_errors_misrouted(inner, stream),
            Some(Misbehaviour::PanicOnRefusal) | None => inner.take_errors(stream),
        }
    }
}

/// The simulator, mishandling failures.
type MisbehavingSim = Misbehaving<SimDevice, Mishandling<SimDevice>>;

/// The simulator behind [`Misbehaving`]; `faults: false` opens no faulty devices, like a GPU.
struct Factory {
    kind: Option<Misbehaviour>,
    faults: bool,
}

impl Factory {
    fn session(&self, config: SimConfig) -> Session<MisbehavingSim> {
        let device = SimDevice::new(config);
        let probe = device.probe();
        let device = Misbehaving {
            inner: device,
            behaviour: Mishandling {
                kind: self.kind,
                held: Vec::new(),
            },
        };
        Session {
            client: ComputeClient::new(device),
            observer: Some(Box::new(probe)),
        }
    }
}

impl DeviceFactory for Factory {
    type Device = MisbehavingSim;

    fn name(&self) -> &'static str {
        "sim"
    }
    fn open(&self, seed: u64) -> Session<Self::Device> {
        self.session(SimFactory::default().config(seed))
    }
    fn open_with_faults(&self, seed: u64, plan: &FaultPlan) -> Option<Session<Self::Device>> {
        let config = SimFactory::default().config(seed).with_faults(plan.clone());
        self.faults.then(|| self.session(config))
    }
    fn injects_faults(&self) -> bool {
        self.faults
    }
    fn deterministic(&self) -> bool {
        true
    }
}

fn outcome<F: DeviceFactory>(factory: &F, property: &str, cases: u32, seed: u64) -> Outcome {
    let config = RunConfig { cases, seed };
    let mut results = suite::check(factory, config, Some(property), |_| {});
    results.remove(0).outcome
}

/// The index of the first failing case of `property` and the failure's message; `None` if it
/// passes the budget.
fn cases_to_failure(factory: &Factory, property: &str, seed: u64) -> Option<(u32, String)> {
    match outcome(factory, property, DEFAULT_CASES, seed) {
        Outcome::Failed(failure) => Some((failure.case, failure.message)),
        _ => None,
    }
}

/// Asserts that `property` fails on every seed with `kind`, printing cases and messages.
fn caught(kind: Misbehaviour, property: &str) {
    let factory = Factory {
        kind: Some(kind),
        faults: true,
    };
    for seed in 0..SEEDS {
        let found = cases_to_failure(&factory, property, seed);
        let Some((cases, message)) = found else {
            panic!("seed {seed}: {property} passed {DEFAULT_CASES} cases with {kind:?}");
        };
        println!("{kind:?}, seed {seed}: {property} fails at case {cases}: {message}");
    }
}

#[test]
fn dropping_one_of_several_errors_fails_injected_faults() {
    caught(Misbehaviour::DropOneOfSeveral, "injected_faults");
}

#[test]
fn errors_on_the_wrong_stream_fail_injected_faults() {
    caught(Misbehaviour::WrongStream, "injected_faults");
}

#[test]
fn a_panic_on_out_of_memory_fails_allocation_refusals() {
    caught(Misbehaviour::PanicOnRefusal, "allocation_refusals");
}

#[test]
fn the_honest_wrapper_passes_the_fault_properties() {
    let factory = Factory {
        kind: None,
        faults: true,
    };
    for seed in 0..SEEDS {
        for property in ["injected_faults", "allocation_refusals"] {
            let outcome = outcome(&factory, property, DEFAULT_CASES, seed);
            assert_eq!(outcome, Outcome::Passed, "seed {seed}: {property}");
        }
    }
}

#[test]
fn a_device_without_fault_injection_reports_them_not_applicable() {
    let factory = Factory {
        kind: None,
        faults: false,
    };
    for property in ["injected_faults", "allocation_refusals"] {
        assert_eq!(outcome(&factory, property, 4, 1), Outcome::NotApplicable);
    }
    assert_eq!(outcome(&factory, "stream_ordering", 4, 1), Outcome::Passed);
}

/// The wrapper keeps the trait's default of no collectives: `all_reduce` is refused at every
/// call, so it is reported not applicable, never passed; `to_client` copies through the host.
#[test]
fn a_device_without_collectives_reports_all_reduce_not_applicable() {
    let factory = Factory {
        kind: None,
        faults: false,
    };
    assert_eq!(
        outcome(&factory, "all_reduce", 4, 1),
        Outcome::NotApplicable
    );
    assert_eq!(outcome(&factory, "to_client", 4, 1), Outcome::Passed);
    assert_eq!(
        outcome(&SimFactory::default(), "all_reduce", 4, 1),
        Outcome::Passed
    );
}

/// The fault properties reach what they exist for: several failures returned from one batch,
/// failures pending on two streams at once, creates refused after the retry.
#[test]
fn the_fault_properties_reach_batches_two_streams_and_refusals() {
    let sim = SimFactory::default();
    for seed in 0..SEEDS {
        let config = RunConfig {
            cases: DEFAULT_CASES,
            seed,
        };
        let faults = coverage(&sim, config, "injected_faults")
            .expect("a fault property")
            .expect("passes");
        let refusals = coverage(&sim, config, "allocation_refusals")
            .expect("a fault property")
            .expect("passes");
        println!("seed {seed}: injected_faults {faults:?}; allocation_refusals {refusals:?}");
        assert!(faults.batched > 0, "seed {seed}: {faults:?}");
        assert!(faults.two_streams_pending > 0, "seed {seed}: {faults:?}");
        assert!(refusals.refused_creates > 0, "seed {seed}: {refusals:?}");
    }
}
