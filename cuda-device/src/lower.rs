//! Lowers kernel IR to CUDA C for NVRTC. Pure text: nothing here touches the driver, so every
//! lowering is unit-tested (insta snapshots) on machines without a GPU.
//!
//! The emitted code matches `lockstep::kernel::semantics` bit for bit:
//! - `i32` arithmetic goes through `u32` (wrapping, no undefined behaviour); division by zero,
//!   and `i32::MIN / -1`, yield the left operand and their remainder 0; shift amounts are taken
//!   modulo 32; `f32` to integer casts saturate and map NaN to 0 (`ls_*` helpers in [`PRELUDE`]).
//! - `f32` literals are emitted as their bit patterns, and NVRTC is told not to contract
//!   multiply-adds (`--fmad=false`, see `compile.rs`), so every float operation rounds once, as
//!   on the host. `Rem` is `fmodf` (Rust's `%`). `Min`/`Max` return the other operand for a
//!   NaN (Rust's `f32::min`/`max`, C's `fminf`) and the left one for equal operands, so
//!   `min(0.0, -0.0)` is `0.0` as the simulator computes it on x86-64 (`fminf` would give
//!   `-0.0`; Rust leaves that case unspecified, WGSL defines it this way).
//! - The transcendental functions are CUDA's accurate ones (`expf`, `logf`, `sqrtf`, `rsqrtf`,
//!   `tanhf`, `sinf`, `cosf`, `powf`; no `--use_fast_math`), whose documented bounds are within
//!   the IR's (WGSL's); `fma` is `fmaf`, rounded once.
//! - Half floats (`f16`, `bf16`) are structs of their 16 bits ([`HALF_PRELUDE`], emitted only for
//!   kernels that use them): NVRTC's wheel ships no `cuda_fp16.h`, and the IR needs only
//!   conversions. Every operation converts its operands to `f32` (exactly), applies the `f32`
//!   operation above and rounds once to the type with PTX's `cvt.rn` (to nearest even), as the
//!   simulator does with `half`; `-x` and `abs` flip or clear the sign bit. `bf16` needs
//!   `cvt.rn.bf16.f32`, sm_80 or later.
//! - Shared arrays are `__shared__` arrays declared in the body, local arrays zero-initialised
//!   C arrays beside the locals; `workgroup_barrier` is `__syncthreads()`, which orders shared
//!   and global memory within the block. `return` ends the workgroup's body, except in a kernel
//!   that also has barriers ([`KernelDef::returns_before_barriers`]): a thread that returned
//!   must count as arrived at the barriers the others reach, but `__syncthreads` must be
//!   reached by every thread of a warp (`bar.sync` is aligned), and a thread that left the body
//!   would start an indirect launch's next workgroup early. Such a kernel is lowered in uniform
//!   control flow (`lower/mirror.rs`): a thread that returned stays, skips every effect and
//!   votes (`__syncthreads_or`) with the others on each decision a barrier depends on. Atomics are
//!   CUDA's (`atomicAdd`, `atomicMin`, `atomicMax`, `atomicExch`, `atomicCAS`), returning the
//!   previous value.
//! - Operands are evaluated left to right, logical operators short-circuit, and both sides of a
//!   select are evaluated. In checked mode a load has an effect (it may note a fault), so each
//!   one is hoisted into a temporary in evaluation order; a load on the right of `&&`/`||`
//!   is hoisted into an `if` that runs only when the interpreter would evaluate it.
//!
//! **Kernel interface.** The entry point is `extern "C" lockstep_kernel` ([`ENTRY`]). Its
//! parameters, in order: for each binding `i` a pointer `b<i>` and its length in elements
//! `n<i>` (`u32`); each scalar parameter `p<j>`; in checked mode the fault record `ls_fault`
//! and the kernel's id `ls_kernel`; last, `ls_count`, null for a static launch, else a pointer
//! to the three `u32` workgroup counts of an indirect launch. An indirect launch runs a fixed
//! grid whose blocks loop over the virtual workgroups, so the counts are read on the device
//! when the launch executes. The loop is uniform across the block (it depends on the block index
//! only), so barriers inside a workgroup's body are reached by every thread; a kernel with
//! shared arrays synchronises between workgroups, so one workgroup's accesses to them never
//! race with the next one's. In checked mode an out-of-range access is noted in the invocation's
//! pending fault (`ls_p`, registers), which the entry point reports into `ls_fault` once, when
//! the invocation's work is done: the accesses themselves carry no branch and no call, so the
//! checks cost a compare and a few selects, and loads unrolled by the compiler stay in flight
//! together.

use std::fmt::Write as _;

use lockstep::kernel::{
    Access, Array, AtomicOp, BinOp, BindingDecl, BitFn, Builtin, CmpOp, ElemType, Expr,
    FaultRecord, KernelDef, LogicOp, Scalar, Stmt, UnaryOp, VarId,
};

/// The name of the kernel's entry point in the compiled module.
pub const ENTRY: &str = "lockstep_kernel";

/// The largest grid CUDA launches, per dimension, on every GPU since compute capability 3.0:
/// the most workgroups a device reports (`DeviceProperties::max_workgroups`). An indirect
/// launch whose counts exceed it in any dimension does nothing, as WebGPU has it.
pub const MAX_GRID: [u32; 3] = [2_147_483_647, 65_535, 65_535];

/// Type aliases and helper functions every lowered kernel uses.
pub const PRELUDE: &str = r#"// Lockstep CUDA prelude: the IR's scalar semantics (lockstep::kernel::semantics).
typedef unsigned int u32;
typedef int i32;
typedef float f32;
#define LS_I32_MIN ((i32)0x80000000u)

