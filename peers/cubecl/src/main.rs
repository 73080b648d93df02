//! cubecl, the seed's client, measured on the figures of Lockstep's blocking-path benchmark
//! (`cuda-device/benches/runtime_vs_raw.rs`, `bench/benches/graph.rs`), through cubecl's
//! own `Client` on its CUDA and wgpu runtimes, in the same way:
//!
//! - launches per second of an empty kernel (one 1×1×1 cube), then `sync`;
//! - `write` of 256 MiB from a `Vec` (then `sync`) and `read_one` of 256 MiB, medians of 7
//!   (`PEER_COPY_MIB` sets another size);
//! - `empty(1 MiB)` + drop, the mean of a loop;
//! - a 4-byte create → launch (increment) → read round trip, the mean of a loop;
//! - replays of a 100-kernel graph, in kernels per second (CUDA only: cubecl's wgpu runtime
//!   has no graphs).
//!
//! Each figure is printed for a person and as a `FIGURE<TAB>key<TAB>column<TAB>value` line that
//! `scripts/gpu/peers_table.py` merges with Lockstep's and PyTorch's into one table.
//!
//! Run on the GPU host: `cubecl-peer cuda` or `cubecl-peer wgpu` (built by
//! `scripts/gpu/h200.sh`; outside the workspace, CI never builds it). `cubecl-peer lockstep`
//! measures cubecl kernels through Lockstep's CUDA device beside cubecl-cuda (`vs_lockstep`).

mod vs_lockstep;

use std::time::Instant;

use cubecl::bytes::Bytes;
use cubecl::device::WgpuDeviceKind;
use cubecl::future::block_on;
use cubecl::prelude::*;

const LAUNCHES: u32 = 50_000;
const LAUNCH_ROUNDS: u32 = 3;
const COPY_REPS: usize = 7;
const ALLOC_BYTES: usize = 1 << 20;
const ALLOC_REPS: u32 = 2_000;
const ROUND_TRIPS: u32 = 2_000;
const GRAPH_KERNELS: usize = 100;
const GRAPH_REPLAYS: u32 = 2_000;

#[cube(launch)]
fn empty(_out: &mut [u32]) {}

#[cube(launch)]
fn increment(data: &mut [u32]) {
    if ABSOLUTE_POS < data.len() {
        data[ABSOLUTE_POS] += 1;
    }
}

/// One measured figure: its key in the merged table, value and unit.
struct Figure {
    key: &'static str,
    what: &'static str,
    value: f64,
    unit: &'static str,
}

fn sync(client: &Client) {
    block_on(client.sync()).expect("sync");
}

fn one_u32(handle: &cubecl::server::Handle) -> BufferArg {
    // SAFETY (cubecl's contract): the handle holds at least one u32.
    unsafe { BufferArg::from_raw_parts(handle.clone(), 1) }
}

