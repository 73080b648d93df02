//! The recording reader on arbitrary bytes, as they are and framed well-formed. Run:
//! `cargo +nightly fuzz run recording` from `fuzz/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lockstep_fuzzing::recording::run(data));
