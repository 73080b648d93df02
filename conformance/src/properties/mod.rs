//! The conformance properties: written once against `ComputeClient`, run on every device.

/// Fails the property unless `claim` holds, with the message `format!` makes of the rest:
/// `ensure!(read == expected, "read after write_at({offset}) differs")`.
macro_rules! ensure {
    ($claim:expr, $($why:tt)+) => {
        if !$claim {
            return Err(format!($($why)+));
        }
    };
}

mod collectives;
mod data;
mod dynamic_counts;
mod errors;
pub mod faults;
mod formulas;
mod graphs;
mod half_floats;
mod kernels;
mod memory;
mod ops;
mod ordering;
mod profiling;
mod tensor_writes;

/// The all-reduce inputs and reference that the explorer's worlds of processes share.
pub use collectives::{reference as all_reduce_reference, values as all_reduce_values};

use std::cell::Cell;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::factory::{DeviceFactory, Session};
use lockstep::kernel::Fnv1a;

/// How many cases to run and from which seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// Cases to run (proptest cases; each a fresh session).
    pub cases: u32,
    /// Seeds the case generator: equal seeds give equal cases.
    pub seed: u64,
}

/// A property that failed: the shrunk case and why it failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Why the shrunk case failed.
    pub message: String,
    /// The shrunk case, printed.
    pub minimal_case: String,
    /// The 1-based index of the first failing case. A runner draws the same cases in the same
    /// order whatever its total, so a run of `case` cases fails the same way and a run of
    /// `case - 1` passes.
    pub case: u32,
}

/// One property of the contract.
pub struct Property<F: DeviceFactory> {
    /// The property's name, as reports list it.
    pub name: &'static str,
    /// What it claims, in one line.
    pub summary: &'static str,
    /// Runs the property on devices of the factory.
    pub check: fn(&F, RunConfig) -> Result<(), Failure>,
    /// Whether the property can run on the factory's devices; one that cannot is reported not
    /// applicable, never passed.
    pub applies: fn(&F) -> bool,
}

/// Names a failed call in a property's failure message: `.map_err(err("read"))?`.
fn err(what: &'static str) -> impl Fn(lockstep::ServerError) -> String {
    move |e| format!("{what}: {e}")
}

/// Every device can run the property.
fn everywhere<F: DeviceFactory>(_: &F) -> bool {
    true
}

/// Only devices that inject faults can run the property.
fn with_fault_injection<F: DeviceFactory>(factory: &F) -> bool {
    factory.injects_faults()
}

/// Only devices with collectives can run the property: a device without them refuses every
/// collective at the call (`CollectiveError::Unsupported`), so nothing would be checked.
fn with_collectives<F: DeviceFactory>(factory: &F) -> bool {
    factory.open(0).client.supports_collectives()
}

