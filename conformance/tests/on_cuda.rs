//! The conformance suite on CUDA GPU 0, and the collective properties over every GPU of the
//! host. Built with the crate's `cuda` feature (on by default); without a GPU (or NCCL, for
//! the collectives) each test prints a visible `SKIPPED` line and passes, or fails under
//! `LOCKSTEP_REQUIRE_GPU=1`.

use lockstep_conformance::properties::RunConfig;
use lockstep_conformance::suite::{self, Outcome};
use lockstep_conformance::{CudaFactory, DeviceFactory};
use lockstep_harness::requirement::{Need, cannot_run};

const NO_NCCL: &str = "libnccl could not be loaded (set LD_LIBRARY_PATH to its directory)";

#[test]
fn the_conformance_suite_passes_on_the_gpu() {
    let factory = match CudaFactory::new(0) {
        Ok(factory) => factory,
        Err(err) => {
            let test = "the_conformance_suite_passes_on_the_gpu";
            return cannot_run(Need::CudaGpu, test, &err.to_string());
        }
    };
    let config = RunConfig { cases: 24, seed: 7 };
    let results = suite::check(&factory, config, None, |_| {});
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| {
            r.outcome.failure().map(|f| {
                format!(
                    "{}: {} (case {}; replay: {})",
                    r.name,
                    f.message,
                    f.minimal_case,
                    suite::replay_command("cuda", r.name, config)
                )
            })
        })
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn collective_properties_hold_on_every_gpu() {
    const TEST: &str = "collective_properties_hold_on_every_gpu";
    let factory = match CudaFactory::new(0) {
        Ok(factory) => factory,
        Err(err) => {
            cannot_run(Need::CudaGpu, TEST, &err.to_string());
            return;
        }
    };
    // Without NCCL `all_reduce` would be reported not applicable: nothing checked.
    if !factory.open(0).client.supports_collectives() {
        cannot_run(Need::Nccl, TEST, NO_NCCL);
        return;
    }
    let config = RunConfig { cases: 16, seed: 3 };
    for name in ["all_reduce", "to_client"] {
        let results = suite::check(&factory, config, Some(name), |_| {});
        assert_eq!(results.len(), 1, "{name} is a property of the suite");
        assert_eq!(results[0].outcome, Outcome::Passed, "{name}");
    }
}
