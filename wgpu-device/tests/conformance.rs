//! The conformance suite on the wgpu adapter here (lavapipe on CI), with a small case count.
//! Without an adapter it prints a visible `SKIPPED` line and passes, or fails under
//! `LOCKSTEP_REQUIRE_GPU=1` or `LOCKSTEP_REQUIRE_WGPU=1`.

use lockstep_conformance::WgpuFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_conformance::suite;

#[test]
fn every_property_passes_on_the_wgpu_adapter() {
    let factory = match WgpuFactory::from_env() {
        Ok(factory) => factory,
        Err(err) => {
            let test = "every_property_passes_on_the_wgpu_adapter";
            cannot_run(Need::WgpuAdapter, test, &err.to_string());
            return;
        }
    };
    let results = suite::check(&factory, RunConfig { cases: 24, seed: 5 }, None, |_| {});
    assert_eq!(results.len(), suite::property_names().len());
    for r in &results {
        assert!(r.outcome.failure().is_none(), "{}: {:?}", r.name, r.outcome);
    }
}
