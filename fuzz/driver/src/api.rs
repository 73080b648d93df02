//! The `api` target: arbitrary programs over every public [`ComputeClient`] call and the
//! kernel builder, on simulated clusters, each call checked by an oracle.
//!
//! An input draws a world (`world.rs`: one or two `SimCluster`s of one to three devices, an
//! inline client per device pinned to two streams, each device with or without half floats and
//! timestamps) and up to [`MAX_OPS`] operations (`ops.rs`). Every call must return success or a
//! typed error, never panic or hang: [`ServerError::TaskPanicked`](lockstep::ServerError) is
//! always a failure, and under libFuzzer, whose panic hook aborts, so is any panic the runtime
//! catches. Where a reference exists, the result must match it:
//! - bytes: create, write, read and their tensor forms, lazy reads, `to_client` copies, packed
//!   tensors and `staging` follow the byte model of the `io` target (`model.rs`), whose bytes a
//!   launch forgets where it may write;
//! - refusals: each call's contract lists its refusals, and the oracle predicts them from the
//!   drawn arguments (a launch's binding count, types, aliasing and counts; a pool layout; a
//!   collective's device list; the stream's capture state and pending failures);
//! - kernels (`kernel.rs`): `build` is `Ok` or a typed `KernelError`, and an `Ok` kernel keeps
//!   what validation promises, checked independently (its workgroup size's product, computed
//!   in `u128`, is 1 to `MAX_WORKGROUP_INVOCATIONS`; no barrier under an id-dependent branch;
//!   no write to a read-only binding; a well-typed kernel of the grammar is accepted);
//! - counts: a launch of a counting kernel runs exactly `x * y * z * workgroup` invocations,
//!   and none when a count is zero or, for a dynamic count, above `max_workgroups`;
//! - all-reduce: the reference fold for integer sums, products, minima and maxima;
//! - the simulator's sanitizer: no cross-stream race, use after free, free while in use or
//!   contract refusal, which under the runtime are runtime bugs.
//!
//! Calls covered: `create`, `create_from_slice`, `empty`, `create_tensor(_from_slice)`,
//! `empty_tensor(s)`, `create_tensors(_from_slices)`, `write`, `write_at`, `write_tensor(s)`,
//! `read`, `read_one`, `read_one_unchecked`, `read_async`, `read_tensor(_async)`,
//! `read_one_tensor_async`, `read_one_unchecked_tensor`, `read_lazy(_async)` with
//! `Bytes::materialize` and lazy bytes given to `create`, `create_tensor`, `write_at` and
//! `write_tensor`,
//! `launch` (static and `CubeCount::Dynamic` counts, inside `dry_run` or not), `compile`,
//! `graph_prepare`, `start_capture`, `stop_capture`, `Graph::replay` and its drop, `flush`,
//! `sync`, `sync_all`, `sync_collective`, `exclusive`, `memory_usage`, `memory_report`,
//! `install_memory_pools`, `set_memory_budget`, `memory_cleanup`, `allocation_mode`,
//! `memory_persistent_allocation`, `profile` with `ProfileDuration::resolve_blocking`,
//! `set_profile_level`, `profile_summary`, `timing_method`, `io_optimized_vector_sizes`,
//! `measure_throughput` (a tiny `KernelConfig`), `all_reduce`, `ensure_init_collective`,
//! `to_client(_tensor)`, `send_to`/`receive_from`, `staging`, `get_resource` with
//! `Resource::with_buffer`, `set_stream`, `stream_id`, `device_id`, `peer_id`,
//! `enumerate_devices`, `enumerate_all_devices`, `device_count(_total)`,
//! `supports_collectives`, `properties`, `properties_mut`, `features`, `info`, `load`, and
//! `Handle` drops (releases, and the last clone held by a launch, a graph or a resource).
//!
//! Left out, and why:
//! - `new`, `with_options` and `init` start an actor thread per client, which costs more than
//!   an input's calls; the inline client runs the same server and ordering (`load` is called,
//!   for indices never registered). `init` also registers process-wide, across inputs.
//! - `plant_defect` and `allocation_paths` are hidden self-test hooks, not API.
//! - A call inside an `exclusive` closure panics by contract (the closure paused the actor),
//!   and libFuzzer aborts at any panic, caught or not: the closures compute without calls.
//! - An all-reduce or a `send_to`/`receive_from` pair whose part is refused on one device
//!   while its peers enqueue theirs (a capturing stream refuses it) leaves the peers waiting,
//!   as NCCL would: the simulator documents that wait as undecidable (each half could come
//!   from another process), so these are drawn only on streams that do not capture.
//!   `to_client`, which holds both ends, is drawn on any stream: it is refused at the call.
//! - Unchecked kernels (`KernelChecks::unchecked`) are `unsafe` and promise in-range accesses,
//!   which drawn kernels do not keep; launches are checked, the default.
//!
//! A run can put one of the runtime's five fixed bugs back ([`Regression`], [`run_with`]), so
//! that a self-test proves the target finds each again.

