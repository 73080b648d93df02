//! The `Device` contract's checks on the simulator, called directly (`contract::run`): every
//! broken precondition is refused with its typed error, and the device stays usable. The same
//! cases run on wgpu (`lockstep-wgpu`'s `tests/device.rs`) and CUDA (`lockstep-cuda`'s
//! `tests/gpu.rs`).

use lockstep_conformance::contract;
use lockstep_sim::{SimConfig, SimDevice};

#[test]
fn every_broken_precondition_is_refused_with_its_typed_error() {
    let mut device = SimDevice::new(SimConfig::new(7));
    let mut other = SimDevice::new(SimConfig::new(8));
    let probe = device.probe();
    let report = contract::run(&mut device, &mut other).expect("the setup calls succeed");
    report.assert_conforms();
    assert_eq!(probe.observations().reports, vec![]);
    let messages: Vec<String> = report
        .cases
        .iter()
        .map(|case| match &case.got {
            Ok(()) => format!("{}: accepted", case.name),
            Err(err) => format!("{}: {err}", case.name),
        })
        .collect();
    insta::assert_snapshot!(messages.join("\n"));
}
