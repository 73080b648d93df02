//! The `Device` contract's checks on the simulator, called directly (`contract::run`): every
//! broken precondition is refused with its typed error and reported to the sanitizer, and the
//! device stays usable. The simulator has collectives, so their cases run here too. The same
//! cases run on wgpu (`lockstep-wgpu`'s `tests/device.rs`) and CUDA (`lockstep-cuda`'s
//! `tests/gpu.rs`).

use lockstep::{ContractViolation, DeviceError};
use lockstep_harness::contract;
use lockstep_sim::{SanitizerReport, SimConfig, SimDevice};

#[test]
fn every_broken_precondition_is_refused_with_its_typed_error() {
    let mut device = SimDevice::new(SimConfig::new(7));
    let mut other = SimDevice::new(SimConfig::new(8));
    let probe = device.probe();
    let report = contract::run(&mut device, &mut other).expect("the setup calls succeed");
    report.assert_conforms();
    // Under the runtime a refusal is a runtime bug, so the simulator also reports each one
    // (the suite and the explorer fail on any report), the foreign free included; a kernel the
    // device cannot hold is a compile failure the runtime passes on, not a report.
    let refusals = report
        .cases
        .iter()
        .filter_map(|case| case.got.clone().err())
        .filter(|err| matches!(err, DeviceError::Contract { .. }));
    let foreign_free = DeviceError::Contract {
        operation: "free".to_owned(),
        violation: ContractViolation::ForeignBuffer,
    };
    let expected: Vec<SanitizerReport> = refusals
        .chain([foreign_free])
        .map(SanitizerReport::ContractViolation)
        .collect();
    assert_eq!(probe.observations().reports, expected);
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