// Signed arithmetic wraps: computed on u32, where overflow is defined.
__device__ __forceinline__ i32 ls_add_i32(i32 a, i32 b) { return (i32)((u32)a + (u32)b); }
__device__ __forceinline__ i32 ls_sub_i32(i32 a, i32 b) { return (i32)((u32)a - (u32)b); }
__device__ __forceinline__ i32 ls_mul_i32(i32 a, i32 b) { return (i32)((u32)a * (u32)b); }
__device__ __forceinline__ i32 ls_neg_i32(i32 a) { return (i32)(0u - (u32)a); }
__device__ __forceinline__ i32 ls_abs_i32(i32 a) { return a < 0 ? ls_neg_i32(a) : a; }
// As in WGSL: division by zero, and i32::MIN / -1, yield the left operand; their remainder is 0.
__device__ __forceinline__ u32 ls_div_u32(u32 a, u32 b) { return b == 0u ? a : a / b; }
__device__ __forceinline__ u32 ls_rem_u32(u32 a, u32 b) { return b == 0u ? 0u : a % b; }
__device__ __forceinline__ i32 ls_div_i32(i32 a, i32 b) {
  return (b == 0 || (a == LS_I32_MIN && b == -1)) ? a : a / b;
}
__device__ __forceinline__ i32 ls_rem_i32(i32 a, i32 b) {
  return (b == 0 || (a == LS_I32_MIN && b == -1)) ? 0 : a % b;
}
// WGSL's bit functions, on u32 bits (an i32 operand is converted there and back).
__device__ __forceinline__ u32 ls_count_one_bits(u32 x) { return (u32)__popc(x); }
__device__ __forceinline__ u32 ls_count_leading_zeros(u32 x) { return (u32)__clz(x); }
__device__ __forceinline__ u32 ls_count_trailing_zeros(u32 x) { return x == 0u ? 32u : (u32)(__ffs(x) - 1); }
__device__ __forceinline__ u32 ls_first_trailing_bit(u32 x) { return x == 0u ? 0xffffffffu : (u32)(__ffs(x) - 1); }
__device__ __forceinline__ u32 ls_first_leading_bit_u32(u32 x) { return x == 0u ? 0xffffffffu : 31u - (u32)__clz(x); }
__device__ __forceinline__ u32 ls_first_leading_bit_i32(u32 x) {
  const u32 m = (x & 0x80000000u) != 0u ? ~x : x;
  return m == 0u ? 0xffffffffu : 31u - (u32)__clz(m);
}
__device__ __forceinline__ u32 ls_reverse_bits(u32 x) { return __brev(x); }
__device__ __forceinline__ u32 ls_min_u32(u32 a, u32 b) { return b < a ? b : a; }
__device__ __forceinline__ u32 ls_max_u32(u32 a, u32 b) { return b > a ? b : a; }
__device__ __forceinline__ i32 ls_min_i32(i32 a, i32 b) { return b < a ? b : a; }
__device__ __forceinline__ i32 ls_max_i32(i32 a, i32 b) { return b > a ? b : a; }
// Float min/max: a NaN operand yields the other one (as Rust's f32::min/max and fminf); equal
// operands (+0 and -0) yield the left one, as Rust on x86-64 and WGSL do (fminf picks -0).
__device__ __forceinline__ f32 ls_min_f32(f32 a, f32 b) { return (a != a || b < a) ? b : a; }
__device__ __forceinline__ f32 ls_max_f32(f32 a, f32 b) { return (a != a || b > a) ? b : a; }
// Shift amounts are taken modulo 32; >> on i32 is arithmetic.
__device__ __forceinline__ u32 ls_shl_u32(u32 a, u32 b) { return a << (b & 31u); }
__device__ __forceinline__ u32 ls_shr_u32(u32 a, u32 b) { return a >> (b & 31u); }
__device__ __forceinline__ i32 ls_shl_i32(i32 a, i32 b) { return (i32)((u32)a << ((u32)b & 31u)); }
__device__ __forceinline__ i32 ls_shr_i32(i32 a, i32 b) { return a >> ((u32)b & 31u); }
// Float to integer saturates and maps NaN to 0 (Rust's `as`).
__device__ __forceinline__ u32 ls_f32_to_u32(f32 v) {
  if (!(v > 0.0f)) return 0u;
  if (v >= 4294967296.0f) return 0xffffffffu;
  return (u32)v;
}
__device__ __forceinline__ i32 ls_f32_to_i32(f32 v) {
  if (v != v) return 0;
  if (v <= -2147483648.0f) return LS_I32_MIN;
  if (v >= 2147483648.0f) return 2147483647;
  return (i32)v;
}

// Checked mode: an out-of-range access yields 0 (a load, an atomic) or does nothing (a store,
// an atomic) and is noted in the invocation's pending fault, which keeps the last one; the
// entry point reports it into the fault record (lockstep::kernel::FaultRecord) when the
// invocation ends, and the first invocation to report fills it. Noting is two selects on
// registers: no call, whose clobbers and ordering held the loads of an unrolled loop to one or
// two in flight, and no dependence between one access's check and the next's.
struct ls_pending { u32 word1; u32 index; };  // word1: the array's word + 1; 0: no fault
__device__ __forceinline__ bool ls_in_range(ls_pending& p, u32 n, u32 i, u32 word) {
  const bool ok = i < n;
  p.word1 = ok ? p.word1 : word + 1u;
  p.index = ok ? p.index : i;
  return ok;
}
__device__ __noinline__ void ls_report(u32* record, u32 kernel, const ls_pending& p) {
  if (atomicCAS(record, 0u, 1u) == 0u) {
    record[1] = kernel;
    record[2] = p.word1 - 1u;
    record[3] = p.index;
  }
}
// A load reads element min(i, last), always in range (`last` is n - 1, and a binding of no
// elements points at ls_no_elements), with no predicate on the access itself, so its address
// is computed as an unchecked one's and the compiler schedules it freely; out of range, the
// value read is replaced by 0.
__device__ u32 ls_no_elements[1];
template <typename T>
__device__ __forceinline__ T ls_load(const T* b, u32 n, u32 last, u32 i, ls_pending& p, u32 word) {
  const T v = b[i < last ? i : last];
  return ls_in_range(p, n, i, word) ? v : T{};
}
template <typename T>
__device__ __forceinline__ void ls_store(T* b, u32 n, u32 i, T v, ls_pending& p, u32 word) {
  if (ls_in_range(p, n, i, word)) b[i] = v;
}
// Atomics return the previous value; out of range they return 0.
#define LS_ATOMIC(name, op) \
  template <typename T> \
  __device__ __forceinline__ T name(T* b, u32 n, u32 i, T v, ls_pending& p, u32 word) { \
    if (ls_in_range(p, n, i, word)) return op(&b[i], v); \
    return (T)0; \
  }
