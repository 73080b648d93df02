//! The wgpu device for Lockstep: kernel IR lowered to WGSL ([`lower`]), run on any adapter wgpu
//! opens (Vulkan here, including Mesa's lavapipe on a machine without a GPU).
//!
//! # Ordering
//!
//! wgpu has one queue per device, so every stream feeds it:
//! - All streams record into one command encoder in the order the runtime enqueues their work,
//!   and batches are submitted in that order. The total order of execution is the enqueue
//!   order, across all streams; work of different streams never overlaps in time
//!   (`features.concurrent_streams` is false).
//! - So an event is a point in that one order (the batch holding everything enqueued before
//!   it), and `wait_event` has nothing left to do: the work it waits for already precedes
//!   everything enqueued after it.
//! - Work is batched: dispatches share a compute pass and a submission. A batch is submitted
//!   at `flush`, `synchronize`, a read's `wait_read`, and when it grows past a few hundred
//!   operations or its upload arena fills. An event completes only after its batch has been
//!   submitted; `event_complete` polls without blocking.
//!
//! # Errors
//!
//! Allocation beyond the adapter's limits or memory is an error at the call (error scopes
//! around `create_buffer`). Errors wgpu raises for a submitted batch land in the error queue
//! of every stream with work in it (the batch was refused as a whole) and surface at their
//! next `flush`/`sync`/read. Device loss (wgpu's device-lost callback) makes every later call
//! return [`DeviceError::Lost`](lockstep::DeviceError::Lost). wgpu's uncaptured-error handler
//! only records.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod bind;
mod context;
mod device;
pub mod lower;
mod pipelines;

pub use context::{BackendChoice, GpuContext, WgpuOptions};
pub use device::{
    WgpuBuffer, WgpuDevice, WgpuEvent, WgpuGraph, WgpuKernel, WgpuRead, WgpuStream, WgpuTimestamp,
};
