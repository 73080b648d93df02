//! Dispatch throughput and round-trip latency: `ComputeClient` over `WgpuDevice` against
//! straight wgpu doing the same work, in one process on the same adapter, and the same work
//! straight on `WgpuDevice` through the `Device` trait: the client's figure against that one is
//! what the runtime adds, that one against straight wgpu what the device adds.
//!
//! The paths alternate over [`ROUNDS`] rounds; each figure is the median of its rounds.
//!
//! Run: `cargo bench -p lockstep-wgpu --bench dispatch [-- LAUNCHES]` (without an adapter it
//! prints `SKIPPED: ...` and exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`).

use std::time::Instant;

use lockstep::{Bytes, ComputeClient, Device};
use lockstep_harness::blocking_path::{client_launches, median, straight_launches, trivial_kernel};
use lockstep_harness::requirement::{Need, cannot_run};
use lockstep_wgpu::{WgpuDevice, WgpuOptions, WgpuStream};

/// Rounds of the whole comparison; each figure is the median of its rounds.
const ROUNDS: usize = 7;
/// Write+read round trips per round.
const TRIPS: u32 = 1_000;

/// Mean microseconds of a 4-byte write followed by a read of it, through the client.
fn client_round_trip_us(client: &ComputeClient<WgpuDevice>, rounds: u32) -> f64 {
    let handle = client.create(Bytes::from_elems(&[0u32])).expect("create");
    let start = Instant::now();
    for i in 0..rounds {
        client
            .write(&handle, Bytes::from_elems(&[i]))
            .expect("write");
        let back = client.read_one(handle.clone()).expect("read");
        assert_eq!(back.to_elems::<u32>(), vec![i]);
    }
    start.elapsed().as_secs_f64() * 1e6 / rounds as f64
}

/// The same work straight on `WgpuDevice`, through the `Device` trait: checked kernels (the
/// client's default), one stream, no runtime.
struct OnDevice {
    device: WgpuDevice,
    stream: WgpuStream,
}

impl OnDevice {
    fn new(mut device: WgpuDevice) -> Self {
        let stream = device.create_stream().expect("stream");
        Self { device, stream }
    }

    fn launches(&mut self, launches: u32) -> f64 {
        straight_launches(&mut self.device, self.stream, launches)
    }

    fn round_trip_us(&mut self, rounds: u32) -> f64 {
        let buffer = self.device.allocate(4).expect("allocate");
        let start = Instant::now();
        for i in 0..rounds {
            self.device
                .write(self.stream, &buffer, 0, &i.to_le_bytes())
                .expect("write");
            let read = self.device.read(self.stream, &buffer, 0, 4).expect("read");
            let back = self.device.wait_read(read).expect("wait_read");
            assert_eq!(back.to_elems::<u32>(), vec![i]);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
        self.device.free(buffer);
        us
    }
}

/// The same work straight on wgpu: the lowered checked kernel, one bind group, one pass per
/// 256 dispatches, one submission each.
struct Straight {
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl Straight {
    fn new() -> Self {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
        let adapter = adapters.into_iter().next().expect("an adapter");
        let (device, queue) =
            pollster::block_on(adapter.request_device(&Default::default())).expect("a device");
        Self { device, queue }
    }

    fn storage(&self, size: u64, usage: wgpu::BufferUsages) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE | usage,
            mapped_at_creation: false,
        })
    }

    fn launches(&self, launches: u32) -> f64 {
        let lowered = lockstep_wgpu::lower::lower(trivial_kernel().def(), true, &[]);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(lowered.wgsl.into()),
            });
        let entry = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &[entry(0, false), entry(1, false), entry(2, true)],
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        let data = self.storage(4, wgpu::BufferUsages::empty());
        let fault = self.storage(16, wgpu::BufferUsages::empty());
        let info = self.storage(20, wgpu::BufferUsages::COPY_DST);
        let words: [u32; 5] = [0, 0, 1, 0, 4];
        let info_bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.queue.write_buffer(&info, 0, &info_bytes);
        let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: data.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: fault.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: info.as_entire_binding(),
                },
            ],
        });
        let start = Instant::now();
        let mut left = launches;
        while left > 0 {
            let n = left.min(256);
            left -= n;
            let mut encoder = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                for _ in 0..n {
                    pass.set_pipeline(&pipeline);
                    pass.set_bind_group(0, &bind_group, &[]);
                    pass.dispatch_workgroups(1, 1, 1);
                }
            }
            self.queue.submit([encoder.finish()]);
        }
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        launches as f64 / start.elapsed().as_secs_f64()
    }

    fn round_trip_us(&self, rounds: u32) -> f64 {
        let buffer = self.storage(
            4,
            wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        );
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 4,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let start = Instant::now();
        for i in 0..rounds {
            self.queue.write_buffer(&buffer, 0, &i.to_le_bytes());
            let mut encoder = self.device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&buffer, 0, &staging, 0, 4);
            self.queue.submit([encoder.finish()]);
            staging
                .slice(..)
                .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
            self.device
                .poll(wgpu::PollType::wait_indefinitely())
                .expect("poll");
            let value = u32::from_le_bytes(
                staging.slice(..).get_mapped_range().expect("mapped")[..4]
                    .try_into()
                    .expect("4 bytes"),
            );
            assert_eq!(value, i);
            staging.unmap();
        }
        start.elapsed().as_secs_f64() * 1e6 / rounds as f64
    }
}