LS_ATOMIC(ls_atomic_add, atomicAdd)
LS_ATOMIC(ls_atomic_min, atomicMin)
LS_ATOMIC(ls_atomic_max, atomicMax)
LS_ATOMIC(ls_atomic_exch, atomicExch)
LS_ATOMIC(ls_atomic_and, atomicAnd)
LS_ATOMIC(ls_atomic_or, atomicOr)
LS_ATOMIC(ls_atomic_xor, atomicXor)
template <typename T>
__device__ __forceinline__ T ls_atomic_cas(T* b, u32 n, u32 i, T expected, T v, ls_pending& p, u32 word) {
  if (ls_in_range(p, n, i, word)) return atomicCAS(&b[i], expected, v);
  return (T)0;
}
"#;

/// The half floats, for kernels that use them: their bits in a struct, exact conversions to
/// `f32` and rounding conversions back (PTX `cvt.rn`: to nearest even, as `half` rounds).
pub const HALF_PRELUDE: &str = r#"// Half floats (lockstep::kernel::ElemType::F16, BF16): their bits, converted by PTX, so no
// cuda_fp16.h is needed. Each operation runs on the exact f32 values and rounds once.
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };
__device__ __forceinline__ f32 ls_f32(f16 h) {
  f32 f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
__device__ __forceinline__ f32 ls_f32(bf16 h) { return __uint_as_float((u32)h.bits << 16); }
__device__ __forceinline__ f16 ls_f16(f32 f) {
  f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
__device__ __forceinline__ bf16 ls_bf16(f32 f) {
  bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
// The sign bit only, as the IR's -x and abs(x) on half floats.
template <typename H>
__device__ __forceinline__ H ls_neg_half(H h) { h.bits ^= 0x8000u; return h; }
template <typename H>
__device__ __forceinline__ H ls_abs_half(H h) { h.bits &= 0x7fffu; return h; }
"#;

/// The whole NVRTC program for `def`: [`PRELUDE`], [`HALF_PRELUDE`] when `def` uses a half
/// float, then [`kernel_source`].
pub fn program(def: &KernelDef, checked: bool) -> String {
    let mut source = String::from(PRELUDE);
    source.push('\n');
    if lockstep::kernel::uses_half(def) {
        source.push_str(HALF_PRELUDE);
        source.push('\n');
    }
    source.push_str(&kernel_source(def, checked));
    source
}

/// The kernel-specific part of the program: its body function and its entry point.
pub fn kernel_source(def: &KernelDef, checked: bool) -> String {
    let mut lowering = Lowering {
        def,
        checked,
        mirror: def.returns_before_barriers(),
        loops: Vec::new(),
        out: String::new(),
        indent: 1,
        temps: 0,
    };
    for stmt in &def.body {
        lowering.stmt(stmt);
    }
    let mut src = String::new();
    let [wx, wy, wz] = def.workgroup_size;
    let mode = if checked { "checked" } else { "unchecked" };
    let _ = writeln!(
        src,
        "// Lockstep kernel {:?}, {mode}, workgroup [{wx}, {wy}, {wz}].",
        def.name
    );
    body_function(&mut src, def, checked, &lowering.out);
    entry_point(&mut src, def, checked);
    src
}

/// The kernel's parameters as `(declaration, name)`, in the order the device passes them: per
/// binding its pointer and its length in elements, the scalar parameters, then in checked mode
/// the fault record and the kernel id.
fn kernel_params(def: &KernelDef, checked: bool) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = Vec::new();
    for (i, decl) in def.bindings.iter().enumerate() {
        params.push((
            format!("{}* __restrict__ b{i}", element_type(decl)),
            format!("b{i}"),
        ));
        params.push((format!("const u32 n{i}"), format!("n{i}")));
    }
    for (j, &elem) in def.params.iter().enumerate() {
        params.push((format!("const {} p{j}", c_type(elem)), format!("p{j}")));
    }
    if checked {
        params.push(("u32* __restrict__ ls_fault".into(), "ls_fault".into()));
        params.push(("const u32 ls_kernel".into(), "ls_kernel".into()));
    }
    params
}

/// `ls_body`'s parameters before the grid's, as `(declaration, name)`: per binding its pointer,
/// its length and, checked, the index its loads clamp to (`m<i>`); the scalar parameters; and,
/// checked, the invocation's pending fault.
fn body_params(def: &KernelDef, checked: bool) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = Vec::new();
    for (decl, name) in kernel_params(def, false) {
        let binding = name.strip_prefix('n').map(str::to_owned);
        params.push((decl, name));
        if let (Some(i), true) = (binding, checked) {
            params.push((format!("const u32 m{i}"), format!("m{i}")));
        }
    }
    if checked {
        params.push(("ls_pending& ls_p".into(), "ls_p".into()));
    }
    params
}

/// `ls_body`: one workgroup's work, given [`body_params`] and the workgroup's id and the grid's
/// size; it declares the shared arrays, the zeroed local arrays and locals, then runs the
/// lowered `body`.
fn body_function(src: &mut String, def: &KernelDef, checked: bool, body: &str) {
    let grid = [
        "ls_wg_x", "ls_wg_y", "ls_wg_z", "ls_nwg_x", "ls_nwg_y", "ls_nwg_z",
    ];
    src.push_str("__device__ __forceinline__ void ls_body(\n");
    let body_params: Vec<String> = body_params(def, checked)
        .into_iter()
        .map(|(decl, _)| decl)
        .chain(grid.iter().map(|g| format!("const u32 {g}")))
        .collect();
    let _ = writeln!(src, "    {}) {{", body_params.join(",\n    "));
    for (s, decl) in def.shared.iter().enumerate() {
        let _ = writeln!(
            src,
            "  __shared__ {} s{s}[{}];",
            c_type(decl.elem),
            decl.len
        );
    }
    for (l, decl) in def.local_arrays.iter().enumerate() {
        let _ = writeln!(src, "  {} l{l}[{}] = {{}};", c_type(decl.elem), decl.len);
    }
    for (v, &elem) in def.locals.iter().enumerate() {
        let zero = if elem.is_half() { "{}" } else { "0" };
        let _ = writeln!(src, "  {} v{v} = {zero};", c_type(elem));
    }
    if def.returns_before_barriers() {
        src.push_str("  bool ls_done = false;\n");
    }
    src.push_str(body);
    src.push_str("}\n\n");
}

/// The entry point: with a static count (`ls_count` null) one block per workgroup; with a
/// dynamic one a grid-stride loop over the workgroups `ls_count` holds (none when a count is
/// above [`MAX_GRID`]), which synchronises between workgroups when they share arrays. In checked
/// mode the invocation's pending fault starts clear and is reported once, when it ends.
fn entry_point(src: &mut String, def: &KernelDef, checked: bool) {
    let params = kernel_params(def, checked);
    let _ = writeln!(
        src,
        "extern \"C\" __global__ void __launch_bounds__({}) {ENTRY}(",
        def.workgroup_invocations()
    );
    let entry_params: Vec<String> = params
        .iter()
        .map(|(decl, _)| decl.clone())
        .chain(std::iter::once("const u32* ls_count".to_owned()))
        .collect();
    let _ = writeln!(src, "    {}) {{", entry_params.join(",\n    "));
    if checked {
        src.push_str("  ls_pending ls_p = {0u, 0u};\n");
        // A binding of no elements points at a word of zeros: its loads clamp to index 0.
        for (i, decl) in def.bindings.iter().enumerate() {
            let _ = writeln!(
                src,
                "  const u32 m{i} = n{i} == 0u ? 0u : n{i} - 1u;\n  if (n{i} == 0u) b{i} = ({}*)ls_no_elements;",
                element_type(decl)
            );
        }
    }
    let body_params = body_params(def, checked);
    let args: Vec<&str> = body_params.iter().map(|(_, name)| name.as_str()).collect();
    let args = args.join(", ");
    let sep = if args.is_empty() { "" } else { ", " };
    let _ = writeln!(src, "  if (ls_count == nullptr) {{");
    let _ = writeln!(
        src,
        "    ls_body({args}{sep}blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z);"
    );
    src.push_str("  } else {\n");
    src.push_str("    const u32 nx = ls_count[0], ny = ls_count[1], nz = ls_count[2];\n");
    let [max_x, max_y, max_z] = MAX_GRID;
    let _ = writeln!(
        src,
        "    if (nx > {max_x}u || ny > {max_y}u || nz > {max_z}u) return;"
    );
    src.push_str("    const unsigned long long plane = (unsigned long long)nx * ny;\n");
    src.push_str("    const unsigned long long total = plane * nz;\n");
    src.push_str("    for (unsigned long long w = blockIdx.x; w < total; w += gridDim.x) {\n");
    let _ = writeln!(
        src,
        "      ls_body({args}{sep}(u32)(w % nx), (u32)((w / nx) % ny), (u32)(w / plane), nx, ny, nz);"
    );
    if !def.shared.is_empty() {
        src.push_str("      __syncthreads();\n");
    }
    src.push_str("    }\n  }\n");
    if checked {
        src.push_str("  if (ls_p.word1 != 0u) ls_report(ls_fault, ls_kernel, ls_p);\n");
    }
    src.push_str("}\n");
}

/// The C type of a binding's elements as its pointer points at them: `const` when the kernel
/// only reads it.
fn element_type(decl: &BindingDecl) -> String {
    let constness = if decl.access == Access::Read {
        "const "
    } else {
        ""
    };
    format!("{constness}{}", c_type(decl.elem))
}

fn c_type(elem: ElemType) -> &'static str {
    match elem {
        ElemType::U32 => "u32",
        ElemType::I32 => "i32",
        ElemType::F32 => "f32",
        ElemType::F16 => "f16",
        ElemType::BF16 => "bf16",
    }
}

