//! The conformance suite on the wgpu adapter here (lavapipe on CI), with a small case count.
//! Without an adapter it prints a visible `SKIPPED` line and passes, or fails under
//! `LOCKSTEP_REQUIRE_GPU=1` or `LOCKSTEP_REQUIRE_WGPU=1`.

use lockstep_conformance::WgpuFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_conformance::suite::{self, Outcome};

/// What wgpu cannot run: fault injection (real hardware) and collectives (one device, no
/// communicator). Those are reported not applicable, never passed.
const NOT_APPLICABLE: [&str; 3] = ["injected_faults", "allocation_refusals", "all_reduce"];

#[test]
fn the_suite_passes_on_the_wgpu_adapter_where_it_applies() {
    let factory = match WgpuFactory::from_env() {
        Ok(factory) => factory,
        Err(err) => {
            let test = "the_suite_passes_on_the_wgpu_adapter_where_it_applies";
            cannot_run(Need::WgpuAdapter, test, &err.to_string());
            return;
        }
    };
    let results = suite::check(&factory, RunConfig { cases: 24, seed: 5 }, None, |_| {});
    assert_eq!(results.len(), suite::property_names().len());
    for r in &results {
        let expected = if NOT_APPLICABLE.contains(&r.name) {
            Outcome::NotApplicable
        } else {
            Outcome::Passed
        };
        assert_eq!(r.outcome, expected, "{}", r.name);
    }
}
