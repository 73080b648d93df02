//! Replays the checked-in fuzz corpora on stable: every input the fuzzer kept must still pass.
//! Each corpus comes from `cargo fuzz run -s none <target>` with a small `-max_len`, minimised
//! (README: `cargo fuzz cmin` for io; for api, the inputs that cover every edge an hour's run
//! reached, `-set_cover_merge=1 -use_counters=0`): this replay takes seconds in a debug build.

use std::path::PathBuf;

/// The inputs of corpus `target`, in name order.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = format!("{}/../corpus/{target}", env!("CARGO_MANIFEST_DIR"));
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus folder exists")
        .map(|entry| entry.expect("readable corpus entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "the {target} corpus is empty");
    inputs
}

/// Runs `run` on every input of corpus `target`; each must pass.
fn replay(target: &str, run: fn(&[u8])) {
    let inputs = corpus(target);
    for path in &inputs {
        let data = std::fs::read(path).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "corpus input {} fails", path.display());
    }
    println!("replayed {} {target} corpus inputs", inputs.len());
}

#[test]
fn the_io_corpus_replays_cleanly() {
    replay("io", lockstep_fuzzing::run);
}

#[test]
fn the_api_corpus_replays_cleanly() {
    replay("api", lockstep_fuzzing::api::run);
}

#[test]
fn the_recording_corpus_replays_cleanly() {
    replay("recording", lockstep_fuzzing::recording::run);
}
