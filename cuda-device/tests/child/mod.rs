//! Tests that must run in a process of their own (a poisoned CUDA context, an aborted NCCL
//! communicator): the parent test reruns this test binary on one `#[ignore]`d child test.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs the ignored test `name` of this binary in a child process with `env` set to `1`, and
/// fails unless it exits successfully within `limit` having printed `marker`.
pub fn run(name: &str, env: &str, marker: &str, limit: Duration) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args(["--exact", name, "--ignored", "--nocapture"])
        .env(env, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child test");
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("poll the child").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the child test {name} hung for {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("the child's output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(marker),
        "child {name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

/// Whether this process is the child that `env` marks; otherwise says how to run it.
pub fn is_child(env: &str) -> bool {
    let child = std::env::var_os(env).is_some();
    if !child {
        eprintln!("set {env}=1 to run this test; it is run in a child process of its own");
    }
    child
}