/// Every property, in the order the suite runs them.
pub fn all<F: DeviceFactory>() -> Vec<Property<F>> {
    vec![
        Property {
            name: "round_trip",
            summary: "write then read returns the bytes, for random sizes, offsets and tensor shapes",
            check: data::round_trip,
            applies: everywhere,
        },
        Property {
            name: "invalid_input",
            summary: "bad sizes, ranges, shapes, launches and foreign handles are typed errors; the stream stays usable",
            check: data::invalid_input,
            applies: everywhere,
        },
        Property {
            name: "packed_tensors",
            summary: "tensors created together (pitched or dense) read back independently; writing one never changes another",
            check: memory::packed_tensors,
            applies: everywhere,
        },
        Property {
            name: "tensor_writes",
            summary: "write_tensor puts dense data where pitched, sliced or transposed strides say, touches no other byte, and refuses a wrong size",
            check: tensor_writes::tensor_writes,
            applies: everywhere,
        },
        Property {
            name: "pool_installation",
            summary: "install is refused while a slice is live, applies to new streams, then rebuilds the idle stream and resets its marks",
            check: memory::pool_installation,
            applies: everywhere,
        },
        Property {
            name: "memory_budget",
            summary: "a budget bounds what the pools reserve: allocations past it are refused naming it, a budget below the reserve is refused, freed memory fits again",
            check: memory::memory_budget,
            applies: everywhere,
        },
        Property {
            name: "stream_ordering",
            summary: "random multi-stream programs read exactly what a sequential reference model holds",
            check: ordering::stream_ordering,
            applies: everywhere,
        },
        Property {
            name: "concurrent_submitters",
            summary: "several OS threads submitting at once lose nothing and do not deadlock",
            check: ordering::concurrent_submitters,
            applies: everywhere,
        },
        Property {
            name: "workgroup_kernels",
            summary: "a shared-memory reduction, a histogram with shared and global atomics, claims by compare-exchange, while/break/continue loops and the math functions compute the reference (math within the WGSL bounds)",
            check: kernels::workgroup_kernels,
            applies: everywhere,
        },
        Property {
            name: "dynamic_counts",
            summary: "a dynamic workgroup count runs exactly the workgroups it holds when the launch executes, and none when a count is zero or above the device's maximum",
            check: dynamic_counts::dynamic_counts,
            applies: everywhere,
        },
        Property {
            name: "f16_arithmetic",
            summary: "f16 + - * min max, negation, abs, select and conversions to and from f32/i32/u32 give the bits the half crate computes (each operation rounded once, to nearest even)",
            check: half_floats::f16_arithmetic,
            applies: half_floats::with_f16,
        },
        Property {
            name: "bf16_arithmetic",
            summary: "bf16 + - * min max, negation, abs, select and conversions to and from f32/i32/u32 give the bits the half crate computes (each operation rounded once, to nearest even)",
            check: half_floats::bf16_arithmetic,
            applies: half_floats::with_bf16,
        },
        Property {
            name: "real_kernels",
            summary: "a two-pass f32 reduction (bit-exact), a row softmax, a layer norm and a tiled matrix product (within their derived bounds), and a decode step captured and replayed, every stage checked",
            check: ops::real_kernels,
            applies: everywhere,
        },
        Property {
            name: "graph_replay",
            summary: "a captured decode loop replays like eager launches, with fresh inputs, dropped handles and other streams' work between replays",
            check: graphs::graph_replay,
            applies: everywhere,
        },
        Property {
            name: "capture_refusals",
            summary: "a write in the capture window fails stop_capture, as an allocation does on hardware graphs; buffer and stream stay as they were",
            check: graphs::capture_refusals,
            applies: everywhere,
        },
        Property {
            name: "error_surfacing",
            summary: "a kernel fault surfaces once, on its stream, at the next blocking call; nothing else changes",
            check: errors::error_surfacing,
            applies: everywhere,
        },
        Property {
            name: "injected_faults",
            summary: "injected transfer and kernel failures (several per batch, on several streams) each surface once, oldest first, on their stream; untouched data keeps the reference",
            check: faults::injected_faults,
            applies: with_fault_injection,
        },
        Property {
            name: "allocation_refusals",
            summary: "allocations the device refuses after the runtime's reclaim and retry are OutOfMemory at the call; the program goes on computing the reference",
            check: faults::allocation_refusals,
            applies: with_fault_injection,
        },
        Property {
            name: "all_reduce",
            summary: "devices enumerate themselves; an all-reduce over 1..=4 devices equals the reference reduction for random inputs, lengths, ops and types; a list of no rank, without the caller, with a rank twice, an absent index or another backend is refused at the call",
            check: collectives::all_reduce,
            applies: with_collectives,
        },
        Property {
            name: "to_client",
            summary: "a copy to another client (peer or read-then-write) holds the source's bytes in stream order, on any stream",
            check: collectives::to_client,
            applies: everywhere,
        },
        Property {
            name: "profiling",
            summary: "profile times launches (longer for more work in virtual time), levels register every launch, capture refuses profiling",
            check: profiling::profiling,
            applies: everywhere,
        },
        Property {
            name: "lazy_reads",
            summary: "read_lazy equals read_tensor and sees the device as it is at first access",
            check: profiling::lazy_reads,
            applies: everywhere,
        },
        Property {
            name: "staging",
            summary: "staged bytes keep their contents and round-trip through create and write",
            check: profiling::staging,
            applies: everywhere,
        },
        Property {
            name: "dry_runs",
            summary: "launches in a dry run are validated but change no memory; the same launches then compute the reference",
            check: profiling::dry_runs,
            applies: everywhere,
        },
        Property {
            name: "resources",
            summary: "get_resource waits for earlier work and its guard keeps the memory alive after every handle dropped",
            check: profiling::resources,
            applies: everywhere,
        },
        Property {
            name: "explorer_formulas",
            summary: "the explorer's random formula kernels (gathers, shared-memory neighbours, wrapping u32 arithmetic) compute exactly what its plain-Rust model holds",
            check: formulas::explorer_formulas,
            applies: everywhere,
        },
        Property {
            name: "throughput_cache",
            summary: "measure_throughput launches once per device and key, then answers from its cache; vector sizes fit the load width",
            check: profiling::throughput_cache,
            applies: everywhere,
        },
    ]
}

