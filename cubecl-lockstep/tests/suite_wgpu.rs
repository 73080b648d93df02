//! cubecl's suite, unchanged, through Lockstep's wgpu device (lavapipe in CI; Vulkan on a
//! GPU): `check_suite.py --device wgpu` runs it and holds it to `expected.toml`.

mod cubecl {
    pub type TestRuntime = lockstep_cubecl::LockstepRuntime<lockstep_cubecl::Wgpu>;

    cubecl_core::testgen_all!();
    cubecl_std::testgen!();
}
