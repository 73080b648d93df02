//! Kernels with shared arrays, barriers, atomics, `while` loops and math functions
//! (`lockstep_kernels::workgroup`) compute their host references on every device.

use lockstep::kernel::Scalar;
use lockstep::{ComputeClient, Device, Handle, Kernel};
use proptest::collection::vec;
use proptest::prelude::*;

use super::{Failure, RunConfig, expect_clean, run_cases};
use crate::factory::DeviceFactory;
use lockstep_kernels::ops::check::{self, create};
use lockstep_kernels::workgroup::{self as wk, Claims};

/// One case: the inputs of every kernel.
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    values: Vec<u32>,
    keys: Vec<u32>,
    owners: usize,
    /// Math operands in [0, 1], scaled into each row's domain.
    units: Vec<f32>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        vec(any::<u32>(), 0..300),
        vec(0u32..64, 0..200),
        1usize..8,
        (0usize..80).prop_flat_map(|n| vec(0.0f32..=1.0, n * wk::MATH_INPUT_ROWS)),
    )
        .prop_map(|(seed, values, keys, owners, units)| Case {
            seed,
            values,
            keys,
            owners,
            units,
        })
}

pub(super) fn workgroup_kernels<F: DeviceFactory>(
    factory: &F,
    config: RunConfig,
) -> Result<(), Failure> {
    run_cases(config, "workgroup_kernels", case(), |case| {
        let session = factory.open(case.seed);
        let c = &session.client;
        reduce(c, &case.values)?;
        histogram(c, &case.values)?;
        claims(c, &case.keys, case.owners)?;
        loops(c, &case.values)?;
        math(c, &case.units)?;
        expect_clean(&session)
    })
}

fn read<D: Device, T: bytemuck::AnyBitPattern>(
    c: &ComputeClient<D>,
    h: &Handle,
) -> Result<Vec<T>, String> {
    c.read_one(h.clone())
        .map(|b| b.to_elems())
        .map_err(|e| format!("read: {e}"))
}

/// Launches `kernel` over `workgroups` (at least one) with `bindings` and `params`.
fn launch<D: Device>(
    c: &ComputeClient<D>,
    kernel: &Kernel,
    workgroups: usize,
    bindings: &[&Handle],
    params: &[Scalar],
) -> Result<(), String> {
    check::launch(c, kernel, (workgroups.max(1), 1), bindings, params)
}

fn workgroups(len: usize, size: u32) -> usize {
    len.div_ceil(size as usize)
}

fn reduce<D: Device>(c: &ComputeClient<D>, values: &[u32]) -> Result<(), String> {
    let groups = workgroups(values.len(), wk::REDUCE_WORKGROUP).max(1);
    let input = create(c, values)?;
    let partials = create(c, &vec![0u32; groups])?;
    let total = create(c, &[7u32])?;
    launch(
        c,
        &wk::reduce_sum(),
        groups,
        &[&input, &partials, &total],
        &[],
    )?;
    let (mut want_partials, want_total) = wk::reduce_sum_reference(values, 7);
    want_partials.resize(groups, 0);
    let got = (read::<D, u32>(c, &partials)?, read::<D, u32>(c, &total)?[0]);
    ensure!(
        got == (want_partials.clone(), want_total),
        "reduce_sum of {} values: partials and total {got:?}, reference {:?}",
        values.len(),
        (want_partials, want_total)
    );
    Ok(())
}

fn histogram<D: Device>(c: &ComputeClient<D>, values: &[u32]) -> Result<(), String> {
    let input = create(c, values)?;
    let mut want_bins: Vec<u32> = (0..wk::BINS).collect();
    let mut want_extremes = [i32::MAX, i32::MIN];
    let mut want_bits = [0, u32::MAX, 0x5a5a_5a5a];
    let bins = create(c, &want_bins)?;
    let extremes = create(c, &want_extremes)?;
    let bits = create(c, &want_bits)?;
    let groups = workgroups(values.len(), wk::REDUCE_WORKGROUP);
    launch(
        c,
        &wk::histogram(),
        groups,
        &[&input, &bins, &extremes, &bits],
        &[],
    )?;
    wk::histogram_reference(values, &mut want_bins, &mut want_extremes, &mut want_bits);
    let got = (
        read::<D, u32>(c, &bins)?,
        read::<D, i32>(c, &extremes)?,
        read::<D, u32>(c, &bits)?,
    );
    let want = (want_bins, want_extremes.to_vec(), want_bits.to_vec());
    ensure!(
        got == want,
        "histogram of {} values: {got:?}, reference {want:?}",
        values.len()
    );
    Ok(())
}

fn claims<D: Device>(c: &ComputeClient<D>, keys: &[u32], owners: usize) -> Result<(), String> {
    let n = keys.len();
    let groups = workgroups(n, wk::WORKGROUP).max(1);
    let input = create(c, keys)?;
    let handles = [
        create(c, &vec![0u32; owners])?,
        create(c, &vec![0u32; n])?,
        create(c, &vec![0u32; 1 + groups])?,
        create(c, &vec![0u32; n])?,
    ];
    let [o, s, ch, t] = &handles;
    launch(c, &wk::claims(), groups, &[&input, o, s, ch, t], &[])?;
    let out = Claims {
        owners: read(c, o)?,
        seen: read(c, s)?,
        chain: read(c, ch)?,
        taken: read(c, t)?,
    };
    wk::check_claims(keys, &out).map_err(|e| format!("claims over {keys:?}: {e}; left {out:?}"))
}

fn loops<D: Device>(c: &ComputeClient<D>, values: &[u32]) -> Result<(), String> {
    let input = create(c, values)?;
    let out = create(c, &vec![0u32; 3 * values.len()])?;
    let groups = workgroups(values.len(), wk::WORKGROUP);
    launch(c, &wk::loops(), groups, &[&input, &out], &[])?;
    let (got, want) = (read::<D, u32>(c, &out)?, wk::loops_reference(values));
    ensure!(
        got == want,
        "loops over {values:?}: {got:?}, reference {want:?}"
    );
    Ok(())
}

fn math<D: Device>(c: &ComputeClient<D>, units: &[f32]) -> Result<(), String> {
    let n = units.len() / wk::MATH_INPUT_ROWS;
    let operands: Vec<f32> = units
        .chunks(n.max(1))
        .enumerate()
        .flat_map(|(r, row)| {
            let (lo, hi) = wk::math_domain(r);
            row.iter().map(move |u| lo + (hi - lo) * u)
        })
        .collect();
    let input = create(c, &operands)?;
    let out = create(c, &vec![0f32; n * wk::MATH_OUTPUT_ROWS])?;
    let groups = workgroups(n, wk::WORKGROUP);
    launch(
        c,
        &wk::math(),
        groups,
        &[&input, &out],
        &[Scalar::U32(n as u32)],
    )?;
    let got: Vec<f32> = read(c, &out)?;
    for (call, got) in wk::math_calls(&operands, n).into_iter().zip(got) {
        ensure!(
            call.accepts(got),
            "{call:?} gave {got:e}, exact {:e}, allowed error {:?}",
            call.exact(),
            call.max_error()
        );
    }
    Ok(())
}
