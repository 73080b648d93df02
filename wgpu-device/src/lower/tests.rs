//! Snapshots of the WGSL emitted for representative kernels, in both modes. A change to the
//! lowering shows up here as a readable diff; naga (wgpu's own front end and validator) accepts
//! every snapshot and the explorer's sample kernels here, without an adapter; that the text
//! computes the reference semantics is checked on an adapter by `tests/device.rs`.

use std::io::Write as _;
use std::path::Path;

use lockstep::kernel::{Access, AtomicOp, Axis, ElemType, KernelBuilder, KernelDef, Value};
use lockstep_kernels::formula::{SAMPLE_KERNELS, sample_kernels};
use naga::valid::{Capabilities, ValidationFlags, Validator};

use super::{InfoLayout, aliases_of, lower};

fn add_const() -> KernelDef {
    let mut k = KernelBuilder::new("add_const", [8, 1, 1]);
    let dst = k.binding(ElemType::U32, Access::ReadWrite);
    let c = k.param(ElemType::U32);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(dst.len()), |k| {
        k.store(dst, i, dst.load(i) + c);
    });
    k.build().unwrap().def().clone()
}

fn atomic_sum() -> KernelDef {
    let mut k = KernelBuilder::new("atomic_sum", [8, 1, 1]);
    let dst = k.binding(ElemType::I32, Access::ReadWrite);
    let src = k.binding(ElemType::I32, Access::Read);
    let i = k.global_id(Axis::X);
    k.if_(i.lt(src.len()), |k| {
        k.atomic_add(dst, 0u32, src.load(i));
    });
    // A plain store and load of the atomic binding must go through atomicStore/atomicLoad.
    k.if_(i.equals(0u32), |k| {
        k.store(dst, 1u32, dst.load(1u32) + 1i32);
    });
    k.build().unwrap().def().clone()
}

/// Every operation, the literals WGSL cannot spell, folding, loops and short-circuits.
fn kitchen_sink() -> KernelDef {
    let mut k = KernelBuilder::new("kitchen_sink", [4, 2, 1]);
    let ints = k.binding(ElemType::I32, Access::ReadWrite);
    let floats = k.binding(ElemType::F32, Access::Read);
    let out = k.binding(ElemType::U32, Access::ReadWrite);
    let shift = k.param(ElemType::U32);
    let scale = k.param(ElemType::F32);
    let x = k.global_id(Axis::X);
    let y = k.local_id(Axis::Y);
    let acc = k.var(ElemType::I32, 0i32);
    k.for_range(ElemType::U32, 0u32, ints.len(), |k, j| {
        let v = ints.load(j);
        let q = v / (j.cast(ElemType::I32) - 1i32);
        let r = v % Value::from(-1i32);
        k.assign(acc, acc.get() + q + r + (acc.get() >> 33i32));
    });
    let f = k.var(ElemType::F32, floats.load(x) * scale);
    k.assign(
        f,
        f.get().min(f32::NAN).max(-0.0f32) + f32::INFINITY * 0.0f32,
    );
    let guarded = x
        .lt(floats.len())
        .and(floats.load(x).not_equals(1.5f32))
        .or(y.ge(k.num_workgroups(Axis::Z)));
    let folded = (Value::from(i32::MAX) + 1i32).cast(ElemType::U32) / 0u32;
    k.if_else(
        guarded,
        |k| {
            k.store(out, x, (f.get().cast(ElemType::U32) << shift) ^ folded);
        },
        |k| {
            let sel = x.equals(0u32).select(f.get(), -f.get());
            k.store(out, x, sel.cast(ElemType::I32).cast(ElemType::U32));
            k.store(ints, k.workgroup_id(Axis::X), acc.get() * i32::MIN);
        },
    );
    k.build().unwrap().def().clone()
}

fn overrun() -> KernelDef {
    let mut k = KernelBuilder::new("overrun", [1, 1, 1]);
    let data = k.binding(ElemType::U32, Access::ReadWrite);
    let past_end = k.param(ElemType::U32);
    k.store(data, data.len() + past_end, 1u32);
    k.build().unwrap().def().clone()
}

#[test]
fn add_const_checked() {
    insta::assert_snapshot!(lower(&add_const(), true, &[]).wgsl);
}

#[test]
fn add_const_unchecked() {
    insta::assert_snapshot!(lower(&add_const(), false, &[]).wgsl);
}

#[test]
fn atomic_sum_checked() {
    insta::assert_snapshot!(lower(&atomic_sum(), true, &[]).wgsl);
}

#[test]
fn atomic_sum_unchecked() {
    insta::assert_snapshot!(lower(&atomic_sum(), false, &[]).wgsl);
}

#[test]
fn kitchen_sink_checked() {
    insta::assert_snapshot!(lower(&kitchen_sink(), true, &[]).wgsl);
}

#[test]
fn kitchen_sink_unchecked() {
    insta::assert_snapshot!(lower(&kitchen_sink(), false, &[]).wgsl);
}