/// Best of `LAUNCH_ROUNDS` rounds of `LAUNCHES` empty launches, then `sync`.
fn launches(client: &Client) -> f64 {
    let out = client.empty(4);
    let mut best = 0f64;
    for _ in 0..LAUNCH_ROUNDS {
        let start = Instant::now();
        for _ in 0..LAUNCHES {
            empty::launch(
                client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_single(),
                one_u32(&out),
            );
        }
        sync(client);
        best = best.max(f64::from(LAUNCHES) / start.elapsed().as_secs_f64());
    }
    best
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Bytes of each copy: 256 MiB, or `PEER_COPY_MIB` MiB (lavapipe cannot hold 256 MiB in one
/// buffer; the smoke test on the build machine uses less).
fn copy_bytes() -> usize {
    let mib = std::env::var("PEER_COPY_MIB").map_or(256, |v| v.parse().expect("PEER_COPY_MIB"));
    mib << 20
}

/// Medians of `write` from a `Vec` (with `sync`) and `read_one`, in GB/s, checking the bytes.
fn copies(client: &Client) -> (f64, f64) {
    let bytes = copy_bytes();
    let gb = |start: Instant| bytes as f64 / start.elapsed().as_secs_f64() / 1e9;
    let data: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
    let handle = client.empty(bytes);
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for rep in 0..=COPY_REPS {
        let bytes = Bytes::from_bytes_vec(data.clone());
        let start = Instant::now();
        client.write(&handle, bytes);
        sync(client);
        let write = gb(start);
        let start = Instant::now();
        let back = client.read_one(handle.clone()).expect("read");
        let read = gb(start);
        assert!(back[..] == data[..], "read back what was written");
        // The first repetition warms the pools; it is not measured, as in Lockstep's bench.
        if rep > 0 {
            writes.push(write);
            reads.push(read);
        }
    }
    (median(writes), median(reads))
}

/// Microseconds per `empty(1 MiB)` + drop, after a warm-up, with a `sync` at the end.
fn allocations(client: &Client) -> f64 {
    for _ in 0..100 {
        drop(client.empty(ALLOC_BYTES));
    }
    let start = Instant::now();
    for _ in 0..ALLOC_REPS {
        drop(client.empty(ALLOC_BYTES));
    }
    sync(client);
    start.elapsed().as_secs_f64() * 1e6 / f64::from(ALLOC_REPS)
}

/// Microseconds per 4-byte create → increment → read, checking each result.
fn round_trips(client: &Client) -> f64 {
    let once = |i: u32| {
        let handle = client.create(Bytes::from_elems(vec![i]));
        increment::launch(
            client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(32),
            one_u32(&handle),
        );
        let back = client.read_one(handle).expect("read");
        assert_eq!(u32::from_le_bytes(back[..4].try_into().unwrap()), i + 1);
    };
    (0..100).for_each(once);
    let start = Instant::now();
    (0..ROUND_TRIPS).for_each(once);
    start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUND_TRIPS)
}

/// Kernels per second replaying a captured graph of `GRAPH_KERNELS` launches of the empty
/// kernel on one binding, as Lockstep's graph bench captures them.
fn graph_replays(client: &Client) -> f64 {
    let handle = client.empty(4);
    let run = || {
        for _ in 0..GRAPH_KERNELS {
            empty::launch(
                client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_single(),
                one_u32(&handle),
            );
        }
    };
    client.graph_prepare().expect("graph_prepare");
    run();
    sync(client);
    client.start_capture().expect("start_capture");
    run();
    let graph = client.stop_capture().expect("stop_capture");
    sync(client);
    // SAFETY (cubecl's contract): `handle` stays alive and is used only on this stream.
    let replay = || unsafe { graph.replay() }.expect("replay");
    (0..10).for_each(|_| replay());
    sync(client);
    let start = Instant::now();
    (0..GRAPH_REPLAYS).for_each(|_| replay());
    sync(client);
    (GRAPH_KERNELS as f64) * f64::from(GRAPH_REPLAYS) / start.elapsed().as_secs_f64()
}

fn measure(client: &Client, graphs: bool) -> Vec<Figure> {
    let (write, read) = copies(client);
    let mut figures = vec![
        Figure {
            key: "launches",
            what: "launches of an empty kernel",
            value: launches(client),
            unit: "launches/s",
        },
        Figure {
            key: "read",
            what: "read (read_one, median)",
            value: read,
            unit: "GB/s",
        },
        Figure {
            key: "write_vec",
            what: "write from a Vec (median)",
            value: write,
            unit: "GB/s",
        },
        Figure {
            key: "empty_1mib_drop",
            what: "empty(1 MiB)+drop",
            value: allocations(client),
            unit: "us",
        },
        Figure {
            key: "round_trip_4b",
            what: "4-byte create -> launch -> read",
            value: round_trips(client),
            unit: "us",
        },
    ];
    if graphs {
        figures.push(Figure {
            key: "graph_replay_100",
            what: "100-kernel graph replay",
            value: graph_replays(client),
            unit: "kernels/s",
        });
    }
    figures
}

fn main() {
    let runtime = std::env::args().nth(1).unwrap_or_else(|| "cuda".to_owned());
    let (column, figures) = match runtime.as_str() {
        "cuda" => {
            let client = cubecl::Device::cuda(0).expect("a CUDA GPU").client();
            ("cubecl-cuda", measure(&client, true))
        }
        "wgpu" => {
            let kind = WgpuDeviceKind::default();
            let client = cubecl::Device::vulkan(kind).expect("a Vulkan GPU").client();
            ("cubecl-wgpu", measure(&client, false))
        }
        "lockstep" => return vs_lockstep::on_cuda(),
        "lockstep-kernels" => return vs_lockstep::kernels_on_cuda(),
        "lockstep-smoke" => return vs_lockstep::smoke(),
        other => {
            eprintln!(
                "usage: cubecl-peer cuda|wgpu|lockstep|lockstep-kernels|lockstep-smoke (got {other:?})"
            );
            std::process::exit(2);
        }
    };
    println!(
        "cubecl 0.11.3 ({column}), copies of {} MiB",
        copy_bytes() >> 20
    );
    for f in &figures {
        println!("{:<40} {:>14.2} {}", f.what, f.value, f.unit);
    }
    for f in &figures {
        println!("FIGURE\t{}\t{column}\t{}", f.key, f.value);
    }
}
