//! A seed whose two runs differ fails as nondeterministic, naming where two more runs, traced,
//! diverge, or saying that every device ran alike in them (a divergence of thread timing).

use std::sync::atomic::{AtomicUsize, Ordering};

use lockstep::ServerOptions;
use lockstep_explore::failure::Check;
use lockstep_explore::{Opener, World, run_drawn};
use lockstep_sim::SimDevice;

/// Runs without cross-stream ordering every other time a client is made, until `alternating`
/// clients were made, then always with it: a run-to-run difference the explorer must report.
struct Alternating {
    made: AtomicUsize,
    alternating: usize,
}

impl Opener for Alternating {
    type Device = SimDevice;

    fn open(&self, device: SimDevice) -> SimDevice {
        device
    }

    fn options(&self) -> ServerOptions {
        let n = self.made.fetch_add(1, Ordering::SeqCst);
        ServerOptions {
            cross_stream_ordering: n >= self.alternating || n.is_multiple_of(2),
            ..ServerOptions::default()
        }
    }
}

/// The failure of the first single-device seed whose runs `opener` makes differ.
fn nondeterministic(opener: impl Fn() -> Alternating) -> String {
    for seed in 0..64 {
        let world = World::draw(seed, false);
        if world.peers > 0 {
            continue;
        }
        if let Some(failure) = run_drawn(&opener(), &world).failure {
            assert_eq!(
                failure.class.check,
                Check::Nondeterminism,
                "seed {seed}: {failure:?}"
            );
            return failure.detail;
        }
    }
    panic!("no seed of 64 ran differently");
}

#[test]
fn a_divergence_names_the_device_and_operation_where_traced_reruns_differ() {
    let detail = nondeterministic(|| Alternating {
        made: AtomicUsize::new(0),
        alternating: usize::MAX,
    });
    assert!(
        detail.contains("traced again, they diverge on the explored device at operation #"),
        "{detail}"
    );
}

#[test]
fn a_divergence_the_traced_reruns_do_not_repeat_says_so() {
    let detail = nondeterministic(|| Alternating {
        made: AtomicUsize::new(0),
        alternating: 2,
    });
    assert!(
        detail.contains("traced again, every device ran alike"),
        "{detail}"
    );
}
