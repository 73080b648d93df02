//! The kernel sanitizer's findings in cubecl kernels: reported by default (the results
//! stand, the launch log names the kernel and kind), failing the launch's outputs under
//! `LOCKSTEP_CUBECL_FINDINGS=fail`. One test, since the mode is read when a device's server
//! starts: device 0 starts in `report` mode, device 1 in `fail` mode.

use cubecl_core as cubecl;
use cubecl_core::prelude::*;
use cubecl_runtime::runtime::Runtime;
use lockstep_cubecl::{LockstepDevice, LockstepRuntime};

/// Every unit writes the one shared word with no barrier between the writes: a race.
#[cube(launch)]
fn racy_broadcast(out: &mut [u32]) {
    let mut word = Shared::<u32>::new();
    *word = UNIT_POS;
    sync_cube();
    out[UNIT_POS as usize] = *word;
}

/// Unit 0 writes the word, a barrier, then every unit reads it: race-free.
#[cube(launch)]
fn broadcast(out: &mut [u32]) {
    let mut word = Shared::<u32>::new();
    if UNIT_POS == 0 {
        *word = 7u32;
    }
    sync_cube();
    out[UNIT_POS as usize] = *word;
}

const UNITS: u32 = 4;

fn launch(device: u16, racy: bool) -> Result<Vec<u32>, String> {
    let client = <LockstepRuntime>::client(&LockstepDevice::new(device));
    let out = client.empty(UNITS as usize * 4);
    // SAFETY (cubecl's contract): `out` holds UNITS u32s.
    let arg = unsafe { BufferArg::from_raw_parts(out.clone(), UNITS as usize) };
    let (count, dim) = (CubeCount::Static(1, 1, 1), CubeDim::new_1d(UNITS));
    if racy {
        racy_broadcast::launch(&client, count, dim, arg);
    } else {
        broadcast::launch(&client, count, dim, arg);
    }
    let bytes = client.read_one(out).map_err(|error| error.to_string())?;
    Ok(u32::from_bytes(&bytes).to_vec())
}

fn findings_logged(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("finding\t"))
        .map(|line| line.split('\t').take(4).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn findings_are_reported_by_default_and_fail_the_launch_when_asked() {
    let log = std::env::temp_dir().join(format!("lockstep-findings-{}.log", std::process::id()));
    // SAFETY: this binary's only test sets the variables before any thread reads them (the
    // servers start at the first launch below).
    unsafe {
        std::env::set_var("LOCKSTEP_CUBECL_LAUNCH_LOG", &log);
        std::env::set_var("LOCKSTEP_CUBECL_FINDINGS", "report");
    }
    assert_eq!(launch(0, false), Ok(vec![7; UNITS as usize]));
    assert!(
        findings_logged(&log).is_empty(),
        "a race-free kernel has no finding"
    );

    let values = launch(0, true).expect("in report mode the results stand");
    assert!(
        values.iter().all(|&v| v == values[0] && v < UNITS),
        "{values:?}"
    );
    let logged = findings_logged(&log);
    assert!(!logged.is_empty(), "the race is logged");
    assert!(
        logged
            .iter()
            .all(|l| l.contains("racy_broadcast") && l.ends_with(" race")),
        "{logged:?}"
    );

    // SAFETY: as above; device 1's server starts at its first launch, after this.
    unsafe { std::env::set_var("LOCKSTEP_CUBECL_FINDINGS", "fail") };
    assert_eq!(launch(1, false), Ok(vec![7; UNITS as usize]));
    let error = launch(1, true).expect_err("in fail mode the race fails the outputs");
    assert!(
        error.contains("kernel sanitizer found a race in `")
            && error.contains("LOCKSTEP_CUBECL_FINDINGS=fail"),
        "{error}"
    );
    let _ = std::fs::remove_file(log);
}
