//! Snapshots of the CUDA C emitted for representative kernels, checked and unchecked. A change
//! to a snapshot is a change to what runs on the GPU: review it against `semantics.rs`.

use std::io::Write as _;

use lockstep::kernel::{Access, Axis, BitFn, ElemType, KernelBuilder, KernelDef};
use lockstep_kernels::elementwise::{KernelKind, overrun};
use lockstep_kernels::formula::{SAMPLE_KERNELS, sample_kernels};

use super::*;
use crate::compile::compile;
use crate::compile::tests::nvrtc_present;

fn saxpy() -> KernelDef {
    let mut k = KernelBuilder::new("saxpy", [64, 1, 1]);
    let x = k.binding(ElemType::F32, Access::Read);
    let y = k.binding(ElemType::F32, Access::ReadWrite);
    let a = k.param(ElemType::F32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(y.len()), |k| {
        k.store(y, i, a * x.load(i) + y.load(i));
    });
    k.build().expect("saxpy is valid").def().clone()
}

/// Every integer operation whose C form differs from Rust's: division, remainder, shifts,
/// min/max, negation and the casts, on both integer types.
fn integer_semantics() -> KernelDef {
    let mut k = KernelBuilder::new("integer_semantics", [1, 1, 1]);
    let ints = k.binding(ElemType::I32, Access::ReadWrite);
    let uints = k.binding(ElemType::U32, Access::ReadWrite);
    let floats = k.binding(ElemType::F32, Access::Read);
    let a = ints.load(0u32);
    let b = ints.load(1u32);
    k.store(ints, 2u32, a / b);
    k.store(ints, 3u32, a % b);
    k.store(ints, 4u32, a << b);
    k.store(ints, 5u32, a >> b);
    k.store(ints, 6u32, (a + i32::MIN).min(-a * b));
    k.store(ints, 7u32, floats.load(0u32).cast(ElemType::I32));
    let x = uints.load(0u32);
    let y = uints.load(1u32);
    k.store(uints, 2u32, x / y);
    k.store(uints, 3u32, (x % y).max(x >> y));
    k.store(uints, 4u32, floats.load(1u32).cast(ElemType::U32));
    k.store(uints, 5u32, (x ^ y).cast(ElemType::I32).cast(ElemType::U32));
    k.store(uints, 6u32, floats.load(2u32).bitcast(ElemType::U32));
    k.store(ints, 8u32, x.bitcast(ElemType::I32));
    k.store(ints, 9u32, a.bits(BitFn::FirstLeadingBit));
    k.store(uints, 7u32, y.bits(BitFn::CountTrailingZeros));
    k.build().expect("integer_semantics is valid").def().clone()
}

