//! Arbitrary programs over every public `ComputeClient` call and the kernel builder, on
//! simulated clusters, checked by an oracle (`lockstep_fuzzing::api`). Run:
//! `cargo fuzz run -s none api` from `fuzz/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| lockstep_fuzzing::api::run(data));
