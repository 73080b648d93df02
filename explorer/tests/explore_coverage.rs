//! `lockstep explore --coverage`: the report's exact format on a small run, and coverage as a
//! function of the seed alone.

use std::sync::Arc;
use std::time::Duration;

use lockstep_explore::coverage::Report;
use lockstep_explore::{ExploreConfig, Simulator, explore, run_seed};

fn config(first_seed: u64, seeds: u64, jobs: usize) -> ExploreConfig {
    ExploreConfig {
        first_seed,
        seeds,
        faults: true,
        ops: None,
        jobs,
        backstop: Duration::from_secs(600),
    }
}

#[test]
fn the_coverage_report_of_a_small_run_lists_hits_unhit_cells_and_declarations() {
    let summary = explore(Arc::new(Simulator), config(40, 24, 1), |_| {});
    assert!(summary.passed(), "{:?}", summary.failures);
    let report = Report::new(&summary.coverage);
    assert!(!report.passed(), "24 seeds leave reachable cells unhit");
    insta::assert_snapshot!(report.to_string());
}

#[test]
fn coverage_depends_on_the_seed_alone_not_on_jobs_or_order() {
    let one_job = explore(Arc::new(Simulator), config(7, 12, 1), |_| {});
    let two_jobs = explore(Arc::new(Simulator), config(7, 12, 2), |_| {});
    assert_eq!(one_job.coverage, two_jobs.coverage);
    let seed = run_seed(&Simulator, 9, true);
    assert_eq!(seed.execution, run_seed(&Simulator, 9, true).execution);
}
