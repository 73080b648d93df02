//! The kernels of `lockstep_kernels::ops` on the simulator: the faulty ones are reported by
//! the kernel sanitizer on the first seeds (naming the kernel, the array and both statements),
//! their correct counterparts on the same inputs are not, and where a kernel's bits are fixed
//! (the reduction; the matrix product, whose `fma` the simulator fuses) the simulator gives them.

use lockstep::kernel::Scalar;
use lockstep::{Bytes, ComputeClient, CubeCount, Handle, Kernel, KernelArguments};
use lockstep_kernels::ops::faulty::{self, LANES};
use lockstep_kernels::ops::matmul::{self, grid, matmul_fused_host};
use lockstep_kernels::ops::reduce::{reduce_sum, reduce_sum_host};
use lockstep_kernels::ops::uniform;
use lockstep_sim::{KernelFinding, SanitizerReport, SimConfig, SimDevice, SimProbe};

fn client(seed: u64) -> (ComputeClient<SimDevice>, SimProbe) {
    let device = SimDevice::new(SimConfig::new(seed));
    let probe = device.probe();
    (ComputeClient::new(device), probe)
}

/// Launches `kernel` over `groups` with `bindings` and `params`, waits, and returns what the
/// kernel sanitizer found: each finding's kind and detail.
fn findings(
    (c, probe): &(ComputeClient<SimDevice>, SimProbe),
    kernel: &Kernel,
    groups: (u32, u32),
    bindings: &[&Handle],
    params: &[Scalar],
) -> Vec<(KernelFinding, String)> {
    let args = bindings
        .iter()
        .fold(KernelArguments::new(), |a, h| a.binding(h));
    let args = params.iter().fold(args, |a, &p| a.param(p));
    c.launch(kernel, CubeCount::Static(groups.0, groups.1, 1), args)
        .unwrap();
    c.sync().unwrap();
    let operation = format!("launch of `{}`", kernel.name());
    probe
        .observations()
        .reports
        .iter()
        .filter_map(|r| match r {
            SanitizerReport::Kernel {
                operation: op,
                finding,
                detail,
                ..
            } if *op == operation => Some((*finding, detail.clone())),
            _ => None,
        })
        .collect()
}

fn create<T: bytemuck::NoUninit>(c: &ComputeClient<SimDevice>, v: &[T]) -> Handle {
    c.create(Bytes::from_elems(v)).unwrap()
}

/// A 40×24·24×36 product: three steps of `DEPTH`, so a step's staging can overwrite the tiles
/// the previous step reads.
const SHAPE: (usize, usize, usize) = (40, 36, 24);

fn run_matmul(seed: u64, kernel: &Kernel) -> (Vec<f32>, Vec<(KernelFinding, String)>) {
    let session = client(seed);
    let (m, n, k) = SHAPE;
    let a = create(&session.0, &uniform(1, m * k, -1.0, 1.0));
    let b = create(&session.0, &uniform(2, k * n, -1.0, 1.0));
    let out = create(&session.0, &vec![0.0f32; m * n]);
    let params = [m, n, k].map(|x| Scalar::U32(x as u32));
    let found = findings(
        &session,
        kernel,
        grid(m as u32, n as u32),
        &[&a, &b, &out],
        &params,
    );
    (session.0.read_one(out).unwrap().to_elems(), found)
}

#[test]
fn a_tiled_product_without_its_closing_barrier_is_a_race_on_every_seed() {
    for seed in 0..3 {
        let (_, found) = run_matmul(seed, &faulty::matmul_missing_barrier());
        let (kind, detail) = &found[0];
        assert_eq!(*kind, KernelFinding::Race, "seed {seed}: {found:?}");
        assert!(detail.starts_with("shared array "), "seed {seed}: {detail}");
        assert!(detail.ends_with("with no barrier between them"), "{detail}");
        let (_, clean) = run_matmul(seed, &matmul::matmul());
        assert_eq!(clean, vec![], "seed {seed}");
    }
}

#[test]
fn the_tiled_product_gives_the_fused_references_bits() {
    let (m, n, k) = SHAPE;
    let want = matmul_fused_host(
        &uniform(1, m * k, -1.0, 1.0),
        &uniform(2, k * n, -1.0, 1.0),
        SHAPE,
    );
    let (got, _) = run_matmul(5, &matmul::matmul());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want));
}

#[test]
fn a_tree_reduction_without_barriers_between_levels_is_a_race_on_every_seed() {
    for seed in 0..3 {
        let session = client(seed);
        let values = uniform(seed, 3 * LANES as usize, -1.0, 1.0);
        let input = create(&session.0, &values);
        let out = create(&session.0, &[0.0f32; 3]);
        let found = findings(
            &session,
            &faulty::racy_reduce(),
            (3, 1),
            &[&input, &out],
            &[],
        );
        let (kind, detail) = &found[0];
        assert_eq!(*kind, KernelFinding::Race, "seed {seed}: {found:?}");
        assert!(
            detail.starts_with("shared array 0 index "),
            "seed {seed}: {detail}"
        );

        // The correct reduction over the same values: clean, and the reference's bits.
        let out = create(&session.0, &[0.0f32; 3]);
        let clean = findings(&session, &reduce_sum(), (3, 1), &[&input, &out], &[]);
        assert_eq!(clean, vec![], "seed {seed}");
        let got: Vec<f32> = session.0.read_one(out).unwrap().to_elems();
        assert_eq!(got, reduce_sum_host(&values, 3), "seed {seed}");
    }
}

#[test]
fn a_barrier_behind_a_racing_flag_is_reported() {
    let mut divergent = 0;
    for seed in 0..8 {
        let session = client(seed);
        let flag = create(&session.0, &[0u32]);
        let out = create(&session.0, &[0u32; LANES as usize]);
        let found = findings(
            &session,
            &faulty::divergent_barrier(),
            (1, 1),
            &[&flag, &out],
            &[],
        );
        // The flag's store and the other invocations' loads race on every seed; whether they
        // also diverge at the barrier depends on the seed's interleaving.
        assert!(
            found
                .iter()
                .any(|(kind, detail)| *kind == KernelFinding::Race
                    && detail.starts_with("binding 0 index 0")),
            "seed {seed}: {found:?}"
        );
        divergent += found
            .iter()
            .any(|(kind, _)| *kind == KernelFinding::DivergentBarrier) as u32;
    }
    // Seeds 0 to 7 interleave the workgroup so that five of them diverge.
    assert_eq!(divergent, 5);
}
