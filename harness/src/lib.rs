//! What every device crate's tests and benchmarks share, so that each device is tested and
//! measured the same way:
//!
//! - [`requirement`]: the one place that decides whether a test that needs what a machine
//!   lacks (a CUDA GPU, NCCL, NVRTC, a wgpu adapter) is a visible skip or a failure;
//! - [`contract`]: the `Device` contract's cases, each a call that breaks one precondition
//!   and the refusal every device must give;
//! - [`blocking_path`]: the blocking path's figures (round trips, launch rate), measured alike
//!   through the client and straight on a device;
//! - [`misbehaving`]: a device wrapper that breaks one rule on purpose, for the self-tests that
//!   prove a checker notices.
//!
//! **Architecture Invariant:** this crate depends on the runtime and the kernel library only,
//! so that every device crate's tests and benches can use it without depending on a crate
//! above them.

// No unsafe code but the one `unsafe` call that asks for an unchecked kernel whose contract
// the contract cases keep (`contract.rs`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod blocking_path;
pub mod contract;
pub mod misbehaving;
pub mod requirement;
