//! `lockstep launch` over `rendezvous-probe`: a world that meets, a rank that fails, and the
//! launcher's refusals.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn launch(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .arg("launch")
        .args(args)
        .output()
        .expect("lockstep runs")
}

const PROBE: &str = env!("CARGO_BIN_EXE_rendezvous-probe");

fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[test]
fn three_ranks_meet_and_their_output_is_prefixed() {
    let output = launch(&["--nproc", "3", "--", PROBE]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        sorted_lines(&output.stdout),
        [
            "[rank 0] rank 0 has id probe-id-3",
            "[rank 0] rank 0 of 3 (local rank 0)",
            "[rank 1] rank 1 has id probe-id-3",
            "[rank 1] rank 1 of 3 (local rank 1)",
            "[rank 2] rank 2 has id probe-id-3",
            "[rank 2] rank 2 of 3 (local rank 2)",
        ]
    );
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

#[test]
fn a_failing_rank_fails_the_launch_and_the_waiting_rank_is_killed() {
    // Rank 0 waits in its rendezvous for rank 1, which fails first: after the grace period
    // the launcher kills rank 0 instead of waiting for its two-minute timeout.
    let since = Instant::now();
    let output = launch(&[
        "--nproc",
        "2",
        "--grace-ms",
        "300",
        "--",
        PROBE,
        "--fail-rank",
        "1",
    ]);
    assert!(since.elapsed() < Duration::from_secs(30), "nothing hangs");
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stderr), @r"
    [rank 1] rank 1 fails on purpose
    lockstep launch: rank 1 failed first (exit status: 3); killed after the 300 ms grace period: rank 0
    ");
}

#[test]
fn ranks_that_fail_within_the_grace_period_are_not_killed() {
    // Rank 2 fails at once; ranks 0 and 1 give up their rendezvous after 500 ms, well within
    // the grace period, and fail on their own.
    let output = launch(&[
        "--nproc",
        "3",
        "--grace-ms",
        "20000",
        "--",
        PROBE,
        "--fail-rank",
        "2",
        "--timeout-ms",
        "500",
    ]);
    assert_eq!(output.status.code(), Some(1));
    insta::assert_snapshot!(sorted_lines(&output.stderr).join("\n"), @r"
    [rank 0] rank 0: rendezvous timed out after 500 ms: rank 2 of a world of 3 never joined
    [rank 1] rank 1: rendezvous timed out after 500 ms: rank 2 of a world of 3 never joined
    [rank 2] rank 2 fails on purpose
    lockstep launch: rank 2 failed first (exit status: 3); then rank 0 (exit status: 1), rank 1 (exit status: 1)
    ");
}

#[test]
fn the_launcher_refuses_what_it_cannot_start() {
    let none = launch(&["--nproc", "0", "--", PROBE]);
    assert_eq!(none.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&none.stderr), @"lockstep launch: --nproc must be at least 1");
    let port_zero = launch(&["--nproc", "2", "--master-port", "0", "--", PROBE]);
    assert_eq!(port_zero.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&port_zero.stderr)
            .contains("invalid value '0' for '--master-port <MASTER_PORT>': 0 is not in 1..=65535"),
        "{}",
        String::from_utf8_lossy(&port_zero.stderr)
    );
    let missing = launch(&["--nproc", "2", "--", "/nonexistent/program"]);
    assert_eq!(missing.status.code(), Some(1));
    insta::assert_snapshot!(String::from_utf8_lossy(&missing.stderr), @"lockstep launch: cannot start rank 0 (/nonexistent/program): No such file or directory (os error 2)");
}

#[test]
fn a_variable_that_is_not_utf8_is_named_as_invalid_not_missing() {
    use std::os::unix::ffi::OsStrExt;
    let output = Command::new(PROBE)
        .env("RANK", std::ffi::OsStr::from_bytes(b"1\xff"))
        .env("WORLD_SIZE", "2")
        .env("LOCAL_RANK", "1")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", "29500")
        .output()
        .expect("the probe runs");
    assert_eq!(output.status.code(), Some(2));
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stderr), @r#"environment variable RANK="1�" is invalid: not UTF-8"#);
}
