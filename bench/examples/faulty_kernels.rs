//! The kernel sanitizer's faulty kernels (`lockstep_kernels::ops::faulty`) on one device:
//! the tiled product without its closing barrier, the tree reduction without barriers between
//! levels, and the barrier behind a racing flag. On the simulator it prints what the kernel
//! sanitizer reports for each; on CUDA it only runs them, for `compute-sanitizer`:
//!
//! ```text
//! compute-sanitizer --tool racecheck faulty_kernels cuda
//! compute-sanitizer --tool synccheck faulty_kernels cuda
//! ```
//!
//! Run: `cargo run --release -p lockstep-bench --example faulty_kernels [-- sim|wgpu|cuda [SEED]]`

use lockstep::kernel::Scalar;
use lockstep::{Bytes, CubeCount, Handle, Kernel, KernelArguments};
use lockstep_conformance::{CudaFactory, DeviceFactory, SimFactory, WgpuFactory};
use lockstep_kernels::ops::faulty::{self, LANES};
use lockstep_kernels::ops::matmul::grid;
use lockstep_kernels::ops::uniform;

/// A launch of one faulty kernel: its workgroups, buffers (`f32` or `u32` contents) and
/// parameters.
struct Case {
    kernel: Kernel,
    groups: (u32, u32),
    buffers: Vec<Bytes>,
    params: Vec<Scalar>,
}

fn cases() -> [Case; 3] {
    // Three steps of the product's depth, so a step's staging overwrites the previous step's.
    let (m, n, k) = (40, 36, 24);
    [
        Case {
            kernel: faulty::matmul_missing_barrier(),
            groups: grid(m, n),
            buffers: vec![
                Bytes::from_elems(&uniform(1, (m * k) as usize, -1.0, 1.0)),
                Bytes::from_elems(&uniform(2, (k * n) as usize, -1.0, 1.0)),
                Bytes::from_elems(&vec![0.0f32; (m * n) as usize]),
            ],
            params: [m, n, k].map(Scalar::U32).to_vec(),
        },
        Case {
            kernel: faulty::racy_reduce(),
            groups: (4, 1),
            buffers: vec![
                Bytes::from_elems(&uniform(3, 4 * LANES as usize, -1.0, 1.0)),
                Bytes::from_elems(&[0.0f32; 4]),
            ],
            params: vec![],
        },
        Case {
            kernel: faulty::divergent_barrier(),
            groups: (4, 1),
            buffers: vec![
                Bytes::from_elems(&[0u32]),
                Bytes::from_elems(&vec![0u32; 4 * LANES as usize]),
            ],
            params: vec![],
        },
    ]
}

fn run<F: DeviceFactory>(factory: &F, seed: u64) -> Result<(), Box<dyn std::error::Error>> {
    for case in cases() {
        let session = factory.open(seed);
        let c = &session.client;
        let handles: Vec<Handle> = case
            .buffers
            .into_iter()
            .map(|b| c.create(b))
            .collect::<Result<_, _>>()?;
        let args = handles
            .iter()
            .fold(KernelArguments::new(), |a, h| a.binding(h));
        let args = case.params.iter().fold(args, |a, &p| a.param(p));
        let (x, y) = case.groups;
        c.launch(&case.kernel, CubeCount::Static(x, y, 1), args)?;
        c.sync()?;
        let reports = session.reports(false);
        println!("{}: ran on {}", case.kernel.name(), factory.name());
        for report in &reports {
            println!("  {report}");
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let device = args.next().unwrap_or_else(|| "sim".to_owned());
    let seed = args.next().map(|s| s.parse()).transpose()?.unwrap_or(0);
    match device.as_str() {
        "sim" => run(&SimFactory::default(), seed),
        "wgpu" => run(&WgpuFactory::from_env()?, seed),
        "cuda" => run(&CudaFactory::new(0)?, seed),
        other => Err(format!("unknown device `{other}`: use sim, wgpu or cuda").into()),
    }
}
