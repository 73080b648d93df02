//! Issue 33's "each found again": each of the runtime's five fixed bugs, put back by its knob
//! ([`Regression`]), is found by the `api` target within a few thousand seeded random inputs,
//! and the same inputs pass with the knob off. No libFuzzer: inputs are ChaCha8 bytes from a
//! fixed seed, so a run is the same on every machine.
//!
//! An input fails by a panic (the oracle's, or the runtime's), or by giving no answer within
//! [`HANG_BOUND`], which bounds a hang (`to_client` between clusters taken for peers waits
//! forever); a passing input never depends on that bound.

use std::sync::mpsc;
use std::time::Duration;

use lockstep_fuzzing::api::{Regression, run_with};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

/// Seeded inputs tried per knob, at most.
const INPUTS: usize = 3000;
/// Bytes of each input.
const INPUT_BYTES: usize = 320;
/// An input that gives no answer within this long is taken to hang.
const HANG_BOUND: Duration = Duration::from_secs(10);

/// How an input ended.
#[derive(Debug)]
enum Outcome {
    Passed,
    Panicked(String),
    Hung,
}

/// Runs `data` under `regression` on a worker thread; a hung worker is left behind (its thread
/// ends with the test process).
fn outcome(data: &[u8], regression: Option<Regression>) -> Outcome {
    let (done, answer) = mpsc::channel();
    let data = data.to_vec();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(|| run_with(&data, regression));
        let _ = done.send(result);
    });
    match answer.recv_timeout(HANG_BOUND) {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(payload)) => {
            let message = (payload.downcast_ref::<String>().cloned())
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Panicked(message)
        }
        Err(_) => Outcome::Hung,
    }
}

fn inputs() -> impl Iterator<Item = Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    std::iter::repeat_with(move || {
        let mut data = vec![0; INPUT_BYTES];
        rng.fill_bytes(&mut data);
        data
    })
    .take(INPUTS)
}

/// Finds `regression` again: the first input that fails with its knob on, and every input up
/// to it passes with the knob off. Prints how many inputs it took.
fn refind(regression: Regression) {
    let mut tried = Vec::new();
    let found = inputs().find_map(|data| {
        let outcome = outcome(&data, Some(regression));
        tried.push(data);
        (!matches!(outcome, Outcome::Passed)).then_some(outcome)
    });
    let Some(found) = found else {
        panic!("{regression:?} was not found in {INPUTS} inputs");
    };
    for (index, data) in tried.iter().enumerate() {
        let clean = outcome(data, None);
        assert!(
            matches!(clean, Outcome::Passed),
            "input #{index} fails without {regression:?}: {clean:?}"
        );
    }
    let how = match found {
        Outcome::Hung => format!("no answer within {HANG_BOUND:?}"),
        Outcome::Panicked(message) => message.lines().next().unwrap_or_default().to_owned(),
        Outcome::Passed => unreachable!("found only by a failure"),
    };
    println!(
        "{regression:?}: found by input #{}, {} inputs ({how})",
        tried.len() - 1,
        tried.len()
    );
}

#[test]
fn launch_aliasing_by_range_is_found_again() {
    refind(Regression::LaunchAliasingByRange);
}

#[test]
fn peer_copies_within_group_is_found_again() {
    refind(Regression::PeerCopiesWithinGroup);
}

#[test]
fn lazy_read_errors_returned_is_found_again() {
    refind(Regression::LazyReadErrorsReturned);
}

#[test]
fn bound_dynamic_counts_is_found_again() {
    refind(Regression::BoundDynamicCounts);
}

#[test]
fn wrapping_workgroup_product_is_found_again() {
    refind(Regression::WrappingWorkgroupProduct);
}
