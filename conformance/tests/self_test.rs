//! The suite tests itself: a runtime with a planted bug must fail it within the default budget.

use lockstep::ServerOptions;
use lockstep_conformance::SimFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::suite::{self, Outcome};

/// `lockstep check`'s default number of cases per property.
const DEFAULT_CASES: u32 = 128;

/// The index of the first case at which `property` fails on `factory` with `seed`, if any
/// within `budget`.
fn cases_to_failure(factory: &SimFactory, property: &str, seed: u64, budget: u32) -> Option<u32> {
    let config = RunConfig {
        cases: budget,
        seed,
    };
    let results = suite::check(factory, config, Some(property), |_| {});
    results[0].outcome.failure().map(|failure| failure.case)
}

/// The simulator under a runtime without cross-stream waits.
fn without_cross_stream_waits() -> SimFactory {
    SimFactory {
        options: ServerOptions {
            cross_stream_ordering: false,
            ..ServerOptions::default()
        },
        ..SimFactory::default()
    }
}

#[test]
fn removing_cross_stream_waits_fails_stream_ordering() {
    let broken = without_cross_stream_waits();
    let mut counts = Vec::new();
    for seed in 0..8 {
        let cases = cases_to_failure(&broken, "stream_ordering", seed, DEFAULT_CASES);
        assert!(
            cases.is_some(),
            "seed {seed}: stream_ordering passed {DEFAULT_CASES} cases without cross-stream waits"
        );
        counts.push(cases.unwrap_or_default());
    }
    println!("cases to detect a missing cross-stream wait, seeds 0..8: {counts:?}");
}

/// A runner draws the same cases in the same order whatever its total, so the failure's case
/// index is exact: a run of that many cases fails (the replay command `lockstep check` prints),
/// one fewer passes.
#[test]
fn a_failure_names_the_first_failing_case_and_a_run_that_long_reproduces_it() {
    let broken = without_cross_stream_waits();
    let run = |cases| {
        let config = RunConfig { cases, seed: 2 };
        suite::check(&broken, config, Some("stream_ordering"), |_| {}).remove(0)
    };
    let full = run(DEFAULT_CASES);
    let case = full
        .outcome
        .failure()
        .expect("fails within the budget")
        .case;
    // Seed 2 passes its first cases, so the run one case shorter has cases to pass.
    assert!((2..=DEFAULT_CASES).contains(&case), "case {case}");
    assert_eq!(run(case).outcome, full.outcome, "a run of {case} cases");
    assert_eq!(run(case - 1).outcome, Outcome::Passed, "{} cases", case - 1);
}

#[test]
fn the_intact_runtime_passes_every_property() {
    let results = suite::check(
        &SimFactory::default(),
        RunConfig {
            cases: 32,
            seed: 11,
        },
        None,
        |_| {},
    );
    for r in &results {
        assert_eq!(r.outcome, suite::Outcome::Passed, "{}", r.name);
    }
    assert_eq!(results.len(), suite::property_names().len());
}

#[test]
fn reusing_memory_before_other_streams_finish_is_caught_by_the_sanitizer() {
    let broken = SimFactory {
        options: ServerOptions {
            deferred_frees: false,
            ..ServerOptions::default()
        },
        ..SimFactory::default()
    };
    let mut counts = Vec::new();
    for seed in 0..4 {
        let cases = cases_to_failure(&broken, "stream_ordering", seed, DEFAULT_CASES);
        assert!(
            cases.is_some(),
            "seed {seed}: stream_ordering passed {DEFAULT_CASES} cases with slices reused early"
        );
        counts.push(cases.unwrap_or_default());
    }
    println!("cases to detect early reuse of released memory, seeds 0..4: {counts:?}");
}

/// A device without the half floats refuses their kernels, so their properties report `n/a`
/// (nothing checked), never `ok`; the simulator with them passes both.
#[test]
fn a_device_without_half_floats_reports_their_properties_not_applicable() {
    let without = SimFactory {
        without_half_floats: true,
        ..SimFactory::default()
    };
    let config = RunConfig { cases: 4, seed: 3 };
    for property in ["f16_arithmetic", "bf16_arithmetic"] {
        let results = suite::check(&without, config, Some(property), |_| {});
        assert_eq!(results[0].outcome, Outcome::NotApplicable, "{property}");
        assert_eq!(results[0].cases, 0);
        let results = suite::check(&SimFactory::default(), config, Some(property), |_| {});
        assert_eq!(results[0].outcome, Outcome::Passed, "{property}");
    }
}
