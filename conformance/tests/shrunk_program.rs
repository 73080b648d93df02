//! The shrinker's proof: programs that `lockstep replay --seed S --shrink` prints, for seeds the
//! explorer fails when the runtime's cross-stream ordering is knocked out, checked in exactly as
//! printed (`tests/shrunk/`). Each program compiles here, passes with the default options (its
//! own `#[test]`), and fails with the knob where the explorer's run failed; the shrinker,
//! rerun, prints the same text.
//!
//! After a deliberate change to the shrinker or the printer, rewrite the files with
//! `UPDATE_SHRUNK=1 cargo test -p lockstep-conformance --test shrunk_program`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use lockstep::ServerOptions;
use lockstep_conformance::explore::shrink::shrink;
use lockstep_conformance::explore::{Opener, World, rust_test};
use lockstep_sim::SimDevice;

mod seed_11 {
    include!("shrunk/seed_11.rs");
}

mod seed_35 {
    include!("shrunk/seed_35.rs");
}

/// The simulator under a runtime without cross-stream event waits.
struct NoCrossStreamOrdering;

impl Opener for NoCrossStreamOrdering {
    type Device = SimDevice;

    fn open(&self, device: SimDevice) -> SimDevice {
        device
    }

    fn options(&self) -> ServerOptions {
        ServerOptions {
            cross_stream_ordering: false,
            ..ServerOptions::default()
        }
    }
}

/// What the shrinker prints for `seed` (explored without `--faults`), and the shrink figures.
fn printed(seed: u64) -> String {
    let world = World::draw(seed, false);
    let shrunk = shrink(&NoCrossStreamOrdering, &world).expect("the seed fails with the knob");
    println!(
        "seed {seed}: shrunk {} operations to {} in {} runs",
        shrunk.original_len,
        shrunk.workload.len(),
        shrunk.runs
    );
    rust_test::print(&world, false, &shrunk, &NoCrossStreamOrdering.options())
        .expect("a fault-free world prints")
}

fn check_file(seed: u64, checked_in: &str) {
    let text = printed(seed);
    let path = format!("{}/tests/shrunk/seed_{seed}.rs", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_SHRUNK").is_some() {
        std::fs::write(&path, &text).expect("tests/shrunk is writable");
        return;
    }
    assert_eq!(
        text, checked_in,
        "{path} is not what the shrinker prints (UPDATE_SHRUNK=1 rewrites it)"
    );
}

#[test]
fn the_checked_in_programs_are_what_the_shrinker_prints() {
    check_file(11, include_str!("shrunk/seed_11.rs"));
    check_file(35, include_str!("shrunk/seed_35.rs"));
}

/// The message `program` panics with; fails if it does not panic.
fn panic_message(program: impl FnOnce()) -> String {
    let panic = catch_unwind(AssertUnwindSafe(program)).expect_err("the program must fail");
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn knocked_out() -> ServerOptions {
    NoCrossStreamOrdering.options()
}

#[test]
fn seed_11_reads_stale_bytes_without_cross_stream_ordering() {
    // The explorer: a read returns what one stream wrote first (3020914628) where the model
    // holds what another stream wrote after it.
    let message = panic_message(|| seed_11::seed_11(knocked_out()));
    assert!(
        message.contains("left: [3020914628]\n right: [1429331802]"),
        "{message}"
    );
}

#[test]
fn seed_35_all_reduces_stale_bytes_without_cross_stream_ordering() {
    // The explorer: "all_reduce (Min) on peer 0:1 differs from the reference".
    let message = panic_message(|| seed_35::seed_35(knocked_out()));
    assert!(
        message.contains("right: [914628834, 1205981163]"),
        "{message}"
    );
}