/// The conformance suite's kernels with shared arrays, barriers, atomics, `while` loops and
/// math (what runs on the adapter), one snapshot (one WGSL module) per kernel and mode.
#[test]
fn workgroup_kernels() {
    use lockstep_kernels::workgroup as wk;
    for kernel in wk::all() {
        for (checked, mode) in [(true, "checked"), (false, "unchecked")] {
            let name = format!("workgroup_{}_{mode}", kernel.name());
            insta::assert_snapshot!(name, lower(kernel.def(), checked, &[]).wgsl);
        }
    }
}

/// The kernels that do real work and the sanitizer's faulty ones (`lockstep_kernels::ops`),
/// checked, one snapshot per kernel; the naga test below validates them unchecked too.
#[test]
fn ops_kernels() {
    for kernel in ops_and_faulty() {
        let name = format!("ops_{}_checked", kernel.name());
        insta::assert_snapshot!(name, lower(kernel.def(), true, &[]).wgsl);
    }
}

/// The `f16` conformance kernel (`lockstep_kernels::half`), both modes: WGSL's own
/// `f16` arithmetic, conversions through `f32`, NaN-aware `min`/`max` and comparisons.
#[test]
fn f16_arithmetic_kernel() {
    let kernel = lockstep_kernels::half::half_arithmetic(ElemType::F16);
    for (checked, mode) in [(true, "checked"), (false, "unchecked")] {
        let name = format!("f16_arithmetic_{mode}");
        insta::assert_snapshot!(name, lower(kernel.def(), checked, &[]).wgsl);
    }
}

/// An `f16` binding in the same buffer as 32-bit ones (and the fault record) is declared as a
/// variable of its own over that buffer, read-write like the buffer's other variable.
#[test]
fn f16_bindings_sharing_a_buffer_get_a_variable_of_their_own() {
    let mut k = KernelBuilder::new("shared_page", [4, 1, 1]);
    let halves = k.binding(ElemType::F16, Access::Read);
    let words = k.binding(ElemType::U32, Access::ReadWrite);
    let i = k.global_id(Axis::X);
    k.if_(halves.load(i).gt(lockstep::half::f16::ONE), |k| {
        k.store(words, i, 1u32);
    });
    let def = k.build().expect("valid").def().clone();
    let lowered = lower(&def, true, &[0, 0, 0]);
    assert_eq!(lowered.plan.sources, [0, 1]);
    assert_eq!(lowered.plan.read_only, [false, false]);
    insta::assert_snapshot!(lowered.wgsl);
    validate("shared_page", &lowered.wgsl);
}

fn ops_and_faulty() -> Vec<lockstep::Kernel> {
    use lockstep_kernels::ops;
    let mut kernels = ops::all();
    kernels.extend(ops::faulty::all());
    kernels
}

/// Math on literals is folded with the reference semantics, so WGSL's constant evaluation
/// never sees `log` of a negative number (an error there) or an infinity.
#[test]
fn math_on_literals_folds_to_the_reference_bits() {
    let mut k = KernelBuilder::new("folded", [1, 1, 1]);
    let out = k.binding(ElemType::F32, Access::ReadWrite);
    let lit = Value::from;
    k.store(out, 0u32, lit(-1.0f32).log());
    k.store(out, 1u32, lit(0.0f32).log().abs());
    k.store(
        out,
        2u32,
        lit(2.0f32).pow(10.0f32).fma(0.5f32, lit(1.0f32).exp()),
    );
    let wgsl = lower(k.build().unwrap().def(), false, &[]).wgsl;
    let stores: Vec<&str> = wgsl
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("store_b0("))
        .collect();
    let e = std::f32::consts::E;
    assert_eq!(
        stores,
        vec![
            // libm's NaN for log(-1) has its sign bit set.
            "store_b0(0u, bitcast<f32>(0xffc00000u | opaque_zero));".to_owned(),
            "store_b0(1u, bitcast<f32>(0x7f800000u | opaque_zero));".to_owned(),
            format!("store_b0(2u, {:?}f);", 512.0f32 + e),
        ]
    );
}

/// An `i32` binding that takes `atomicMin` shares its buffer with the fault record: the group
/// is declared `i32`, so `min` keeps its signed order, and the fault record bit-casts.
#[test]
fn a_signed_atomic_min_sets_the_type_of_its_group() {
    let mut k = KernelBuilder::new("signed_group", [1, 1, 1]);
    let ints = k.binding(ElemType::I32, Access::ReadWrite);
    k.atomic(AtomicOp::Min, ints, 0u32, -1i32);
    let def = k.build().unwrap().def().clone();
    let lowered = lower(&def, true, &aliases_of(&[7, 7]));
    assert_eq!(lowered.plan.sources, vec![0]);
    insta::assert_snapshot!(lowered.wgsl);
}

#[test]
fn overrun_checked() {
    insta::assert_snapshot!(lower(&overrun(), true, &[]).wgsl);
}

