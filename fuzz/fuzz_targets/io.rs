//! Arbitrary create/empty/write/read/read_tensor/create_tensors programs on the simulator,
//! checked against a reference model. Run: `cargo +nightly fuzz run io` from `fuzz/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lockstep_fuzzing::run(data));