/// `v`, an expression of `elem`, as an `f32` expression (exact for a half float).
fn widened(elem: ElemType, v: &str) -> String {
    if elem.is_half() {
        format!("ls_f32({})", unparen(v))
    } else {
        v.to_owned()
    }
}

/// `v`, an `f32` expression, rounded to `elem` when it is a half float.
fn narrowed(elem: ElemType, v: &str) -> String {
    if elem.is_half() {
        format!("ls_{}({})", c_type(elem), unparen(v))
    } else {
        v.to_owned()
    }
}

/// Whether evaluating `expr` has an effect that must happen in order: a load in checked mode.
fn has_load(expr: &Expr) -> bool {
    match expr {
        Expr::Lit(_)
        | Expr::Bool(_)
        | Expr::Builtin(_)
        | Expr::Param(_)
        | Expr::Var(_)
        | Expr::Len(_) => false,
        Expr::Load { .. } => true,
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => has_load(lhs) || has_load(rhs),
        Expr::Not(e)
        | Expr::Neg(e)
        | Expr::Unary { value: e, .. }
        | Expr::Cast { value: e, .. }
        | Expr::Bitcast { value: e, .. }
        | Expr::Bits { value: e, .. } => has_load(e),
        Expr::Fma { a, b, c } => has_load(a) || has_load(b) || has_load(c),
        Expr::Select {
            cond,
            if_true,
            if_false,
        } => has_load(cond) || has_load(if_true) || has_load(if_false),
    }
}