fn main() {
    let launches: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let open = || WgpuOptions::from_env().and_then(WgpuDevice::new);
    let (device, bare) = match open().and_then(|a| Ok((a, open()?))) {
        Ok(devices) => devices,
        Err(err) => {
            cannot_run(Need::WgpuAdapter, "dispatch", &err.to_string());
            return;
        }
    };
    let props = lockstep::Device::properties(&device).clone();
    let client = ComputeClient::new(device);
    let mut on_device = OnDevice::new(bare);
    let straight = Straight::new();
    // Figure `i` of a round: launches per second through the client, the device and
    // straight wgpu (0..3), then round-trip microseconds in the same order (3..6).
    let mut measure = |figure: usize, n: u32| match figure {
        0 => client_launches(&client, n),
        1 => on_device.launches(n),
        2 => straight.launches(n),
        3 => client_round_trip_us(&client, n),
        4 => on_device.round_trip_us(n),
        _ => straight.round_trip_us(n),
    };
    // One run of each figure gave ratios from 0.39 to 0.99 on the H200, every path moving
    // between two rates (about 0.6M and 0.88M dispatches/s) from one round to the next, and
    // the path measured first after the round trips (the GPU idle) in the slow one more
    // often. So each measurement follows a short untimed run of its own path, the paths take
    // turns at going first, and each figure is the median of its rounds, with the median of
    // the rounds' own ratios beside it.
    let mut rounds: Vec<[f64; 6]> = Vec::new();
    for round in 0..ROUNDS {
        let mut row = [0.0; 6];
        for (kind, n) in [(0, launches), (3, TRIPS)] {
            for turn in 0..3 {
                let figure = kind + (round + turn) % 3;
                measure(figure, n / 10);
                row[figure] = measure(figure, n);
            }
        }
        rounds.push(row);
    }
    println!("adapter: {} ({})", props.name, props.backend);
    println!("launches: {launches} per round, {TRIPS} round trips per round, {ROUNDS} rounds");
    let figure = |label: &str, i: usize, unit: &str| {
        let values: Vec<f64> = rounds.iter().map(|r| r[i]).collect();
        let (lo, hi) = values
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        println!(
            "{label:<44} {:>10.1} {unit} (rounds {lo:.1}..{hi:.1})",
            median(values)
        );
    };
    let ratio = |label: &str, a: usize, b: usize| {
        let ratios = rounds.iter().map(|r| r[a] / r[b]).collect();
        println!(
            "{label:<44} {:>10.2} (median of the rounds' ratios)",
            median(ratios)
        );
    };
    figure("dispatches, straight wgpu", 2, "/s");
    figure("dispatches, straight on WgpuDevice", 1, "/s");
    figure("dispatches, ComputeClient::launch", 0, "/s");
    ratio("dispatch rate client/straight wgpu", 0, 2);
    ratio("dispatch rate client/WgpuDevice", 0, 1);
    ratio("dispatch rate WgpuDevice/straight wgpu", 1, 2);
    figure("write+read round trip, straight wgpu", 5, "us");
    figure("write+read round trip, straight on WgpuDevice", 4, "us");
    figure("write+read round trip, ComputeClient", 3, "us");
    ratio("round trip client/straight wgpu", 3, 5);
    ratio("round trip client/WgpuDevice", 3, 4);
    ratio("round trip WgpuDevice/straight wgpu", 4, 5);
}
