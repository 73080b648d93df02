//! Issue 32's proof, on the simulator standing in for a GPU: the two programs that pass by luck
//! of timing (`race-threads`: two threads race on one buffer; `missing-barrier`: a kernel
//! reads shared memory with no barrier after the store) pass their own checks when recorded,
//! yet `lockstep explore --recording` finds each within 100 seeds and shrinks it to a printed
//! Rust test (checked in exactly as printed, `tests/shrunk/`, where its `#[test]` reproduces
//! the failure); their fixed forms pass 10,000 seeds, with and without injected faults. The
//! same programs recorded on an H200 (`tests/recordings/h200/`) are explored alike, and the
//! decode loop recorded there replays with every read matching.
//!
//! After a deliberate change to the explorer or the printer, rewrite the printed tests with
//! `UPDATE_SHRUNK=1 cargo test -p lockstep-cli --test explore_recording`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod shrunk_race {
    include!("shrunk/recording_race.rs");
}

mod shrunk_barrier {
    include!("shrunk/recording_barrier.rs");
}

/// A fresh directory for one test's recordings.
fn directory(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lockstep-explore-recording-{test}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

/// Runs proof program `program` (`--fixed` if `fixed`) on the simulator, recording it to
/// `name` in `dir`; asserts it passed its own check against the host.
fn record(dir: &Path, program: &str, fixed: bool, name: &str) {
    let binary = match program {
        "race-threads" => env!("CARGO_BIN_EXE_race-threads"),
        _ => env!("CARGO_BIN_EXE_missing-barrier"),
    };
    let mut command = Command::new(binary);
    if fixed {
        command.arg("--fixed");
    }
    let output = command
        .env("LOCKSTEP_RECORD", dir.join(name))
        .output()
        .expect("the proof program runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{program} failed: {stdout}");
    assert!(stdout.contains("the result matches the host"), "{stdout}");
}

/// `lockstep explore --recording NAME ARGS…` in `dir`: whether it passed, and its output.
fn explore(dir: &Path, name: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .current_dir(dir)
        .args(["explore", "--recording", name])
        .args(args)
        .output()
        .expect("lockstep runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), stdout)
}

/// The first failing seed an exploration's output names.
fn first_failing_seed(output: &str) -> String {
    let line = output
        .lines()
        .find(|l| l.starts_with("seed "))
        .expect("a failing seed");
    line.split(' ').nth(1).expect("its number").to_owned()
}

/// The Rust test in a `--shrink` output, checked against `tests/shrunk/FILE` (rewritten
/// under `UPDATE_SHRUNK=1`).
fn assert_printed_as_checked_in(output: &str, file: &str) {
    let start = output
        .find("/// `lockstep explore")
        .expect("a printed test");
    let printed = &output[start..];
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shrunk")
        .join(file);
    if std::env::var_os("UPDATE_SHRUNK").is_some() {
        std::fs::write(&path, printed).expect("writes the printed test");
    }
    let checked_in = std::fs::read_to_string(&path).expect("the checked-in test");
    assert_eq!(
        printed, checked_in,
        "rewrite with UPDATE_SHRUNK=1 if the change is meant"
    );
}

#[test]
fn the_racing_threads_are_found_within_100_seeds_and_shrunk() {
    let dir = directory("race");
    record(&dir, "race-threads", false, "race.rec");
    let (passed, output) = explore(&dir, "race.rec", &["--seed", "0", "--seeds", "100"]);
    assert!(!passed);
    insta::assert_snapshot!("race_explored", output);
    let seed = first_failing_seed(&output);
    let args = ["--seed", &seed, "--seeds", "1", "--shrink"];
    let (passed, shrunk) = explore(&dir, "race.rec", &args);
    assert!(!passed);
    insta::assert_snapshot!("race_shrunk", shrunk);
    assert_printed_as_checked_in(&shrunk, "recording_race.rs");
    // The shrunk recording, run in its file order, fails the same way.
    let (passed, again) = explore(&dir, "race.shrunk.rec", &["--seed", &seed, "--seeds", "1"]);
    assert!(!passed, "{again}");
}

#[test]
fn the_missing_barrier_is_found_within_100_seeds_and_shrunk() {
    let dir = directory("barrier");
    record(&dir, "missing-barrier", false, "barrier.rec");
    let (passed, output) = explore(&dir, "barrier.rec", &["--seed", "0", "--seeds", "100"]);
    assert!(!passed);
    insta::assert_snapshot!("barrier_explored", output);
    let seed = first_failing_seed(&output);
    let args = ["--seed", &seed, "--seeds", "1", "--shrink"];
    let (passed, shrunk) = explore(&dir, "barrier.rec", &args);
    assert!(!passed);
    insta::assert_snapshot!("barrier_shrunk", shrunk);
    assert_printed_as_checked_in(&shrunk, "recording_barrier.rs");
}

#[test]
fn the_threads_ordered_by_a_flush_and_a_signal_pass_10000_seeds() {
    let dir = directory("race-fixed");
    record(&dir, "race-threads", true, "fixed.rec");
    let (passed, output) = explore(&dir, "fixed.rec", &["--seed", "0", "--seeds", "10000"]);
    assert!(passed, "{output}");
    assert_eq!(
        output.lines().last(),
        Some(
            "10000 seeds: 0 failed; 50000 calls run, 20000 results as recorded, 0 faults injected"
        )
    );
    let args = ["--seed", "0", "--seeds", "10000", "--faults"];
    let (passed, output) = explore(&dir, "fixed.rec", &args);
    assert!(passed, "{output}");
    insta::assert_snapshot!("race_fixed_faults", output);
}

#[test]
fn the_kernel_with_its_barrier_passes_10000_seeds() {
    let dir = directory("barrier-fixed");
    record(&dir, "missing-barrier", true, "fixed.rec");
    let (passed, output) = explore(&dir, "fixed.rec", &["--seed", "0", "--seeds", "10000"]);
    assert!(passed, "{output}");
    assert_eq!(
        output.lines().last(),
        Some(
            "10000 seeds: 0 failed; 60000 calls run, 10000 results as recorded, 0 faults injected"
        )
    );
    let args = ["--seed", "0", "--seeds", "10000", "--faults"];
    let (passed, output) = explore(&dir, "fixed.rec", &args);
    assert!(passed, "{output}");
    insta::assert_snapshot!("barrier_fixed_faults", output);
}

/// The proof programs recorded on an H200 through Lockstep's CUDA device
/// (`scripts/gpu/record-h200.sh`, `tests/recordings/h200/`), where each passed its own check:
/// the explorer finds the race and the missing barrier within 100 seeds, and the fixed forms
/// pass 10,000 seeds.
#[test]
fn the_programs_recorded_on_an_h200_are_found_or_pass_as_on_the_simulator() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings/h200");
    for (name, class) in [
        (
            "race-threads.rec",
            "the result differs from the recorded run",
        ),
        ("missing-barrier.rec", "sanitizer: Kernel(Race)"),
    ] {
        let (passed, output) = explore(&dir, name, &["--seed", "0", "--seeds", "100"]);
        assert!(!passed && output.contains(class), "{name}: {output}");
    }
    for name in ["race-threads-fixed.rec", "missing-barrier-fixed.rec"] {
        let (passed, output) = explore(&dir, name, &["--seed", "0", "--seeds", "10000"]);
        assert!(passed, "{name}: {output}");
        assert!(output.contains("10000 seeds: 0 failed"), "{name}: {output}");
    }
}

/// The decode loop recorded on an H200 through Lockstep's CUDA device and through its wgpu
/// device on Vulkan (`scripts/gpu/record-h200.sh`, data kept): `lockstep replay --recording`
/// runs each on the simulator with every read matching (the floats kernels computed within
/// the default tolerance) and nothing left unchecked.
#[test]
fn the_decode_loop_recorded_on_an_h200_replays_with_every_read_matching() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recordings/h200");
    for name in ["decode_loop-cuda.rec", "decode_loop-vulkan.rec"] {
        let output = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .current_dir(&dir)
            .args(["replay", "--recording", name])
            .output()
            .expect("lockstep runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{name}: {stdout}");
        assert!(
            stdout.contains("58 reads and 3 outcomes matched, 0 mismatches"),
            "{name}: {stdout}"
        );
        assert!(!stdout.contains("not checked"), "{name}: {stdout}");
        assert!(!stdout.contains("not replayed"), "{name}: {stdout}");
    }
}
