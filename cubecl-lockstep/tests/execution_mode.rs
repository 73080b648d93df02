//! cubecl's execution mode reaches Lockstep: `launch` runs a checked kernel (an access out of
//! range is skipped and reported as a kernel fault), `launch_unchecked` an unguarded one (the
//! simulator traps the access instead of running it, where a GPU would be undefined).

use cubecl_core as cubecl;
use cubecl_core::prelude::*;
use cubecl_runtime::runtime::Runtime;
use lockstep_cubecl::LockstepRuntime;

/// `out[i] = input[i] + 1` with no guard: more units than elements go out of range.
#[cube(launch, launch_unchecked)]
fn add_one_unguarded(input: &[u32], out: &mut [u32]) {
    out[ABSOLUTE_POS] = input[ABSOLUTE_POS] + 1u32;
}

/// Runs `add_one_unguarded` over `ELEMS` elements with `units` units, checked or not, and reads
/// the output.
#[allow(
    unsafe_code,
    reason = "launch_unchecked out of range on purpose: the simulator traps it"
)]
fn run(units: u32, checked: bool) -> Result<Vec<u32>, String> {
    const ELEMS: usize = 4;
    let client = <LockstepRuntime>::client(&Default::default());
    let input = client.create_from_slice(u32::as_bytes(&[10, 20, 30, 40]));
    let out = client.create_from_slice(u32::as_bytes(&[0; ELEMS]));
    // SAFETY (cubecl's contract): each buffer holds ELEMS u32s.
    let (input_arg, out_arg) = unsafe {
        (
            BufferArg::from_raw_parts(input, ELEMS),
            BufferArg::from_raw_parts(out.clone(), ELEMS),
        )
    };
    let (count, dim) = (CubeCount::Static(1, 1, 1), CubeDim::new_1d(units));
    if checked {
        add_one_unguarded::launch(&client, count, dim, input_arg, out_arg);
    } else {
        // SAFETY: kept when `units` ≤ ELEMS; broken on purpose otherwise, where the simulator
        // traps the first access out of range.
        unsafe { add_one_unguarded::launch_unchecked(&client, count, dim, input_arg, out_arg) };
    }
    let bytes = client.read_one(out).map_err(|error| error.to_string())?;
    Ok(u32::from_bytes(&bytes).to_vec())
}

#[test]
fn in_range_both_modes_compute_the_same() {
    assert_eq!(run(4, true), Ok(vec![11, 21, 31, 41]));
    assert_eq!(run(4, false), Ok(vec![11, 21, 31, 41]));
}

#[test]
fn out_of_range_launch_reports_a_kernel_fault_and_launch_unchecked_a_trap() {
    let checked = run(8, true).unwrap_err();
    let unchecked = run(8, false).unwrap_err();
    assert!(
        checked.contains("out of range at index 4") && checked.contains("(checked mode)"),
        "{checked}"
    );
    assert!(
        unchecked.contains("illegal address: binding 1 index 4 (unchecked mode)"),
        "{unchecked}"
    );
}
