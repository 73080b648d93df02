//! Lockstep: a GPU compute runtime tested like a database.
//!
//! A program holds a [`ComputeClient`] for a device. Through it, it allocates and fills
//! buffers, launches kernels written once in Lockstep's [kernel IR](kernel), and gets every
//! asynchronous failure back as a typed [`ServerError`], naming its stream, at the next
//! `flush`, `sync` or read of the stream it happened on (see the client's docs for which
//! stream a call goes to). Each call returns its own precise error type; [`Error`] takes them
//! all, for `?`. All runtime logic sits above the narrow [`Device`] trait, so the same code
//! runs on the deterministic simulator (`lockstep-sim`) and on real GPUs.
//!
//! ```
//! use lockstep::{Bytes, ComputeClient};
//! use lockstep_sim::{SimConfig, SimDevice};
//!
//! let client = ComputeClient::new(SimDevice::new(SimConfig::new(0)));
//! let handle = client.create(Bytes::from_elems(&[1u32, 2, 3]))?;
//! assert_eq!(client.read_one(handle)?.to_elems::<u32>(), vec![1, 2, 3]);
//! # Ok::<(), lockstep::Error>(())
//! ```

// No unsafe code: the one `unsafe` item declares the contract of unchecked kernels
// (`KernelChecks::unchecked`), which its callers keep.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg_attr(
    loom,
    allow(
        dead_code,
        reason = "loom builds leave out the client, which runs tasks inline and spins for reads"
    )
)]
mod actor;
#[cfg(not(loom))]
mod app_error;
#[cfg(not(loom))]
mod block_on;
mod bytes;
#[cfg(not(loom))]
mod client;
pub mod collective;
pub mod device;
#[cfg(not(loom))]
pub mod distributed;
#[cfg(not(loom))]
pub mod dry_run;
mod error;
#[cfg(not(loom))]
mod graph;
#[cfg(not(loom))]
mod handle;
pub mod host_pool;
#[cfg_attr(
    loom,
    allow(
        dead_code,
        reason = "the server and client that speak most of its ids are left out of loom builds"
    )
)]
mod ids;
#[cfg_attr(
    loom,
    allow(
        dead_code,
        reason = "the server and its pools check them, which loom builds leave out"
    )
)]
mod invariant;
pub mod kernel;
#[cfg(not(loom))]
mod launch;
#[cfg(not(loom))]
mod layout;
#[cfg_attr(
    loom,
    allow(
        dead_code,
        reason = "its pools serve only the server, which loom builds leave out"
    )
)]
mod memory;
#[cfg_attr(
    all(loom, not(test)),
    allow(dead_code, reason = "only `actor::loom_tests` use it")
)]
mod oneshot;
#[cfg(not(loom))]
mod profiling;
mod properties;
#[cfg(not(loom))]
pub mod record;
#[cfg(not(loom))]
mod registry;
#[cfg(not(loom))]
pub mod replay;
#[cfg(not(loom))]
mod resource;
#[cfg(not(loom))]
mod server;
pub mod stream;
#[cfg_attr(
    loom,
    allow(
        dead_code,
        reason = "loom builds leave out the client, which runs tasks inline and spins for reads"
    )
)]
mod sync;
#[cfg(not(loom))]
mod throughput;

#[cfg(not(loom))]
pub use app_error::Error;
#[cfg(not(loom))]
pub use block_on::block_on;
pub use bytes::{AllocationProperty, Bytes, HeldBytes, PinnedMemory};
#[cfg(not(loom))]
pub use client::ComputeClient;
pub use collective::{CollectiveError, ReduceOperation};
pub use device::{Device, DeviceId, DeviceProperties, Features, GraphSupport};
#[cfg(not(loom))]
pub use dry_run::{LaunchMode, dry_run};
pub use error::{
    CaptureError, ContractViolation, DeviceError, IoError, OutOfMemoryError, OutOfMemoryReason,
    ServerError,
};
#[cfg(not(loom))]
pub use graph::Graph;
#[cfg(not(loom))]
/// The `half` crate, whose `f16` and `bf16` are the IR's half floats' host types (in
/// [`kernel::Scalar`], and as elements of [`Bytes::from_elems`]/[`Bytes::to_elems`]).
pub use half;
#[cfg(not(loom))]
pub use handle::Handle;
pub use host_pool::{HostPool, HostPoolStats, PooledBlock};
#[doc(hidden)]
pub use invariant::PlantedDefect;
pub use kernel::Kernel;
#[cfg(not(loom))]
pub use launch::{CubeCount, CubeCountError, KernelArguments};
#[cfg(not(loom))]
pub use layout::{
    CopyDescriptor, MemoryLayout, MemoryLayoutDescriptor, MemoryLayoutStrategy, contiguous_strides,
    extent_bytes,
};
#[doc(hidden)]
pub use memory::AllocationPaths;
pub use memory::{
    InstallMemoryPoolsError, LayoutError, MemoryAllocationMode, MemoryBudgetError,
    MemoryConfiguration, MemoryPoolsConfig, MemoryReport, MemoryUsage, PoolKind, PoolLayout,
    PoolPreset, PoolReport,
};
#[cfg(not(loom))]
pub use profiling::{
    KernelProfile, PROFILE_ENV, ProfileDuration, ProfileError, ProfileLevel, ProfileSummary,
    TimingMethod,
};
#[cfg(not(loom))]
pub use resource::Resource;
#[cfg(not(loom))]
pub use server::ServerOptions;
pub use stream::StreamId;
#[cfg(not(loom))]
pub use throughput::{KernelConfig, MAX_VECTOR_SIZE, ThroughputKey, ThroughputValue};