/// Float operations, literals that need their exact bits (NaN, infinity, negative zero) and a
/// select, whose both sides are evaluated.
fn float_semantics() -> KernelDef {
    let mut k = KernelBuilder::new("float_semantics", [32, 1, 1]);
    let data = k.binding(ElemType::F32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let v = data.load(i);
    let picked = v.gt(0.0f32).select(v % 3.0f32, -v / f32::INFINITY);
    k.store(
        data,
        i,
        picked.min(f32::NAN).max(-0.0f32) + i.cast(ElemType::F32),
    );
    k.build().expect("float_semantics is valid").def().clone()
}

/// A load on the right of `&&` and `||`: in checked mode it may only run when the left side
/// lets it, so it is hoisted into an `if`.
fn short_circuit() -> KernelDef {
    let mut k = KernelBuilder::new("short_circuit", [8, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    let inside = i.lt(data.len());
    k.if_else(
        inside.and(data.load(i).gt(5u32)),
        |k| k.store(data, i, 0u32),
        |k| k.if_((!inside).or(data.load(i).equals(1u32)), |_| {}),
    );
    k.build().expect("short_circuit is valid").def().clone()
}

/// Locals, a loop whose variable the body reassigns, and every builtin.
fn loop_and_builtins() -> KernelDef {
    let mut k = KernelBuilder::new("loop_and_builtins", [4, 2, 1]);
    let out = k.binding(ElemType::I32, Access::ReadWrite);
    let n = k.param(ElemType::I32);
    let acc = k.var(ElemType::I32, 0i32);
    k.for_range(ElemType::I32, -2i32, n, |k, j| {
        k.assign(acc, acc.get() + j);
        k.if_(j.equals(3i32), |k| k.assign(acc, acc.get() - 1i32));
    });
    let id = k.workgroup_id(Axis::Y) * k.num_workgroups(Axis::Z)
        + k.local_id(Axis::Y)
        + k.global_id(Axis::Y);
    k.atomic_add(out, id, acc.get());
    k.build().expect("loop_and_builtins is valid").def().clone()
}

fn both_modes(def: &KernelDef) -> String {
    format!(
        "==== checked ====\n{}\n==== unchecked ====\n{}",
        kernel_source(def, true),
        kernel_source(def, false)
    )
}

#[test]
fn prelude() {
    insta::assert_snapshot!(PRELUDE);
}

#[test]
fn half_prelude() {
    insta::assert_snapshot!(HALF_PRELUDE);
}

/// The half floats' conformance kernel (`lockstep_kernels::half`): every
/// operation converts to `f32`, computes, and rounds back with `cvt.rn`.
#[test]
fn half_arithmetic_kernels() {
    use lockstep_kernels::half::half_arithmetic;
    for elem in [ElemType::F16, ElemType::BF16] {
        let name = format!("{elem}_arithmetic_kernel");
        insta::assert_snapshot!(name, both_modes(half_arithmetic(elem).def()));
    }
}

#[test]
fn only_kernels_with_half_floats_carry_the_half_prelude() {
    use lockstep_kernels::half::half_arithmetic;
    assert!(program(half_arithmetic(ElemType::F16).def(), true).contains(HALF_PRELUDE));
    assert!(!program(&saxpy(), true).contains("struct f16"));
}

#[test]
fn saxpy_kernel() {
    insta::assert_snapshot!(both_modes(&saxpy()));
}

#[test]
fn integer_semantics_kernel() {
    insta::assert_snapshot!(both_modes(&integer_semantics()));
}

#[test]
fn float_semantics_kernel() {
    insta::assert_snapshot!(both_modes(&float_semantics()));
}

#[test]
fn short_circuit_kernel() {
    insta::assert_snapshot!(both_modes(&short_circuit()));
}

#[test]
fn loop_and_builtins_kernel() {
    insta::assert_snapshot!(both_modes(&loop_and_builtins()));
}

#[test]
fn conformance_kernels() {
    let mut all = String::new();
    for kind in KernelKind::ALL {
        all.push_str(&kernel_source(kind.kernel().def(), true));
        all.push('\n');
    }
    all.push_str(&both_modes(overrun().def()));
    insta::assert_snapshot!(all);
}

/// Every kernel a snapshot above shows.
fn snapshot_kernels() -> Vec<KernelDef> {
    let mut defs = vec![
        saxpy(),
        integer_semantics(),
        float_semantics(),
        short_circuit(),
        loop_and_builtins(),
    ];
    defs.extend(KernelKind::ALL.map(|kind| kind.kernel().def().clone()));
    defs.push(overrun().def().clone());
    defs.extend(
        lockstep_kernels::workgroup::all()
            .iter()
            .map(|kernel| kernel.def().clone()),
    );
    defs.extend(ops_and_faulty().iter().map(|kernel| kernel.def().clone()));
    defs.extend(
        [ElemType::F16, ElemType::BF16]
            .map(|elem| lockstep_kernels::half::half_arithmetic(elem).def().clone()),
    );
    defs
}

/// The kernels that do real work and the sanitizer's faulty ones (`lockstep_kernels::ops`).
fn ops_and_faulty() -> Vec<lockstep::Kernel> {
    use lockstep_kernels::ops;
    let mut kernels = ops::all();
    kernels.extend(ops::faulty::all());
    kernels
}

/// One snapshot per kernel of [`ops_and_faulty`], both modes.
#[test]
fn ops_kernels() {
    for kernel in ops_and_faulty() {
        let name = format!("ops_{}", kernel.name());
        insta::assert_snapshot!(name, both_modes(kernel.def()));
    }
}

/// Compiles each of `defs`, checked and unchecked, for `arch`; returns how many programs
/// compiled. Spread over the machine's cores: NVRTC programs are independent.
fn compile_all(defs: &[KernelDef], arch: &str) -> usize {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = defs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = defs
            .chunks(chunk)
            .map(|defs| {
                scope.spawn(move || {
                    for def in defs {
                        for checked in [true, false] {
                            if let Err(err) = compile(def, checked, arch) {
                                panic!("{} (checked: {checked}): {err}", def.name);
                            }
                        }
                    }
                    2 * defs.len()
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a compile worker panicked"))
            .sum()
    })
}

/// The lowering as the GPU host would compile it, without a GPU: every snapshot kernel and the
/// explorer's sample kernels, checked and unchecked, through NVRTC for the H200's `sm_90`.
/// Prints the count past the harness's capture, so CI's log shows what was compiled.
#[test]
fn every_snapshot_and_explorer_kernel_compiles_for_sm_90() {
    if !nvrtc_present("every_snapshot_and_explorer_kernel_compiles_for_sm_90") {
        return;
    }
    let snapshot = compile_all(&snapshot_kernels(), "sm_90");
    let explorer: Vec<KernelDef> = sample_kernels()
        .iter()
        .map(|kernel| kernel.def().clone())
        .collect();
    let explorer = compile_all(&explorer, "sm_90");
    assert_eq!(explorer, 2 * SAMPLE_KERNELS);
    let line = format!(
        "nvrtc: compiled {} kernels for sm_90 ({snapshot} snapshot, {explorer} explorer; \
         checked and unchecked)\n",
        snapshot + explorer
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The conformance suite's kernels with shared arrays, barriers, atomics, `while` loops and
/// math, one snapshot per kernel.
#[test]
fn workgroup_kernels() {
    use lockstep_kernels::workgroup as wk;
    for kernel in wk::all() {
        let name = format!("workgroup_{}", kernel.name());
        insta::assert_snapshot!(name, both_modes(kernel.def()));
    }
}

#[test]
fn a_kernel_without_bindings_or_parameters_still_has_an_entry() {
    let k = KernelBuilder::new("empty", [1, 1, 1]);
    let source = program(k.build().expect("valid").def(), false);
    assert!(source.starts_with(PRELUDE));
    assert!(source.contains("lockstep_kernel(\n    const u32* ls_count)"));
    assert!(source.contains("ls_body(blockIdx.x,"));
}

#[test]
fn literals_keep_their_exact_bits() {
    assert_eq!(literal(Scalar::I32(i32::MIN)), "LS_I32_MIN");
    assert_eq!(literal(Scalar::I32(-7)), "(-7)");
    assert_eq!(literal(Scalar::U32(u32::MAX)), "4294967295u");
    assert_eq!(
        literal(Scalar::F32(-0.0)),
        "__uint_as_float(0x80000000u) /* -0.0 */"
    );
    assert_eq!(
        literal(Scalar::F32(f32::NAN)),
        "__uint_as_float(0x7fc00000u) /* NaN */"
    );
}

#[test]
fn unparen_strips_only_an_enclosing_pair() {
    assert_eq!(unparen("(a + b)"), "a + b");
    assert_eq!(unparen("(a) + (b)"), "(a) + (b)");
    assert_eq!(unparen("f(a)"), "f(a)");
    assert_eq!(unparen("((a))"), "(a)");
}

#[test]
fn unchecked_kernels_have_no_guards() {
    for kind in KernelKind::ALL {
        let source = kernel_source(kind.kernel().def(), false);
        assert!(!source.contains("ls_fault"), "{source}");
        assert!(!source.contains("ls_load"), "{source}");
    }
}
