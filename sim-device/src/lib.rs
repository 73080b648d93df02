//! The deterministic simulated device: mock hardware for Lockstep.
//!
//! - **Seeded scheduler.** Streams are queues of operations; at every device call a seeded
//!   number of operations runs "in the background", and blocking calls run operations until
//!   what they wait for is done. Which ready stream advances is drawn from `rand_chacha`, so
//!   different seeds explore different legal interleavings and a missing event wait shows up.
//! - **Virtual clock.** Every operation costs virtual nanoseconds; timestamps read that clock.
//! - **Poisoned memory.** Fresh memory is filled with [`POISON_FRESH`], freed memory is retired;
//!   reading never-written bytes, touching freed memory, and freeing memory that queued work
//!   still uses are recorded as [`SanitizerReport`]s, and so is every call the device refuses
//!   for breaking the `Device` contract (a runtime bug under the runtime).
//! - **Fault injection.** A [`FaultPlan`] fails allocations, transfers and kernels, or loses the
//!   device, at scripted points (counted on every stream, or on one stream named by its
//!   `StreamId`) or with given probabilities; their messages name the stream by its `StreamId`.
//! - **Trace.** Every executed operation feeds a hash ([`Observations::trace_hash`]) that is
//!   equal for equal seeds and programs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
mod device;
mod fault;
mod interpreter;
mod memory;
mod network;
mod ops;
mod sanitizer;
mod trace;
mod world;

pub use config::SimConfig;
pub use device::{
    COLLECTIVE_TIMEOUT_NS, HOST_POOL_CAP_BYTES, SimBuffer, SimCluster, SimDevice, SimEvent,
    SimGraph, SimKernel, SimProbe, SimRead, SimStream, SimTimestamp, SimWorldDevices,
};
pub use fault::{FaultKind, FaultPlan, FaultPlanError, FaultRates, InjectedFault, ScriptedFault};
pub use memory::{KernelFinding, POISON_FRESH, SanitizerReport};
pub use network::{
    CONNECT_NS, Death, LINK_LATENCY_NS, NetEvent, NetworkRun, ProcessEnd, SIM_HOST, SimLink,
    SimListener, SimNetwork, SimProcess, SimTransport,
};
pub use trace::{Observations, TraceEntry};
pub use world::{Rendezvous, SimRank, SimWorld};
