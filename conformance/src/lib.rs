//! Lockstep's conformance suite: properties of the `ComputeClient` contract, written once and
//! run on every device through a [`DeviceFactory`], driven by proptest with shrinking.
//!
//! Every run is seeded; a failing property prints its seed and the one command that replays it.

// No unsafe code but the one `unsafe` call that asks for an unchecked kernel whose contract
// the contract cases keep (`contract.rs`).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod blocking_path;
pub mod contract;
pub mod explore;
pub mod factory;
pub mod fuzzing;
pub mod half_kernels;
pub mod kernels;
pub mod launch;
pub mod ops;
pub mod perfetto;
pub mod program;
pub mod properties;
pub mod requirement;
pub mod suite;
pub mod workgroup_kernels;

#[cfg(feature = "cuda")]
pub use factory::CudaFactory;
#[cfg(feature = "wgpu")]
pub use factory::WgpuFactory;
pub use factory::{DeviceFactory, Observer, Session, SimFactory};
