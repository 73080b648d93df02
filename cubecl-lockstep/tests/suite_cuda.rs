//! cubecl's suite, unchanged, through Lockstep's CUDA device: `check_suite.py --device cuda`
//! runs it (on the GPU host, as a binary built here) and holds it to `expected.toml`.

mod cubecl {
    pub type TestRuntime = lockstep_cubecl::LockstepRuntime<lockstep_cubecl::Cuda>;

    cubecl_core::testgen_all!();
    cubecl_std::testgen!();
}
