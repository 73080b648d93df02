//! The explorer's reference model checked against an independent computation: its random
//! formula kernels ([`Formula`]), run by the device (lowered to WGSL for wgpu, CUDA C for
//! NVRTC, or interpreted by the simulator), must compute exactly what [`Formula::apply`], the
//! plain-Rust model every explored read is judged by, holds. On a GPU the arithmetic is the
//! driver's compiler's, shared with neither the model nor the simulator, so a model that agrees
//! with the simulator only by sharing a mistake fails here.

use lockstep::kernel::MAX_WORKGROUP_INVOCATIONS;
use lockstep::{Bytes, CubeCount, KernelArguments};
use lockstep_kernels::elementwise::WORKGROUP;
use lockstep_kernels::formula::Formula;
use proptest::collection::vec;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{Failure, RunConfig, err, expect_clean, run_cases};
use crate::factory::DeviceFactory;

/// One case: formulas drawn as a world draws them, each launched once over its own data.
#[derive(Debug)]
struct Launch {
    /// Seeds [`Formula::draw`].
    formula_seed: u64,
    /// Forces a neighbour `rotate` lanes round the workgroup (sharing through a workgroup
    /// array and a barrier), which a world draws only one time in sixteen.
    rotate: Option<u32>,
    /// Invocations per workgroup: the usual 8 half the time, else a boundary value of 1 to
    /// 1,024 or any value of it, as a world draws them.
    workgroup: u32,
    dst: Vec<u32>,
    src: Vec<u32>,
    k: u32,
}

fn launch() -> impl Strategy<Value = Launch> {
    (
        any::<u64>(),
        prop::option::of(1..WORKGROUP),
        prop_oneof![
            2 => Just(WORKGROUP),
            1 => prop::sample::select(&[1, 2, 3, 7, 31, 32, 33, 255, 256, 257, 1023, 1024][..]),
            1 => 1..=MAX_WORKGROUP_INVOCATIONS as u32,
        ],
        // Past one model block and two of the largest workgroups, with a partial last one.
        vec(any::<u32>(), 1..=2100),
        vec(any::<u32>(), 1..=64),
        any::<u32>(),
    )
        .prop_map(|(formula_seed, rotate, workgroup, dst, src, k)| Launch {
            formula_seed,
            rotate,
            workgroup,
            dst,
            src,
            k,
        })
}

pub(super) fn explorer_formulas<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (vec(launch(), 1..=4), any::<u64>());
    run_cases(config, "explorer_formulas", strategy, |(launches, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        for Launch {
            formula_seed,
            rotate,
            workgroup,
            dst,
            src,
            k,
        } in launches
        {
            let mut formula = Formula::draw(&mut ChaCha8Rng::seed_from_u64(formula_seed), 0);
            formula.rotate = rotate;
            formula.workgroup = workgroup;
            let on_device = c.create(Bytes::from_elems(&dst)).map_err(err("create"))?;
            let source = c.create(Bytes::from_elems(&src)).map_err(err("create"))?;
            let args = KernelArguments::new()
                .binding(&on_device)
                .binding(&source)
                .param(lockstep::kernel::Scalar::U32(k));
            let count = CubeCount::Static(formula.workgroups(dst.len()), 1, 1);
            c.launch(&formula.kernel(), count, args)
                .map_err(|e| format!("launch of {formula:?}: {e}"))?;
            let got = c
                .read_one(on_device)
                .map_err(err("read"))?
                .to_elems::<u32>();
            let mut want = dst;
            formula.apply(&mut want, &src, k);
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                return Err(format!(
                    "{formula:?} with k = {k} over {} elements (source {}): element {i} is {} on \
                     the device, {} in the model",
                    want.len(),
                    src.len(),
                    got[i],
                    want[i]
                ));
            }
        }
        expect_clean(&session)
    })
}
