//! cubecl's own test suite, unchanged, on Lockstep's simulator: every test of
//! `cubecl_core::testgen_all!()` and `cubecl_std::testgen!()`. Which of them fail, and why,
//! is listed in `expected.toml`; `check_suite.py` runs this and holds it to that list.

mod cubecl {
    pub type TestRuntime = lockstep_cubecl::LockstepRuntime;

    cubecl_core::testgen_all!();
    cubecl_std::testgen!();
}
