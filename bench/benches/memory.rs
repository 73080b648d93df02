//! Memory: allocate+free throughput through the pools vs raw device allocation, and
//! fragmentation (peak bytes reserved / peak bytes live) on a trace shaped like a transformer's
//! forward and backward pass. All on the simulator, measured in one run.
//!
//! Run: `cargo bench -p lockstep-bench --bench memory [-- sim|wgpu|cuda]` (fragmentation
//! is measured on the simulator, throughput on the device named).

use std::time::Instant;

use lockstep::{ComputeClient, Device, StreamId};
use lockstep_sim::{SimConfig, SimDevice};

fn device() -> SimDevice {
    SimDevice::new(SimConfig::new(1).with_memory(4 << 30, 1 << 30))
}

/// Sizes of a small-tensor churn: 1 KiB to 64 KiB.
fn churn_sizes(count: usize) -> Vec<u64> {
    (0..count).map(|i| 1024u64 << (i % 7)).collect()
}

fn pools_rate<D: Device>(device: D, sizes: &[u64]) -> f64 {
    let mut client = ComputeClient::new(device);
    client.set_stream(StreamId(0));
    // Warm the pools so the measurement sees steady state.
    drop(client.empty(64 << 10).expect("empty"));
    let start = Instant::now();
    for &size in sizes {
        drop(client.empty(size as usize).expect("empty"));
    }
    client.sync().expect("sync");
    sizes.len() as f64 / start.elapsed().as_secs_f64()
}

fn raw_rate<D: Device>(mut device: D, sizes: &[u64]) -> f64 {
    let start = Instant::now();
    for &size in sizes {
        let buffer = device.allocate(size).expect("allocate");
        device.free(buffer);
    }
    sizes.len() as f64 / start.elapsed().as_secs_f64()
}

/// One allocation event of the trace: allocate `bytes` under `id`, or free `id`.
enum Event {
    Alloc { id: usize, bytes: u64 },
    Free { id: usize },
}

/// A transformer training step: the forward pass keeps each layer's activations for the
/// backward pass (temporaries like attention scores die at once); the backward pass walks the
/// layers in reverse, allocating gradients and freeing what it consumed.
fn transformer_trace() -> Vec<Event> {
    let (batch, seq, hidden, heads, layers) = (2u64, 256u64, 512u64, 8u64, 6usize);
    let act = batch * seq * hidden * 4;
    let scores = batch * heads * seq * seq * 4;
    let mlp = batch * seq * hidden * 4 * 4;
    let stats = batch * seq * 4;
    let mut events = Vec::new();
    let mut next = 0usize;
    let mut alloc = |events: &mut Vec<Event>, bytes| {
        next += 1;
        events.push(Event::Alloc { id: next, bytes });
        next
    };
    let mut saved: Vec<Vec<usize>> = Vec::new();
    for _ in 0..layers {
        let mut keep = Vec::new();
        for bytes in [stats, act, act, act, act] {
            keep.push(alloc(&mut events, bytes)); // layer-norm stats, q, k, v, x
        }
        let s = alloc(&mut events, scores);
        keep.push(alloc(&mut events, scores)); // probabilities
        events.push(Event::Free { id: s });
        for bytes in [act, mlp, act, stats] {
            keep.push(alloc(&mut events, bytes)); // attention out, MLP hidden, out, stats
        }
        saved.push(keep);
    }
    let mut upstream: Vec<usize> = Vec::new();
    for keep in saved.into_iter().rev() {
        let mut grads = Vec::new();
        for bytes in [act, mlp, act, scores, act, act, act] {
            grads.push(alloc(&mut events, bytes));
        }
        let tmp = alloc(&mut events, scores);
        events.push(Event::Free { id: tmp });
        for id in upstream.drain(..).chain(keep) {
            events.push(Event::Free { id });
        }
        upstream = grads;
    }
    for id in upstream {
        events.push(Event::Free { id });
    }
    events
}

/// Peak bytes reserved by the pools over peak bytes live, replaying the trace.
fn fragmentation(events: &[Event]) -> (f64, u64, u64) {
    let mut client = ComputeClient::new(device());
    client.set_stream(StreamId(0));
    let mut live = std::collections::BTreeMap::new();
    let (mut bytes_live, mut peak_live) = (0u64, 0u64);
    for event in events {
        match *event {
            Event::Alloc { id, bytes } => {
                live.insert(id, (client.empty(bytes as usize).expect("empty"), bytes));
                bytes_live += bytes;
                peak_live = peak_live.max(bytes_live);
            }
            Event::Free { id } => {
                let (handle, bytes) = live.remove(&id).expect("freed once");
                drop(handle);
                bytes_live -= bytes;
            }
        }
    }
    let report = client.memory_report().expect("report");
    let peak_reserved: u64 = report.pools.iter().map(|p| p.bytes_reserved_peak).sum();
    (
        peak_reserved as f64 / peak_live as f64,
        peak_reserved,
        peak_live,
    )
}

fn throughput<D: Device>(open: impl Fn() -> D) {
    let sizes = churn_sizes(100_000);
    pools_rate(open(), &sizes[..5_000]);
    raw_rate(open(), &sizes[..5_000]);
    let pools = pools_rate(open(), &sizes);
    let raw = raw_rate(open(), &sizes);
    let name = open().properties().name.clone();
    println!("allocate+free, 1-64 KiB, {} ops on {name}:", sizes.len());
    println!("  raw Device::allocate/free:   {raw:>12.0} ops/s");
    println!("  ComputeClient empty+drop:    {pools:>12.0} ops/s");
    println!("  ratio pools/raw:             {:>12.2}", pools / raw);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map_or("sim", String::as_str) {
        "sim" => throughput(device),
        "wgpu" => {
            let options = lockstep_wgpu::WgpuOptions::from_env()?;
            lockstep_wgpu::WgpuDevice::new(options.clone())?;
            throughput(|| lockstep_wgpu::WgpuDevice::new(options.clone()).expect("opened once"));
        }
        "cuda" => {
            lockstep_cuda::CudaDevice::new(0)?;
            throughput(|| lockstep_cuda::CudaDevice::new(0).expect("opened once"));
        }
        other => return Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
    let trace = transformer_trace();
    let (ratio, reserved, live) = fragmentation(&trace);
    println!("transformer trace, {} events (simulator):", trace.len());
    println!("  peak bytes live:     {live:>12}");
    println!("  peak bytes reserved: {reserved:>12}");
    println!("  fragmentation:       {ratio:>12.3} (goal <= 1.25)");
    Ok(())
}
