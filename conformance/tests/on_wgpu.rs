//! The conformance suite on the wgpu adapter here (lavapipe on CI), with a small case count.
//! Built with the crate's `wgpu` feature (on by default).
//! Without an adapter it prints a visible `SKIPPED` line and passes, or fails under
//! `LOCKSTEP_REQUIRE_GPU=1` or `LOCKSTEP_REQUIRE_WGPU=1`.

use lockstep_conformance::WgpuFactory;
use lockstep_conformance::factory::DeviceFactory;
use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::suite::{self, Outcome};
use lockstep_harness::requirement::{Need, cannot_run};

/// What wgpu cannot run: fault injection (real hardware), collectives (one device, no
/// communicator) and bfloat16 (not in WGSL). Those are reported not applicable, never passed;
/// `f16_arithmetic` too where the adapter lacks `SHADER_F16` (lavapipe has it).
const NOT_APPLICABLE: [&str; 4] = [
    "injected_faults",
    "allocation_refusals",
    "all_reduce",
    "bf16_arithmetic",
];

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
    let f16 = factory.open(0).client.properties().features.f16;
    let results = suite::check(&factory, RunConfig { cases: 24, seed: 5 }, None, |_| {});
    assert_eq!(results.len(), suite::property_names().len());
    for r in &results {
        let lacks_f16 = r.name == "f16_arithmetic" && !f16;
        let expected = if NOT_APPLICABLE.contains(&r.name) || lacks_f16 {
            Outcome::NotApplicable
        } else {
            Outcome::Passed
        };
        assert_eq!(r.outcome, expected, "{}", r.name);
    }
}