mod collective;
mod data;
mod graphs;
mod kernel;
mod launch;
mod lazy;
mod misc;
mod ops;
mod world;

use arbitrary::{Arbitrary, Unstructured};
use lockstep::ComputeClient;

use ops::Op;
use world::{World, WorldSpec};

/// Most operations one input runs: inputs stay short, and the fuzzer fast.
pub const MAX_OPS: usize = 24;

/// One of the runtime's fixed bugs, put back for a run by its knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regression {
    /// `ServerOptions::launch_aliasing_by_range` off: two views of one packed allocation that
    /// share no byte are refused together in a launch.
    LaunchAliasingByRange,
    /// `ServerOptions::peer_copies_within_group` off: `to_client` between devices of two
    /// clusters takes them for peers and hangs.
    PeerCopiesWithinGroup,
    /// `ServerOptions::lazy_read_errors_returned` off: a create or write of a failed lazy read
    /// panics.
    LazyReadErrorsReturned,
    /// `SimConfig::bound_dynamic_counts` off: the simulator runs dynamic counts above the
    /// maximum (and panics allocating for `u32::MAX`).
    BoundDynamicCounts,
    /// `lockstep::kernel::plant_wrapping_workgroup_product` on: validation accepts a workgroup
    /// size whose product wraps to zero.
    WrappingWorkgroupProduct,
}

/// Runs the program `data` decodes to on a fresh simulated world, checking every call.
///
/// # Panics
/// On any call that panics or disagrees with the oracle: that is what the fuzzer looks for.
pub fn run(data: &[u8]) {
    run_with(data, None);
}

/// [`run`], with `regression`'s bug put back for this run (on this thread only).
///
/// # Panics
/// As [`run`]; with a bug put back, that is what its self-test looks for.
pub fn run_with(data: &[u8], regression: Option<Regression>) {
    let mut u = Unstructured::new(data);
    let Ok(spec) = WorldSpec::arbitrary(&mut u) else {
        return;
    };
    let _planted = PlantedProduct::new(regression == Some(Regression::WrappingWorkgroupProduct));
    let mut world = World::new(&spec, regression);
    for index in 0..MAX_OPS {
        let Ok(op) = Op::arbitrary(&mut u) else {
            break;
        };
        if tracing() {
            eprintln!("op #{index}: {op:?}");
        }
        ops::step(&mut world, &op).unwrap_or_else(|why| panic!("op #{index} {op:?}: {why}"));
        if u.is_empty() {
            break;
        }
    }
    world
        .finish()
        .unwrap_or_else(|why| panic!("at the end: {why}"));
}

/// Whether `LOCKSTEP_FUZZ_TRACE` is set: each operation is then printed before it runs, to
/// read a failing input's program (read once per process).
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("LOCKSTEP_FUZZ_TRACE").is_some())
}

/// Turns the thread-local wrapping product on for a run, and off when the run ends, even by a
/// panic (the self-test's next input runs on the same thread).
struct PlantedProduct(bool);

impl PlantedProduct {
    fn new(on: bool) -> Self {
        if on {
            lockstep::kernel::plant_wrapping_workgroup_product(true);
        }
        Self(on)
    }
}

impl Drop for PlantedProduct {
    fn drop(&mut self) {
        if self.0 {
            lockstep::kernel::plant_wrapping_workgroup_product(false);
        }
    }
}

/// The client type every device of a world has.
type Client = ComputeClient<lockstep_sim::SimDevice>;