/// Removes one pair of parentheses that encloses the whole of `s`.
fn unparen(s: &str) -> &str {
    let Some(inner) = s.strip_prefix('(').and_then(|r| r.strip_suffix(')')) else {
        return s;
    };
    let mut depth = 0i32;
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return s;
                }
            }
            _ => {}
        }
    }
    inner
}

struct Lowering<'a> {
    def: &'a KernelDef,
    checked: bool,
    /// Whether the kernel returns early and has barriers, lowered in uniform control flow
    /// (`lower/mirror.rs`).
    mirror: bool,
    /// The loops around the statement being lowered, innermost last: whether each is a
    /// mirrored loop (see `lower/mirror.rs`).
    loops: Vec<bool>,
    out: String,
    indent: usize,
    temps: u32,
}

impl Lowering<'_> {
    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn temp(&mut self) -> String {
        self.temps += 1;
        format!("t{}", self.temps - 1)
    }

    /// The C array and length expressions of `array`, and what the fault record calls it.
    fn array(&self, array: Array) -> (String, String, u32) {
        let word = FaultRecord::array_word(array);
        match array {
            Array::Binding(b) => (format!("b{}", b.0), format!("n{}", b.0), word),
            Array::Shared(s) => {
                let len = self.def.shared[s.0 as usize].len;
                (format!("s{}", s.0), format!("{len}u"), word)
            }
            Array::Local(l) => {
                let len = self.def.local_arrays[l.0 as usize].len;
                (format!("l{}", l.0), format!("{len}u"), word)
            }
        }
    }

    /// The index of `array`'s last element, or 0 for a binding of none (see [`entry_point`]):
    /// where a checked load clamps its index. Validation refuses empty shared and local arrays.
    fn last(&self, array: Array) -> String {
        match array {
            Array::Binding(b) => format!("m{}", b.0),
            Array::Shared(s) => format!("{}u", self.def.shared[s.0 as usize].len - 1),
            Array::Local(l) => format!("{}u", self.def.local_arrays[l.0 as usize].len - 1),
        }
    }

    /// A checked access: `helper(array, len, args…, pending fault, array word)` (a load's
    /// arguments start with the array's last index).
    fn checked_call(&self, helper: &str, array: Array, args: &[&str]) -> String {
        let (name, len, word) = self.array(array);
        let args: Vec<&str> = args.iter().map(|a| unparen(a)).collect();
        format!(
            "{helper}({name}, {len}, {}, ls_p, {word}u)",
            args.join(", ")
        )
    }

    /// An atomic on `array[index]`: CUDA's `op` unchecked, the prelude's `helper` checked.
    fn atomic_call(&self, helpers: (&str, &str), array: Array, args: &[&str]) -> String {
        let (op, helper) = helpers;
        if self.checked {
            return self.checked_call(helper, array, args);
        }
        let (name, _, _) = self.array(array);
        let rest: Vec<&str> = args[1..].iter().map(|a| unparen(a)).collect();
        format!("{op}(&{name}[{}], {})", unparen(args[0]), rest.join(", "))
    }

    fn block(&mut self, body: &[Stmt]) {
        self.indent += 1;
        for stmt in body {
            self.stmt(stmt);
        }
        self.indent -= 1;
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if self.mirror {
            self.mirrored(stmt);
        } else {
            self.plain(stmt);
        }
    }

    /// `stmt` as it runs for every thread (in a mirrored kernel: for a running one).
    fn plain(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Assign { var, value } => {
                let value = self.expr(value);
                self.line(&format!("v{} = {};", var.0, unparen(&value)));
            }
            Stmt::Store {
                array,
                index,
                value,
            } => self.store(*array, index, value),
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                old,
            } => self.atomic(*op, *array, index, value, *old),
            Stmt::CompareExchange {
                array,
                index,
                expected,
                value,
                old,
            } => {
                let index = self.expr(index);
                let expected = self.expr(expected);
                let value = self.expr(value);
                let args = [index.as_str(), &expected, &value];
                let call = self.atomic_call(("atomicCAS", "ls_atomic_cas"), *array, &args);
                self.line(&format!("v{} = {call};", old.0));
            }
            Stmt::While { cond, body } => {
                self.line("while (true) {");
                self.indent += 1;
                let cond = self.expr(cond);
                self.line(&format!("if (!({})) break;", unparen(&cond)));
                self.indent -= 1;
                self.loop_body(false, body);
                self.line("}");
            }
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
            Stmt::Barrier => self.line("__syncthreads();"),
            Stmt::Return if self.mirror => self.returned(),
            Stmt::Return => self.line("return;"),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = self.expr(cond);
                self.line(&format!("if ({}) {{", unparen(&cond)));
                self.block(then_body);
                if !else_body.is_empty() {
                    self.line("} else {");
                    self.block(else_body);
                }
                self.line("}");
            }
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(*var, start, end, body),
        }
    }

    fn store(&mut self, array: Array, index: &Expr, value: &Expr) {
        let index = self.expr(index);
        let value = self.expr(value);
        if self.checked {
            let call = self.checked_call("ls_store", array, &[&index, &value]);
            self.line(&format!("{call};"));
        } else {
            let (name, _, _) = self.array(array);
            let (i, v) = (unparen(&index), unparen(&value));
            self.line(&format!("{name}[{i}] = {v};"));
        }
    }

    fn atomic(
        &mut self,
        op: AtomicOp,
        array: Array,
        index: &Expr,
        value: &Expr,
        old: Option<VarId>,
    ) {
        let index = self.expr(index);
        let value = self.expr(value);
        let helpers = match op {
            AtomicOp::Add => ("atomicAdd", "ls_atomic_add"),
            AtomicOp::Min => ("atomicMin", "ls_atomic_min"),
            AtomicOp::Max => ("atomicMax", "ls_atomic_max"),
            AtomicOp::Exchange => ("atomicExch", "ls_atomic_exch"),
            AtomicOp::And => ("atomicAnd", "ls_atomic_and"),
            AtomicOp::Or => ("atomicOr", "ls_atomic_or"),
            AtomicOp::Xor => ("atomicXor", "ls_atomic_xor"),
        };
        let call = self.atomic_call(helpers, array, &[&index, &value]);
        match old {
            Some(v) => self.line(&format!("v{} = {call};", v.0)),
            None => self.line(&format!("{call};")),
        }
    }

    /// `start` and `end` are evaluated once, in that order; the hidden counter keeps the
    /// iteration independent of assignments to the loop variable in the body.
    fn for_loop(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt]) {
        let ty = c_type(self.def.locals[var.0 as usize]);
        self.line("{");
        self.indent += 1;
        let start = self.expr(start);
        let first = self.temp();
        self.line(&format!("const {ty} {first} = {};", unparen(&start)));
        let end = self.expr(end);
        let last = self.temp();
        self.line(&format!("const {ty} {last} = {};", unparen(&end)));
        let i = self.temp();
        self.line(&format!("for ({ty} {i} = {first}; {i} < {last}; ++{i}) {{"));
        self.indent += 1;
        self.line(&format!("v{} = {i};", var.0));
        self.indent -= 1;
        self.loop_body(false, body);
        self.line("}");
        self.indent -= 1;
        self.line("}");
    }

    /// Lowers `expr` to a C expression, first emitting the statements that must run before it
    /// (hoisted checked loads, short-circuit blocks).
    fn expr(&mut self, expr: &Expr) -> String {
        match expr {
            Expr::Lit(s) => literal(*s),
            Expr::Bool(b) => b.to_string(),
            Expr::Builtin(b) => self.builtin(*b),
            Expr::Param(p) => format!("p{p}"),
            Expr::Var(v) => format!("v{}", v.0),
            Expr::Len(b) => format!("n{}", b.0),
            Expr::Load { array, index } => self.load(*array, index),
            Expr::Binary { op, lhs, rhs } => {
                let elem = self.def.elem_type_of(lhs).unwrap_or(ElemType::U32);
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                binary(*op, elem, &l, &r)
            }
            Expr::Cmp { op, lhs, rhs } => {
                let elem = self.def.elem_type_of(lhs).unwrap_or(ElemType::U32);
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                let (l, r) = (widened(elem, &l), widened(elem, &r));
                let op = match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                format!("({l} {op} {r})")
            }
            Expr::Logic { op, lhs, rhs } => self.logic(*op, lhs, rhs),
            Expr::Not(e) => format!("(!{})", self.expr(e)),
            Expr::Neg(e) => {
                let v = self.expr(e);
                match self.def.elem_type_of(e) {
                    Some(ElemType::F32) => format!("(-{v})"),
                    Some(ElemType::F16 | ElemType::BF16) => format!("ls_neg_half({})", unparen(&v)),
                    _ => format!("ls_neg_i32({})", unparen(&v)),
                }
            }
            Expr::Unary { op, value } => {
                let elem = self.def.elem_type_of(value).unwrap_or(ElemType::F32);
                let v = self.expr(value);
                unary(*op, elem, unparen(&v))
            }
            Expr::Fma { a, b, c } => {
                let elem = self.def.elem_type_of(a).unwrap_or(ElemType::F32);
                let (a, b, c) = (self.expr(a), self.expr(b), self.expr(c));
                let [a, b, c] = [a, b, c].map(|v| widened(elem, &v));
                let fma = format!("fmaf({}, {}, {})", unparen(&a), unparen(&b), unparen(&c));
                narrowed(elem, &fma)
            }
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => {
                let c = self.expr(cond);
                let t = self.expr(if_true);
                let f = self.expr(if_false);
                format!("({c} ? {t} : {f})")
            }
            Expr::Cast { to, value } => {
                let from = self.def.elem_type_of(value).unwrap_or(ElemType::U32);
                let v = self.expr(value);
                cast(from, *to, &v)
            }
            Expr::Bitcast { to, value } => {
                let from = self.def.elem_type_of(value).unwrap_or(ElemType::U32);
                let v = self.expr(value);
                bitcast(from, *to, &v)
            }
            Expr::Bits { op, value } => {
                let elem = self.def.elem_type_of(value).unwrap_or(ElemType::U32);
                let v = self.expr(value);
                bits(*op, elem, &v)
            }
        }
    }

    /// A load; checked, the helper call is hoisted into a temporary so it runs once, in order.
    fn load(&mut self, array: Array, index: &Expr) -> String {
        let index = self.expr(index);
        if self.checked {
            let t = self.temp();
            let elem = self.def.elem_of(array).unwrap_or(ElemType::U32);
            let last = self.last(array);
            let call = self.checked_call("ls_load", array, &[&last, &index]);
            self.line(&format!("const {} {t} = {call};", c_type(elem)));
            t
        } else {
            let (name, _, _) = self.array(array);
            format!("{name}[{}]", unparen(&index))
        }
    }

    /// `&&` or `||`. Checked, a right side that loads becomes a block that runs only when the
    /// left side does not decide, so its hoisted loads keep the short circuit.
    fn logic(&mut self, op: LogicOp, lhs: &Expr, rhs: &Expr) -> String {
        let l = self.expr(lhs);
        if self.checked && has_load(rhs) {
            let t = self.temp();
            self.line(&format!("bool {t} = {};", unparen(&l)));
            let guard = match op {
                LogicOp::And => t.clone(),
                LogicOp::Or => format!("!{t}"),
            };
            self.line(&format!("if ({guard}) {{"));
            self.indent += 1;
            let r = self.expr(rhs);
            self.line(&format!("{t} = {};", unparen(&r)));
            self.indent -= 1;
            self.line("}");
            t
        } else {
            let r = self.expr(rhs);
            let op = match op {
                LogicOp::And => "&&",
                LogicOp::Or => "||",
            };
            format!("({l} {op} {r})")
        }
    }

    fn builtin(&self, builtin: Builtin) -> String {
        const AXES: [&str; 3] = ["x", "y", "z"];
        match builtin {
            Builtin::GlobalId(axis) => {
                let a = AXES[axis.index()];
                let size = self.def.workgroup_size[axis.index()];
                format!("(ls_wg_{a} * {size}u + threadIdx.{a})")
            }
            Builtin::LocalId(axis) => format!("threadIdx.{}", AXES[axis.index()]),
            Builtin::WorkgroupId(axis) => format!("ls_wg_{}", AXES[axis.index()]),
            Builtin::NumWorkgroups(axis) => format!("ls_nwg_{}", AXES[axis.index()]),
        }
    }
}

