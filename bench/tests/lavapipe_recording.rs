//! A run recorded on a real device (lavapipe in CI) replays on the simulator with every read
//! matching (issue 32, 4c): the decode loop (graph capture and replays feeding tokens back on
//! the device), a row softmax and a layer norm, recorded with their data kept, then replayed
//! by `lockstep::replay` as `lockstep replay --recording` does. Floats that kernels computed
//! match within the default tolerance (lavapipe rounds `exp` and `tanh` its own way); tokens,
//! indices and host data match bit for bit. Skipped, visibly, without a wgpu adapter (failed
//! under `LOCKSTEP_REQUIRE_WGPU=1`).

use lockstep::record::{RecordTo, Recorder, RecorderConfig};
use lockstep::replay::{FloatTolerance, replay};
use lockstep::{ComputeClient, ServerOptions, StreamId};
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_kernels::ops::check::{layer_norm_rows, softmax_rows};
use lockstep_kernels::ops::decode::{Dims, Weights, run_decode};
use lockstep_sim::{SimConfig, SimDevice};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

const TEST: &str = "a lavapipe recording replays on the simulator";

/// Records the workload on `device` into `path`, every create's and write's data kept.
fn record(device: WgpuDevice, path: &std::path::Path) -> Vec<u32> {
    let config = RecorderConfig {
        data_bytes_max: 64 << 20,
    };
    let recorder = Recorder::open(path, config).expect("the recording file opens");
    let options = ServerOptions {
        record: RecordTo::Recorder(recorder),
        ..ServerOptions::default()
    };
    let mut client = ComputeClient::with_options(device, options);
    client.set_stream(StreamId(0));
    let tokens = run_decode(&client, &Weights::generate(Dims::SMALL, 7), 1, 8)
        .expect("the decode loop matches its references on the adapter");
    softmax_rows(&client, 3, 5, 1000).expect("softmax matches its reference");
    layer_norm_rows(&client, 3, 5, 1000).expect("layer norm matches its reference");
    tokens
}

#[test]
fn a_run_recorded_on_lavapipe_replays_on_the_simulator_with_every_read_matching() {
    let device = match WgpuOptions::from_env().and_then(WgpuDevice::new) {
        Ok(device) => device,
        Err(err) => return cannot_run(Need::WgpuAdapter, TEST, &err.to_string()),
    };
    let adapter = lockstep::Device::properties(&device).name.clone();
    let path = std::env::temp_dir().join(format!("lavapipe-{}.rec", std::process::id()));
    let tokens = record(device, &path);
    let file = std::fs::File::open(&path).expect("the recording exists");
    let options = ServerOptions {
        record: RecordTo::Off,
        ..ServerOptions::default()
    };
    let report = replay(file, FloatTolerance::default(), |_| {
        ComputeClient::with_options(SimDevice::new(SimConfig::new(0)), options)
    })
    .expect("the recording reads to its end");
    std::fs::remove_file(&path).expect("the recording is removed");
    println!("recorded on {adapter} (tokens {tokens:?}), replayed on the simulator:\n{report}");
    assert!(report.matched(), "{report}");
    assert!(report.unchecked.is_empty(), "{report}");
    assert!(report.skipped.is_empty(), "{report}");
    // 8 decode steps read their stages back, then softmax and layer norm their rows.
    assert!(report.reads_matched >= 40, "{report}");
}
