//! cubecl's runtime traits over Lockstep: cubecl kernels run on Lockstep's deterministic
//! simulator, so cubecl's own test suite runs unchanged on it
//! (`pub type TestRuntime = lockstep_cubecl::LockstepRuntime;`).
//!
//! **Route.** A launched kernel is expanded by cubecl, compiled to WGSL by cubecl-wgpu's
//! public `WgslCompiler` (every cubecl lowering pass included), parsed and validated by naga,
//! and translated into Lockstep's kernel IR (`translate`), exactly or refused by name: a
//! construct the translator cannot express is `CompilationError::UnsupportedInstruction`
//! naming it, never a different kernel. `docs/cubecl-design.md` has the reasons for the
//! route and the staged plan.
//!
//! **Failures.** cubecl reports a failure on the memory its launch would have written, from
//! any stream and until something rewrites it; Lockstep on the stream it happened on, once.
//! The adapter keeps cubecl's books itself (`books`): a refused or skipped launch taints its
//! outputs at once; a launch Lockstep accepts waits in its stream's window, and every read
//! and sync first drains the streams, so each failure Lockstep returns lands on the outputs
//! of that window (conservatively: Lockstep names the stream, not the launch) and no
//! Lockstep read ever meets a pending failure. A launch whose input carries a failure is
//! skipped, as cubecl's backends do, instead of running on stale bytes.
//!
//! **Other differences from cubecl's backends.** Kernels run checked: an access out of range
//! fails the launch's outputs instead of reading a clamped or zero value. Fresh memory is
//! poisoned, not zeroed. Profiling is on host time. Graphs, collectives and native resources
//! are not offered.
//!
//! **Determinism.** The simulator is seeded by `LOCKSTEP_SEED` (a fixed default; printed
//! once); a test run alone (`--exact`) is reproducible from it.

#![warn(missing_docs)]

pub mod backend;
pub mod books;
pub mod compile;
pub mod findings;
pub mod info;
pub mod launch_log;
pub mod memory;
pub mod properties;
pub mod runtime;
pub mod seed;
pub mod server;
pub mod streams;
pub mod translate;

#[cfg(feature = "cuda")]
pub use backend::Cuda;
#[cfg(feature = "wgpu")]
pub use backend::Wgpu;
pub use backend::{Backend, Simulator};
pub use runtime::{LockstepDevice, LockstepRuntime};
pub use server::LockstepServer;
