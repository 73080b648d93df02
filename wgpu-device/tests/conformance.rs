//! The conformance suite on the wgpu adapter here (lavapipe on CI), with a small case count.
//! Without an adapter it prints a visible `SKIPPED` line and passes.

use std::io::Write;

use lockstep_conformance::WgpuFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::suite;

#[test]
fn every_property_passes_on_the_wgpu_adapter() {
    let factory = match WgpuFactory::from_env() {
        Ok(factory) => factory,
        Err(err) => {
            // Written to the real stderr, past the test harness's capture, so it is seen.
            let _ = writeln!(std::io::stderr(), "SKIPPED: no wgpu adapter ({err})");
            return;
        }
    };
    let results = suite::check(&factory, RunConfig { cases: 24, seed: 5 }, None, |_| {});
    assert_eq!(results.len(), suite::property_names().len());
    for r in &results {
        assert!(r.outcome.failure().is_none(), "{}: {:?}", r.name, r.outcome);
    }
}