fn literal(s: Scalar) -> String {
    match s {
        Scalar::U32(v) => format!("{v}u"),
        Scalar::I32(i32::MIN) => "LS_I32_MIN".to_owned(),
        Scalar::I32(v) if v < 0 => format!("({v})"),
        Scalar::I32(v) => v.to_string(),
        // The bit pattern, so that no decimal round trip can change the value; the comment
        // keeps the source readable.
        Scalar::F32(v) => format!("__uint_as_float(0x{:08x}u) /* {v:?} */", v.to_bits()),
        Scalar::F16(v) => format!("f16{{0x{:04x}}} /* {:?} */", v.to_bits(), v.to_f32()),
        Scalar::BF16(v) => format!("bf16{{0x{:04x}}} /* {:?} */", v.to_bits(), v.to_f32()),
    }
}

fn binary(op: BinOp, elem: ElemType, l: &str, r: &str) -> String {
    if elem.is_half() {
        let f32_op = binary(op, ElemType::F32, &widened(elem, l), &widened(elem, r));
        return narrowed(elem, &f32_op);
    }
    let (l_bare, r_bare) = (unparen(l), unparen(r));
    let call = |f: &str| format!("{f}({l_bare}, {r_bare})");
    let infix = |o: &str| format!("({l} {o} {r})");
    match (elem, op) {
        (ElemType::U32, BinOp::Add) | (ElemType::F32, BinOp::Add) => infix("+"),
        (ElemType::U32, BinOp::Sub) | (ElemType::F32, BinOp::Sub) => infix("-"),
        (ElemType::U32, BinOp::Mul) | (ElemType::F32, BinOp::Mul) => infix("*"),
        (ElemType::F32, BinOp::Div) => infix("/"),
        (ElemType::F32, BinOp::Rem) => call("fmodf"),
        (ElemType::F32, BinOp::Min) => call("ls_min_f32"),
        (ElemType::F32, BinOp::Max) => call("ls_max_f32"),
        (ElemType::F32, BinOp::Pow) => call("powf"),
        (ElemType::F32, BinOp::Atan2) => call("atan2f"),
        (ElemType::U32, BinOp::Div) => call("ls_div_u32"),
        (ElemType::U32, BinOp::Rem) => call("ls_rem_u32"),
        (ElemType::U32, BinOp::Min) => call("ls_min_u32"),
        (ElemType::U32, BinOp::Max) => call("ls_max_u32"),
        (ElemType::U32, BinOp::Shl) => call("ls_shl_u32"),
        (ElemType::U32, BinOp::Shr) => call("ls_shr_u32"),
        (ElemType::I32, BinOp::Add) => call("ls_add_i32"),
        (ElemType::I32, BinOp::Sub) => call("ls_sub_i32"),
        (ElemType::I32, BinOp::Mul) => call("ls_mul_i32"),
        (ElemType::I32, BinOp::Div) => call("ls_div_i32"),
        (ElemType::I32, BinOp::Rem) => call("ls_rem_i32"),
        (ElemType::I32, BinOp::Min) => call("ls_min_i32"),
        (ElemType::I32, BinOp::Max) => call("ls_max_i32"),
        (ElemType::I32, BinOp::Shl) => call("ls_shl_i32"),
        (ElemType::I32, BinOp::Shr) => call("ls_shr_i32"),
        (_, BinOp::BitAnd) => infix("&"),
        (_, BinOp::BitOr) => infix("|"),
        (_, BinOp::BitXor) => infix("^"),
        // The validator rejects bitwise operations and shifts on floats, and `pow` on
        // integers; if one got here the C compiler reports it in the compile log.
        (ElemType::F32, BinOp::Shl | BinOp::Shr) => infix("<<"),
        (ElemType::F16 | ElemType::BF16, _) => unreachable!("half floats compute in f32 above"),
        (ElemType::U32 | ElemType::I32, BinOp::Pow) => call("powf"),
        (ElemType::U32 | ElemType::I32, BinOp::Atan2) => call("atan2f"),
    }
}

