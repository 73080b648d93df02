//! Dispatch throughput and round-trip latency: `ComputeClient` over `WgpuDevice` against
//! straight wgpu doing the same work, in one process on the same adapter.
//!
//! The two paths alternate over [`ROUNDS`] rounds; each figure is the median of its rounds.
//!
//! Run: `cargo bench -p lockstep-wgpu --bench dispatch [-- LAUNCHES]` (without an adapter it
//! prints `SKIPPED: ...` and exits 0, or fails under `LOCKSTEP_REQUIRE_GPU=1`).

use std::time::Instant;

use lockstep::kernel::{Access, ElemType, KernelBuilder};
use lockstep::{Bytes, ComputeClient, CubeCount, Kernel, KernelArguments};
use lockstep_conformance::requirement::{Need, cannot_run};
use lockstep_wgpu::{WgpuDevice, WgpuOptions};

/// Rounds of the whole comparison; each figure is the median of its rounds.
const ROUNDS: usize = 7;
/// Write+read round trips per round.
const TRIPS: u32 = 1_000;

/// A kernel that does nothing with its one binding: the cost measured is the launch path.
fn trivial() -> Kernel {
    let mut k = KernelBuilder::new("trivial", [1, 1, 1]);
    k.binding(ElemType::U32, Access::ReadWrite);
    k.build().expect("valid")
}

/// Launches per second through the client (checked mode, as users run by default).
fn client_launches(client: &ComputeClient<WgpuDevice>, launches: u32) -> f64 {
    let kernel = trivial();
    let handle = client.create(Bytes::from_elems(&[0u32])).expect("create");
    client.compile(&kernel).expect("compile");
    client.sync().expect("sync");
    let start = Instant::now();
    for _ in 0..launches {
        let args = KernelArguments::new().binding(&handle);
        client
            .launch(&kernel, CubeCount::Static(1, 1, 1), args)
            .expect("launch");
    }
    client.sync().expect("sync");
    launches as f64 / start.elapsed().as_secs_f64()
}

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
        let lowered = lockstep_wgpu::lower::lower(trivial().def(), true, &[]);
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
    let device = match WgpuOptions::from_env().and_then(WgpuDevice::new) {
        Ok(device) => device,
        Err(err) => {
            cannot_run(Need::WgpuAdapter, "dispatch", &err.to_string());
            return;
        }
    };
    let props = lockstep::Device::properties(&device).clone();
    let client = ComputeClient::new(device);
    let straight = Straight::new();
    // Warm up both paths (pipelines, allocator, threads) before measuring.
    client_launches(&client, launches / 10);
    straight.launches(launches / 10);
    client_round_trip_us(&client, TRIPS / 10);
    straight.round_trip_us(TRIPS / 10);
    // One run of each figure gave ratios from 0.39 to 0.99 on the H200, the straight figure
    // itself moving by 1.5x between runs: the machine's moments, not either path. So the two
    // paths alternate over several rounds, and each figure is the median of its rounds, with
    // the median of the rounds' own ratios beside it.
    let mut rounds: Vec<[f64; 4]> = Vec::new();
    for _ in 0..ROUNDS {
        rounds.push([
            client_launches(&client, launches),
            straight.launches(launches),
            client_round_trip_us(&client, TRIPS),
            straight.round_trip_us(TRIPS),
        ]);
    }
    let median_of = |f: &dyn Fn(&[f64; 4]) -> f64| median(rounds.iter().map(f).collect());
    let spread = |i: usize| {
        let (lo, hi) = rounds
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(r[i]), hi.max(r[i])));
        format!("{lo:.0}..{hi:.0}")
    };
    println!("adapter: {} ({})", props.name, props.backend);
    println!("launches: {launches} per round, {TRIPS} round trips per round, {ROUNDS} rounds");
    println!(
        "straight wgpu:                {:>12.0} dispatches/s (rounds {})",
        median_of(&|r| r[1]),
        spread(1)
    );
    println!(
        "ComputeClient::launch:        {:>12.0} dispatches/s (rounds {})",
        median_of(&|r| r[0]),
        spread(0)
    );
    println!(
        "ratio client/straight:        {:>12.2} (median of the rounds' ratios)",
        median_of(&|r| r[0] / r[1])
    );
    println!(
        "write+read round trip, straight wgpu: {:>8.1} us (rounds {})",
        median_of(&|r| r[3]),
        spread(3)
    );
    println!(
        "write+read round trip, ComputeClient: {:>8.1} us (rounds {})",
        median_of(&|r| r[2]),
        spread(2)
    );
    println!(
        "round trip client/straight:           {:>8.2} (median of the rounds' ratios)",
        median_of(&|r| r[2] / r[3])
    );
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}
