//! The suite tests itself: a runtime with a planted bug must fail it within the default budget.

use lockstep::ServerOptions;
use lockstep_conformance::SimFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::suite::{self, Outcome};

/// `lockstep check`'s default number of cases per property.
const DEFAULT_CASES: u32 = 128;

/// The smallest case count at which `property` fails on `factory` with `seed`, if any within
/// `budget`. A runner draws the same cases in the same order whatever its total, so the count
/// is the 1-based index of the first failing case.
fn cases_to_failure(factory: &SimFactory, property: &str, seed: u64, budget: u32) -> Option<u32> {
    let fails = |cases| {
        suite::check(factory, RunConfig { cases, seed }, Some(property), |_| {})[0]
            .outcome
            .failure()
            .is_some()
    };
    if !fails(budget) {
        return None;
    }
    let (mut passing, mut failing) = (0, budget);
    while failing - passing > 1 {
        let mid = (passing + failing) / 2;
        if fails(mid) {
            failing = mid;
        } else {
            passing = mid;
        }
    }
    Some(failing)
}

#[test]
fn removing_cross_stream_waits_fails_stream_ordering() {
    let broken = SimFactory {
        options: ServerOptions {
            cross_stream_ordering: false,
            ..ServerOptions::default()
        },
        ..SimFactory::default()
    };
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