/// A function of one operand of type `elem` (`abs` takes integers; the rest floats).
fn unary(op: UnaryOp, elem: ElemType, v: &str) -> String {
    match (op, elem) {
        (UnaryOp::Abs, ElemType::F16 | ElemType::BF16) => return format!("ls_abs_half({v})"),
        (_, ElemType::F16 | ElemType::BF16) => {
            return narrowed(elem, &unary(op, ElemType::F32, &widened(elem, v)));
        }
        _ => {}
    }
    let f = match (op, elem) {
        (UnaryOp::Abs, ElemType::U32) => return format!("({v})"),
        (UnaryOp::Abs, ElemType::I32) => "ls_abs_i32",
        (UnaryOp::Abs, ElemType::F32) => "fabsf",
        (UnaryOp::Abs, ElemType::F16 | ElemType::BF16) => "ls_abs_half",
        (UnaryOp::Floor, _) => "floorf",
        (UnaryOp::Ceil, _) => "ceilf",
        (UnaryOp::Trunc, _) => "truncf",
        // rintf rounds to nearest even in the default rounding mode, as WGSL's round does.
        (UnaryOp::Round, _) => "rintf",
        (UnaryOp::Sqrt, _) => "sqrtf",
        (UnaryOp::InverseSqrt, _) => "rsqrtf",
        (UnaryOp::Exp, _) => "expf",
        (UnaryOp::Log, _) => "logf",
        (UnaryOp::Tanh, _) => "tanhf",
        (UnaryOp::Sin, _) => "sinf",
        (UnaryOp::Cos, _) => "cosf",
        (UnaryOp::Tan, _) => "tanf",
        (UnaryOp::Sinh, _) => "sinhf",
        (UnaryOp::Cosh, _) => "coshf",
        (UnaryOp::Asin, _) => "asinf",
        (UnaryOp::Acos, _) => "acosf",
        (UnaryOp::Atan, _) => "atanf",
        (UnaryOp::Asinh, _) => "asinhf",
        (UnaryOp::Acosh, _) => "acoshf",
        (UnaryOp::Atanh, _) => "atanhf",
    };
    format!("{f}({v})")
}

