//! Kernels written once with Lockstep's `KernelBuilder`, each with its host reference, for
//! every device's tests, the conformance suite, the explorer and the benchmarks.
//!
//! - [`elementwise`]: the small kernels conformance programs launch (and one that overruns).
//! - [`workgroup`]: what invocations share and only GPUs compute: shared arrays, barriers,
//!   atomics, loops, the math functions.
//! - [`formula`]: random elementwise `u32` kernels with an independent host reference, the
//!   explorer's, and a fixed sample of them for the lowering tests.
//! - [`half`]: every exact operation and conversion of the half floats.
//! - [`ops`]: kernels that do real work (a reduction, softmax, layer norm, matrix products,
//!   a decode step) and two faulty ones for the sanitizer's self-tests.
//!
//! **Architecture Invariant:** this crate depends on the runtime alone, so that every device
//! crate's tests can use it without depending on a crate above them.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod elementwise;
pub mod formula;
pub mod half;
pub mod ops;
pub mod workgroup;
