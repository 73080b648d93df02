//! Replays the checked-in fuzz corpus on stable: every input the fuzzer kept must still pass.
//! The corpus comes from `cargo +nightly fuzz run -s none io -- -max_len=256` and `cargo fuzz
//! cmin` (README): short inputs keep this replay to seconds in a debug build.

#[test]
fn the_io_corpus_replays_cleanly() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../corpus/io");
    let mut inputs: Vec<_> = std::fs::read_dir(dir)
        .expect("the corpus folder exists")
        .map(|entry| entry.expect("readable corpus entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "the corpus is empty");
    for path in &inputs {
        let data = std::fs::read(path).expect("readable corpus file");
        let outcome = std::panic::catch_unwind(|| lockstep_fuzzing::run(&data));
        assert!(outcome.is_ok(), "corpus input {} fails", path.display());
    }
    println!("replayed {} corpus inputs", inputs.len());
}
