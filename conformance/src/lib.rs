//! Lockstep's conformance suite: properties of the `ComputeClient` contract, written once and
//! run on every device through a [`DeviceFactory`], driven by proptest with shrinking.
//!
//! Every run is seeded; a failing property prints its seed and the one command that replays it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod factory;
pub mod program;
pub mod properties;
pub mod suite;

#[cfg(feature = "cuda")]
pub use factory::CudaFactory;
#[cfg(feature = "wgpu")]
pub use factory::WgpuFactory;
pub use factory::{DeviceFactory, Observer, Session, SimFactory};
