//! The shrinker's proof: programs that `lockstep replay --seed S --shrink` prints, for seeds the
//! explorer fails when one of the runtime's defences is knocked out (a test-only
//! `ServerOptions` knob), checked in exactly as printed (`tests/shrunk/`). Each program compiles
//! here, passes with the default options (its own `#[test]`), and fails with the knob where the
//! explorer's run failed; the shrinker, rerun, prints the same text. Every failing seed of a
//! range, under every knob, shrinks to a program the printer prints.
//!
//! After a deliberate change to the shrinker or the printer, rewrite the files with
//! `UPDATE_SHRUNK=1 cargo test -p lockstep-explore --test shrunk_program`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use lockstep::ServerOptions;
use lockstep_explore::rust_test::Unprintable;
use lockstep_explore::shrink::shrink;
use lockstep_explore::{Opener, World, run_world, rust_test};
use lockstep_sim::SimDevice;

mod seed_11 {
    include!("shrunk/seed_11.rs");
}

mod seed_35 {
    include!("shrunk/seed_35.rs");
}

mod seed_6 {
    include!("shrunk/seed_6.rs");
}

mod seed_34 {
    include!("shrunk/seed_34.rs");
}

/// The simulator under a runtime with one of its defences knocked out.
#[derive(Clone, Copy)]
struct Knob(ServerOptions);

impl Opener for Knob {
    type Device = SimDevice;

    fn open(&self, device: SimDevice) -> SimDevice {
        device
    }

    fn options(&self) -> ServerOptions {
        self.0
    }
}

/// Without cross-stream event waits.
fn no_cross_stream_ordering() -> Knob {
    Knob(ServerOptions {
        cross_stream_ordering: false,
        ..ServerOptions::default()
    })
}

/// Events recorded into a capturing stream (issue 12's bug 3).
fn capture_unaware_events() -> Knob {
    Knob(ServerOptions {
        capture_aware_events: false,
        ..ServerOptions::default()
    })
}

/// Launches that bind a view at its allocation's start.
fn no_view_offsets() -> Knob {
    Knob(ServerOptions {
        launch_view_offsets: false,
        ..ServerOptions::default()
    })
}

/// What the shrinker prints for `seed` (explored without `--faults`) under `knob`.
fn printed(knob: Knob, seed: u64) -> Result<String, Unprintable> {
    let world = World::draw(seed, false);
    let shrunk = shrink(&knob, &world).expect("the seed fails with the knob");
    rust_test::print(&world, false, &shrunk, &knob.0)
}

fn check_file(knob: Knob, seed: u64, checked_in: &str) {
    let text = printed(knob, seed).expect("a fault-free world prints");
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
    check_file(
        no_cross_stream_ordering(),
        11,
        include_str!("shrunk/seed_11.rs"),
    );
    check_file(
        no_cross_stream_ordering(),
        35,
        include_str!("shrunk/seed_35.rs"),
    );
    check_file(
        capture_unaware_events(),
        6,
        include_str!("shrunk/seed_6.rs"),
    );
    check_file(no_view_offsets(), 34, include_str!("shrunk/seed_34.rs"));
}

/// Seeds of the printability sweep: a few seconds of debug build for every knob.
const SWEEP: std::ops::Range<u64> = 0..48;

#[test]
fn every_failing_seed_shrinks_to_a_printed_program() {
    let knobs = [
        ServerOptions {
            checked_slot_sizes: false,
            ..ServerOptions::default()
        },
        ServerOptions {
            refused_stop_capture_keeps_state: false,
            ..ServerOptions::default()
        },
        capture_unaware_events().0,
        no_view_offsets().0,
    ];
    let mut printed_programs = [0; 4];
    for (knob, count) in knobs.into_iter().map(Knob).zip(&mut printed_programs) {
        for seed in SWEEP {
            let world = World::draw(seed, false);
            // With events recorded into a capture, a peer's collective can wait on a part the
            // explored device never enqueues: a host hang only the explorer's wall-clock
            // backstop reports, which a test cannot survive. Peers stay out of this knob.
            if !knob.0.capture_aware_events && world.peers > 0 {
                continue;
            }
            if run_world(&knob, &world, false).0.failure.is_none() {
                continue;
            }
            if let Err(why) = printed(knob, seed) {
                panic!("seed {seed} under {:?}: {why}", knob.0);
            }
            *count += 1;
        }
    }
    // Failing seeds per knob in the sweep.
    assert_eq!(printed_programs, [5, 5, 2, 2]);
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

#[test]
fn seed_11_races_two_writes_without_cross_stream_ordering() {
    // The explorer: two streams write the first element of one buffer, the second after the
    // first in the program's order; without the event wait between them the simulator's
    // sanitizer sees the writes race.
    let message = panic_message(|| seed_11::seed_11(no_cross_stream_ordering().0));
    assert!(
        message.contains(
            "Race { buffer: 0, offset: 0, len: 4, first: \"write on stream 1\", second: \"write on stream 2\" }"
        ),
        "{message}"
    );
}

#[test]
fn seed_35_all_reduces_stale_bytes_without_cross_stream_ordering() {
    // The explorer: "all_reduce (Min) on a peer differs from the reference" — a misaligned
    // write on another stream sets bytes 6 and 7 of the explored device's part (its element 1
    // becomes 1125362688), but the collective reads the part before, so element 1's minimum
    // is the stale 427338752.
    let message = panic_message(|| seed_35::seed_35(no_cross_stream_ordering().0));
    assert!(
        message.contains("left: [723697408, 427338752]\n right: [723697408, 1125362688]"),
        "{message}"
    );
}

#[test]
fn seed_6_read_fails_beside_a_capture_when_events_ignore_it() {
    // The explorer: "unexpected error on stream-1: graph capture failed: `marker` cannot be
    // recorded into a graph" — a read on another stream orders after the capturing stream by
    // an event recorded into its capture (issue 12's bug 3 (i)).
    let message = panic_message(|| seed_6::seed_6(capture_unaware_events().0));
    assert!(
        message.contains("error: Capture { reason: \"`marker` cannot be recorded into a graph\" }"),
        "{message}"
    );
}

#[test]
fn seed_34_launch_on_a_view_writes_the_first_tensor_without_view_offsets() {
    // The explorer: "the final read of everything live: read on stream-100: read 24 elements,
    // model holds 24; first difference at element 0" — the launch on tensor 1 (stores k =
    // 1061707932) wrote tensor 0, at the allocation's start, in place of its 196364518; no
    // read of the workload looked, the read-back after the drain did.
    let message = panic_message(|| seed_34::seed_34(no_view_offsets().0));
    assert!(
        message.contains("left: [1061707932]\n right: [196364518]"),
        "{message}"
    );
}