/// The seed of property `name`'s runner for a run seeded with `seed`: distinct per property so
/// that properties do not draw the same cases, yet fixed by the one seed the user sees.
pub fn property_seed(seed: u64, name: &str) -> [u8; 32] {
    let mut h = Fnv1a::default();
    h.write_u64(seed);
    h.write_bytes(name.as_bytes());
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        h.write_u64(i as u64);
        chunk.copy_from_slice(&h.0.to_le_bytes());
    }
    bytes
}

fn runner(config: RunConfig, name: &str) -> TestRunner {
    let proptest_config = Config {
        cases: config.cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &property_seed(config.seed, name));
    TestRunner::new_with_rng(proptest_config, rng)
}

/// Runs `case` on `cases` values of `strategy`, shrinking the first failure.
fn run_cases<S: Strategy>(
    config: RunConfig,
    name: &str,
    strategy: S,
    case: impl Fn(S::Value) -> Result<(), String>,
) -> Result<(), Failure>
where
    S::Value: std::fmt::Debug,
{
    let mut runner = runner(config, name);
    // The runner calls the test once per drawn case until one fails, then again per shrink
    // step: the call that first failed is that case's index.
    let calls = Cell::new(0u32);
    let first_failure = Cell::new(None);
    let result = runner.run(&strategy, |value| {
        calls.set(calls.get() + 1);
        case(value).map_err(|message| {
            first_failure.set(first_failure.get().or(Some(calls.get())));
            TestCaseError::fail(message)
        })
    });
    let case = first_failure.get().unwrap_or(calls.get());
    result.map_err(|err| match err {
        TestError::Fail(reason, value) => Failure {
            message: reason.message().to_owned(),
            minimal_case: format!("{value:?}"),
            case,
        },
        TestError::Abort(reason) => Failure {
            message: format!("aborted: {}", reason.message()),
            minimal_case: String::new(),
            case,
        },
    })
}

/// After every handle dropped, `memory_cleanup` + `sync` bring the device's memory back to
/// `baseline`.
fn expect_baseline<D: lockstep::Device>(
    client: &lockstep::ComputeClient<D>,
    baseline: lockstep::MemoryUsage,
) -> Result<(), String> {
    client.memory_cleanup();
    client
        .sync()
        .map_err(|e| format!("sync after memory_cleanup: {e}"))?;
    let after = client
        .memory_usage()
        .map_err(|e| format!("memory_usage after cleanup: {e}"))?;
    ensure!(
        after == baseline,
        "every handle dropped, memory_cleanup + sync left {after} (baseline {baseline})"
    );
    Ok(())
}

/// Fails if the device's sanitizer reported anything.
fn expect_clean<D: lockstep::Device>(session: &Session<D>) -> Result<(), String> {
    let reports = session.reports(false);
    if reports.is_empty() {
        Ok(())
    } else {
        Err(format!("sanitizer reports: {reports:#?}"))
    }
}
