//! What recording costs (issue 32): a client that records every call (data past 1 MiB kept as
//! hashes, the default) beside one that does not, on one device, measured alternately in one
//! run so that both meet the same clocks:
//!
//! - launches per second of a trivial kernel (checked, as users run by default);
//! - 256 MiB written from heap memory (`write`, then `sync`), in GB/s;
//! - 256 MiB written from pinned memory (`staging` first, untimed; then `write` and `sync`).
//!
//! Each figure is the median of [`REPS`] rounds, each on a fresh pair of clients; the last
//! column is the median of the rounds' recorded / unrecorded. The
//! recording goes to a file in the system's temporary folder, removed at the end.
//!
//! Run: `cargo run --release -p lockstep-bench --example record_overhead [-- sim|wgpu|cuda]`

use std::time::Instant;

use lockstep::record::{RecordTo, Recorder, RecorderConfig};
use lockstep::{Bytes, ComputeClient, Device, ServerOptions};
use lockstep_cuda::CudaDevice;
use lockstep_harness::blocking_path::{client_launches, median};
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

/// Rounds of each figure; the medians are printed.
const REPS: usize = 15;
/// Launches per launch-rate run.
const LAUNCHES: u32 = 20_000;
/// Bytes per write.
const WRITE_BYTES: usize = 256 << 20;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// GB/s of one `write` of `WRITE_BYTES` through `client`, then a `sync`; pinned first if
/// `pinned` (untimed).
fn write_rate<D: Device>(client: &ComputeClient<D>, pinned: bool) -> Result<f64> {
    let handle = client.empty(WRITE_BYTES)?;
    let mut data = Bytes::from_bytes_vec(vec![0x5a; WRITE_BYTES]);
    if pinned {
        client.staging(std::iter::once(&mut data), false)?;
    }
    client.sync()?;
    let start = Instant::now();
    client.write(&handle, data)?;
    client.sync()?;
    Ok(WRITE_BYTES as f64 / start.elapsed().as_secs_f64() / 1e9)
}

/// One figure, recorded and not: `REPS` rounds, each on a fresh pair of clients (so that
/// their threads land on new cores each round: a client's actor thread placed beside its
/// caller, or not, moves the launch rate by a fifth either way), the pair measured in turn,
/// first one then the other, each after a warm-up. Returns the medians and the median of the
/// rounds' ratios.
fn both<D: Device>(
    open: &impl Fn(bool) -> Result<ComputeClient<D>>,
    mut figure: impl FnMut(&ComputeClient<D>) -> Result<f64>,
) -> Result<[f64; 3]> {
    let mut samples = [Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    for round in 0..REPS {
        let mut pair = [0.0; 2];
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let client = open(which == 1)?;
            figure(&client)?;
            pair[which] = figure(&client)?;
            samples[which].push(pair[which]);
        }
        ratios.push(pair[1] / pair[0]);
    }
    let [plain, recorded] = samples;
    Ok([median(plain), median(recorded), median(ratios)])
}

fn measure<D: Device>(open: impl Fn() -> Result<D>) -> Result<()> {
    let path = std::env::temp_dir().join(format!("record_overhead-{}.rec", std::process::id()));
    let recorder = Recorder::open(&path, RecorderConfig::default())?;
    let client = |recorded: bool| -> Result<ComputeClient<D>> {
        let record = if recorded {
            RecordTo::Recorder(recorder)
        } else {
            RecordTo::Off
        };
        let options = ServerOptions {
            record,
            ..ServerOptions::default()
        };
        Ok(ComputeClient::with_options(open()?, options))
    };
    println!(
        "{}: recorded (data past {} bytes hashed) / unrecorded; medians of {REPS} rounds",
        open()?.properties().name,
        RecorderConfig::default().data_bytes_max
    );
    let rows: [(&str, &str, [f64; 3]); 3] = [
        (
            "launches",
            "launches/s",
            both(&client, |c| Ok(client_launches(c, LAUNCHES)))?,
        ),
        (
            "write 256 MiB, heap",
            "GB/s",
            both(&client, |c| write_rate(c, false))?,
        ),
        (
            "write 256 MiB, pinned",
            "GB/s",
            both(&client, |c| write_rate(c, true))?,
        ),
    ];
    println!(
        "{:<24} {:>14} {:>14} {:>7}",
        "figure", "unrecorded", "recorded", "ratio"
    );
    for (name, unit, [off, on, ratio]) in rows {
        println!("{name:<24} {off:>14.1} {on:>14.1} {ratio:>6.3}x  ({unit})");
    }
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!("recording: {bytes} bytes");
    std::fs::remove_file(&path)?;
    Ok(())
}

fn main() -> Result<()> {
    match std::env::args().nth(1).as_deref().unwrap_or("sim") {
        "sim" => measure(|| Ok(SimDevice::new(SimConfig::new(0)))),
        "wgpu" => measure(|| Ok(WgpuDevice::new(WgpuOptions::from_env()?)?)),
        "cuda" => measure(|| Ok(CudaDevice::new(0)?)),
        other => Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
}
