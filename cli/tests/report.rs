//! What a person reads of the `lockstep` command: `check`'s report and `replay`'s trace.

#[test]
fn check_report_lists_every_property_and_ends_with_the_summary() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["check", "--device", "sim", "--cases", "4", "--seed", "7"])
        .output()
        .expect("the lockstep binary runs");
    assert!(output.status.success());
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stdout));
}

#[test]
fn replay_prints_the_trace_hash_last() {
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["replay", "--seed", "3"])
            .output()
            .expect("the lockstep binary runs")
    };
    let (first, second) = (run(), run());
    assert!(first.status.success());
    let last_line = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(last_line(&first).starts_with("trace-hash: "));
    assert_eq!(last_line(&first).len(), "trace-hash: ".len() + 16);
    assert_eq!(last_line(&first), last_line(&second));
}

#[test]
fn replay_writes_a_valid_perfetto_trace() {
    let path = std::env::temp_dir().join(format!("lockstep-trace-{}.json", std::process::id()));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["replay", "--seed", "3", "--trace"])
        .arg(&path)
        .output()
        .expect("the lockstep binary runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let text = std::fs::read_to_string(&path).expect("the trace was written");
    let _ = std::fs::remove_file(&path);
    let trace: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let events = trace["traceEvents"]
        .as_array()
        .expect("a traceEvents array");
    let phase = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    // Slices on per-stream tracks, named tracks, a memory counter, and flows from each
    // recorded event to the waits on it (seed 3's world uses several streams).
    assert!(phase("X") > 0 && phase("M") >= 2 && phase("C") > 0);
    assert!(phase("s") > 0 && phase("f") > 0);
    for slice in events.iter().filter(|e| e["ph"] == "X") {
        assert!(slice["ts"].is_number() && slice["dur"].as_f64().is_some_and(|d| d > 0.0));
        assert!(slice["tid"].is_u64() && slice["name"].is_string());
    }
    // Every flow end has its start.
    let ids = |ph: &str| -> Vec<u64> {
        events
            .iter()
            .filter(|e| e["ph"] == ph)
            .filter_map(|e| e["id"].as_u64())
            .collect()
    };
    let starts = ids("s");
    assert!(ids("f").iter().all(|id| starts.contains(id)));
}

/// `check --cases 0` reported every property passed having checked nothing, and
/// `explore --jobs 0` ran: a count that checks nothing is refused, naming the flag.
#[test]
fn counts_that_would_check_nothing_are_refused() {
    for args in [
        &["check", "--cases", "0"][..],
        &["explore", "--jobs", "0"],
        &["explore", "--seeds", "0"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(args)
            .output()
            .expect("the lockstep binary runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let flag = args[1];
        assert!(
            stderr.contains(&format!("invalid value '0' for '{flag}")),
            "{args:?}: {stderr}"
        );
    }
}
