//! Dynamic workgroup counts (`CubeCount::Dynamic`): a launch runs exactly the workgroups its
//! count buffer holds when it executes, and none when a count is zero or above the device's
//! `max_workgroups` in any dimension (as WebGPU has it for an indirect dispatch); either way
//! the stream goes on, with no failure to report.

use lockstep::kernel::{Access, ElemType, KernelBuilder};
use lockstep::{Bytes, CubeCount, Kernel, KernelArguments};
use proptest::collection::vec;
use proptest::prelude::*;

use super::{Failure, RunConfig, err, expect_clean, run_cases};
use crate::factory::DeviceFactory;

/// Invocations per workgroup of the counting kernel.
const WORKGROUP: u32 = 2;

/// One dimension of a drawn count, resolved against the device's maximum.
#[derive(Clone, Copy, Debug)]
enum Dim {
    /// A count the device runs.
    Small(u32),
    /// No workgroups.
    Zero,
    /// One above the device's maximum for the dimension.
    AboveMax,
    /// `u32::MAX`.
    Largest,
}

impl Dim {
    /// The count, or `None` when the device's maximum is `u32::MAX` (nothing lies above it).
    fn resolve(self, max: u32) -> Option<u32> {
        match self {
            Dim::Small(n) => Some(n),
            Dim::Zero => Some(0),
            Dim::AboveMax => max.checked_add(1),
            Dim::Largest => Some(u32::MAX),
        }
    }
}

fn dim() -> impl Strategy<Value = Dim> {
    prop_oneof![
        6 => (1u32..=3).prop_map(Dim::Small),
        1 => Just(Dim::Zero),
        2 => Just(Dim::AboveMax),
        1 => Just(Dim::Largest),
    ]
}

/// Each invocation adds one to `counter[0]`.
fn counting_kernel() -> Kernel {
    let mut k = KernelBuilder::new("count_invocations", [WORKGROUP, 1, 1]);
    let counter = k.binding(ElemType::U32, Access::ReadWrite);
    k.atomic_add(counter, 0u32, 1u32);
    k.build().expect("the counting kernel is valid")
}

pub(super) fn dynamic_counts<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    let strategy = (vec([dim(), dim(), dim()], 1..=4), any::<u64>());
    run_cases(config, "dynamic_counts", strategy, |(launches, seed)| {
        let session = factory.open(seed);
        let c = &session.client;
        let max = c.properties().max_workgroups;
        let kernel = counting_kernel();
        let counter = c
            .create(Bytes::from_elems(&[0u32]))
            .map_err(err("create"))?;
        let mut expected = 0u64;
        for dims in launches {
            let Some(counts) = [0, 1, 2]
                .into_iter()
                .map(|d| dims[d].resolve(max[d]))
                .collect::<Option<Vec<u32>>>()
            else {
                continue;
            };
            let runs = counts.iter().zip(max).all(|(&n, m)| n <= m);
            if runs {
                expected += counts.iter().map(|&n| u64::from(n)).product::<u64>();
            }
            let count = c
                .create(Bytes::from_elems(&counts))
                .map_err(err("create"))?;
            let args = KernelArguments::new().binding(&counter);
            c.launch(&kernel, CubeCount::Dynamic(count), args)
                .map_err(|e| format!("launch with counts {counts:?}: {e}"))?;
        }
        let got = c.read_one(counter).map_err(err("read"))?.to_elems::<u32>()[0];
        let want = expected * u64::from(WORKGROUP);
        if u64::from(got) != want {
            return Err(format!(
                "{got} invocations ran, {want} expected (device maximum {max:?})"
            ));
        }
        c.sync().map_err(err("sync"))?;
        expect_clean(&session)
    })
}
