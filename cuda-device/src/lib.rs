//! Lockstep's CUDA device: the [`Device`](lockstep::Device) trait on the CUDA driver API, with
//! kernels lowered to CUDA C and compiled by NVRTC for the GPU's architecture.
//!
//! The driver (`libcuda`) and NVRTC (`libnvrtc`) are loaded when a device is first opened, not
//! linked: programs build and start on machines without CUDA, where [`CudaDevice::new`]
//! returns [`DeviceError::Unavailable`](lockstep::DeviceError::Unavailable) saying what is
//! missing.
//!
//! ```no_run
//! use lockstep::{Bytes, ComputeClient};
//! use lockstep_cuda::CudaDevice;
//!
//! let client = ComputeClient::new(CudaDevice::new(0)?);
//! let handle = client.create(Bytes::from_elems(&[1u32, 2, 3]))?;
//! assert_eq!(client.read_one(handle)?.to_elems::<u32>(), vec![1, 2, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Code map: `device.rs` implements the trait; `context.rs` holds what devices of one CUDA
//! context share (compiled modules, pooled events, pinned staging, the sticky-error state);
//! `staging.rs` moves bytes between host and device through pinned memory; `lower.rs` emits
//! CUDA C from kernel IR; `compile.rs` runs NVRTC; `error.rs` maps driver errors.
//!
//! This is the only crate of the workspace with `unsafe` code (the others forbid it): driver,
//! NVRTC and NCCL calls, pinned host memory, and `Send`/`Sync` for raw driver handles. Every
//! unsafe block and impl says why it holds in a `SAFETY:` comment (denied otherwise), naming
//! the check or invariant it rests on. A function whose soundness rests on its arguments (a
//! raw device address, stream, event or NVRTC program; which stream a pinned block's copies
//! ran on) is an `unsafe fn` whose `# Safety` section says what its caller must ensure, as
//! `streaming_copy.rs` does: `staging::upload`, `CudaRead::enqueue`, `pinned::copy_to_device`,
//! `PinnedBlock::record_in_flight`, and the event pool of `Context`.

#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod compile;
mod context;
mod device;
mod error;
pub mod lower;
mod pinned;
mod staging;
mod streaming_copy;

pub use device::{
    CudaBuffer, CudaContext, CudaDevice, CudaEvent, CudaGraph, CudaKernel, CudaStream,
    CudaTimestamp, JoinWorldError,
};
pub use staging::{CudaRead, WriteStaging};