/// Bindings 0 and 2 share a buffer (pool slices of one page), and so do 1 and the fault
/// record: each group is declared once, as words, and members bit-cast.
#[test]
fn aliased_bindings_share_one_declaration() {
    let mut k = KernelBuilder::new("aliased", [1, 1, 1]);
    let ints = k.binding(ElemType::I32, Access::ReadWrite);
    let floats = k.binding(ElemType::F32, Access::Read);
    let words = k.binding(ElemType::U32, Access::Read);
    k.atomic_add(ints, 0u32, floats.load(0u32).cast(ElemType::I32));
    k.store(ints, 1u32, words.load(0u32).cast(ElemType::I32));
    let def = k.build().unwrap().def().clone();
    let aliases = aliases_of(&[7, 8, 7, 8]);
    assert_eq!(aliases, vec![0, 1, 0, 1]);
    let lowered = lower(&def, true, &aliases);
    assert_eq!(lowered.plan.read_only, vec![false, false]);
    assert_eq!(lowered.plan.sources, vec![0, 1]);
    insta::assert_snapshot!(lowered.wgsl);
}

#[test]
fn the_binding_plan_lists_the_fault_record_last_in_checked_mode() {
    let checked = lower(&atomic_sum(), true, &[]).plan;
    assert_eq!(checked.read_only, vec![false, true, false]);
    assert_eq!(checked.sources, vec![0, 1, 2]);
    assert_eq!(
        checked.info,
        InfoLayout {
            bindings: 3,
            params: 0
        }
    );
    let unchecked = lower(&atomic_sum(), false, &[]).plan;
    assert_eq!(unchecked.read_only, vec![false, true]);
    assert_eq!(unchecked.info.words(), 5);
}

#[test]
fn info_words_follow_the_documented_layout() {
    let info = InfoLayout {
        bindings: 2,
        params: 3,
    };
    assert_eq!(InfoLayout::offset_word(1), 3);
    assert_eq!(InfoLayout::len_word(1), 4);
    assert_eq!(info.param_word(0), 5);
    assert_eq!(info.words(), 8);
}

/// Parses and validates `wgsl` as wgpu does before compiling it for an adapter, asking for no
/// optional capability but `f16` for a module that enables it (what wgpu asks of a device
/// opened with `SHADER_F16`).
fn validate(name: &str, wgsl: &str) {
    let module = naga::front::wgsl::parse_str(wgsl)
        .unwrap_or_else(|e| panic!("{name} does not parse:\n{}", e.emit_to_string(wgsl)));
    let capabilities = if wgsl.contains("enable f16;") {
        Capabilities::SHADER_FLOAT16
    } else {
        Capabilities::empty()
    };
    Validator::new(ValidationFlags::all(), capabilities)
        .validate(&module)
        .unwrap_or_else(|e| panic!("{name} does not validate:\n{}", e.emit_to_string(wgsl)));
}

/// Every WGSL snapshot in `lower/snapshots/` (the text after insta's header), by file name.
fn wgsl_snapshots() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lower/snapshots");
    let mut snapshots: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "snap"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable snapshot");
            let wgsl = text.splitn(3, "---\n").nth(2).expect("insta's header");
            let name = path.file_name().expect("a file").to_string_lossy();
            (name.into_owned(), wgsl.to_owned())
        })
        .collect();
    snapshots.sort();
    snapshots
}

/// What wgpu would refuse at pipeline creation, found without an adapter: naga validates every
/// snapshot and the explorer's sample kernels, checked and unchecked. Prints the count past the
/// harness's capture, so CI's log shows what was validated.
#[test]
fn naga_validates_every_snapshot_and_explorer_kernel() {
    let snapshots = wgsl_snapshots();
    assert!(snapshots.len() >= 8, "{snapshots:?}");
    for (name, wgsl) in &snapshots {
        validate(name, wgsl);
    }
    let mut explorer = 0;
    for kernel in sample_kernels() {
        for checked in [true, false] {
            let name = format!("{} (checked: {checked})", kernel.def().name);
            validate(&name, &lower(kernel.def(), checked, &[]).wgsl);
            explorer += 1;
        }
    }
    assert_eq!(explorer, 2 * SAMPLE_KERNELS);
    let kernels = ops_and_faulty();
    for kernel in &kernels {
        let name = format!("{} (unchecked)", kernel.def().name);
        validate(&name, &lower(kernel.def(), false, &[]).wgsl);
    }
    let line = format!(
        "naga: validated {} WGSL kernels ({} snapshot, {explorer} explorer, {} ops unchecked; \
         checked and unchecked)\n",
        snapshots.len() + explorer + kernels.len(),
        snapshots.len(),
        kernels.len()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// The validation above is wgpu's, not only parsing: a store to a read-only binding parses and
/// is refused.
#[test]
#[should_panic(expected = "store_to_read_only does not validate")]
fn naga_refuses_what_wgpu_would_refuse() {
    validate(
        "store_to_read_only",
        "@group(0) @binding(0) var<storage, read> b: array<u32>;\n\
         @compute @workgroup_size(1) fn main() { b[0] = 1u; }",
    );
}