fn cast(from: ElemType, to: ElemType, v: &str) -> String {
    if from == to {
        return v.to_owned();
    }
    if from.is_half() {
        return cast(ElemType::F32, to, &widened(from, v));
    }
    if to.is_half() {
        return narrowed(to, &cast(from, ElemType::F32, v));
    }
    match (from, to) {
        (ElemType::U32, ElemType::U32)
        | (ElemType::I32, ElemType::I32)
        | (ElemType::F32, ElemType::F32) => v.to_owned(),
        (ElemType::U32, ElemType::I32) => format!("((i32){v})"),
        (ElemType::I32, ElemType::U32) => format!("((u32){v})"),
        (ElemType::U32 | ElemType::I32, ElemType::F32) => format!("((f32){v})"),
        (ElemType::F32, ElemType::U32) => format!("ls_f32_to_u32({})", unparen(v)),
        (ElemType::F32, ElemType::I32) => format!("ls_f32_to_i32({})", unparen(v)),
        (ElemType::F16 | ElemType::BF16, _) | (_, ElemType::F16 | ElemType::BF16) => {
            unreachable!("half floats convert through f32 above")
        }
    }
}

/// `op` of the bits of `v`, an integer of type `elem`: the prelude's `ls_*` helpers, which
/// write out WGSL's results for zero and for negative `i32`s.
fn bits(op: BitFn, elem: ElemType, v: &str) -> String {
    let name = match op {
        BitFn::CountOneBits => "ls_count_one_bits",
        BitFn::CountLeadingZeros => "ls_count_leading_zeros",
        BitFn::CountTrailingZeros => "ls_count_trailing_zeros",
        BitFn::FirstTrailingBit => "ls_first_trailing_bit",
        BitFn::FirstLeadingBit if elem == ElemType::I32 => "ls_first_leading_bit_i32",
        BitFn::FirstLeadingBit => "ls_first_leading_bit_u32",
        BitFn::ReverseBits => "ls_reverse_bits",
    };
    // Computed on the u32 bits, converted back to the operand's type.
    let call = format!("{name}((u32)({}))", unparen(v));
    match elem {
        ElemType::I32 => format!("((i32){call})"),
        _ => call,
    }
}

/// `v`'s bits as `to`, of `from`'s size: CUDA's reinterpreting intrinsics, and for the half
/// floats (structs of their bits) a struct of the same bits.
fn bitcast(from: ElemType, to: ElemType, v: &str) -> String {
    let v = unparen(v);
    match (from, to) {
        _ if from == to => v.to_owned(),
        (ElemType::U32, ElemType::I32) => format!("((i32)({v}))"),
        (ElemType::I32, ElemType::U32) => format!("((u32)({v}))"),
        (ElemType::U32, ElemType::F32) => format!("__uint_as_float({v})"),
        (ElemType::I32, ElemType::F32) => format!("__int_as_float({v})"),
        (ElemType::F32, ElemType::U32) => format!("__float_as_uint({v})"),
        (ElemType::F32, ElemType::I32) => format!("__float_as_int({v})"),
        (ElemType::F16, ElemType::BF16) => format!("bf16{{({v}).bits}}"),
        (ElemType::BF16, ElemType::F16) => format!("f16{{({v}).bits}}"),
        _ => unreachable!("validation pairs types of one size: {from} as {to}"),
    }
}

mod mirror;

#[cfg(test)]
mod tests;
