//! Lowers kernel IR to WGSL text. This module only emits text: it never touches wgpu, so every
//! kernel's WGSL is unit-tested (snapshots in `lower/snapshots/`) without an adapter.
//!
//! The emitted module matches `lockstep::kernel::semantics` and the checked-mode rules of
//! `lockstep::kernel::FaultRecord`:
//! - Every binding is bound as its whole buffer; where the kernel's slice starts and how many
//!   elements it has come from the launch's info words ([`InfoLayout`]), so a zero-length
//!   binding has `Len == 0` although wgpu cannot bind zero bytes, and `arrayLength` is never used.
//! - Integer division and remainder go through helpers that give WGSL's results for a zero
//!   divisor and for `i32::MIN / -1` (the left operand, and a remainder of 0) whatever the
//!   driver does with `/` and `%` there; shift amounts are masked to 5 bits; float-to-integer casts
//!   saturate and map NaN to zero; float comparisons, `min` and `max` test for NaN on the bits,
//!   so a driver that assumes no NaN cannot change the result.
//! - Expressions are flattened into `let`s in the interpreter's evaluation order, so the first
//!   out-of-range access of an invocation is the one the interpreter reports; `&&` and `||`
//!   short-circuit around loads.
//! - Operations whose operands are all literals are folded here with the reference semantics,
//!   so WGSL constant evaluation (which rejects overflow, division by zero and non-finite
//!   values) never sees an operation.
//! - Arrays (bindings or shared) that an atomic targets are declared `array<atomic<T>>`, and
//!   every access to them goes through `atomicLoad`/`atomicStore`/`atomic*`. WGSL's
//!   compare-exchange may fail spuriously; the IR's never does, so it loops until it either
//!   exchanges or sees another value.
//! - Shared arrays are `var<workgroup>` arrays of their declared length; local arrays are
//!   `var<private>` arrays (per invocation, zero at its start).
//! - `f16` is WGSL's `f16` (`enable f16;`, the device's `SHADER_F16`); its arithmetic is
//!   WGSL's, correctly rounded, which is the IR's (computed in `f32`, rounded once: the same
//!   result). A conversion from an integer goes through `f32` as the IR's does. Bindings of
//!   `f16` that share a buffer with 32-bit ones are declared as a variable of their own over
//!   the same buffer (`h<b>`), read-write when any binding of the buffer is, since wgpu refuses
//!   a buffer bound read-only and read-write at once. `bf16` does not exist in WGSL: the device
//!   refuses such kernels before lowering (`Features::bf16` is false).
//! - `workgroup_barrier` is `storageBarrier(); workgroupBarrier();`: the IR's barrier orders
//!   global memory too, as CUDA's `__syncthreads` does.
//! - `return` is `return;`, except in a kernel that also has barriers
//!   ([`KernelDef::returns_before_barriers`]): there an invocation that returned must count as
//!   arrived at the barriers the others reach, and WGSL (lavapipe) loses invocations that wait
//!   at a barrier some others never reach, so such a kernel is lowered in uniform control
//!   flow (`mirror.rs`): an invocation that returned stays, skips every effect, and takes
//!   every decision a barrier depends on with the running ones.
//! - `while` is a `loop` that breaks when its condition (evaluated at the top of every
//!   iteration, loads first) is false; a `for`'s counter advances in a `continuing` block, so
//!   `continue` advances it.

use std::collections::BTreeSet;
use std::fmt::Write;

use lockstep::kernel::{
    Access, Array, AtomicOp, BinOp, BindingId, Builtin, CmpOp, ElemType, Expr, FaultRecord,
    KernelDef, LogicOp, Scalar, Stmt, VarId, semantics,
};

/// Where a launch's info words are: the storage buffer the device fills per launch.
///
/// Words: `[KERNEL_ID]`, then for each binding (the declared ones, then the fault record in
/// checked mode) its offset and its length in elements, then one word per parameter (its bit
/// pattern; for a half float, the bits of its exact `f32` value, see [`param_word_bits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InfoLayout {
    /// Bindings described, including the fault record in checked mode.
    pub bindings: u32,
    /// Parameters described, one word each.
    pub params: u32,
}

impl InfoLayout {
    /// Word index of the kernel's id (fault records name the kernel by it).
    pub const KERNEL_ID: u32 = 0;

    /// The layout of `def`'s info words, with the fault record's binding in `checked` mode.
    pub fn of(def: &KernelDef, checked: bool) -> Self {
        Self {
            bindings: def.bindings.len() as u32 + checked as u32,
            params: def.params.len() as u32,
        }
    }

    /// Word index of `binding`'s offset in its buffer, in words.
    pub fn offset_word(binding: u32) -> u32 {
        1 + 2 * binding
    }

    /// Word index of `binding`'s length, in elements.
    pub fn len_word(binding: u32) -> u32 {
        2 + 2 * binding
    }

    /// Word index of parameter `param`'s bit pattern.
    pub fn param_word(&self, param: u32) -> u32 {
        1 + 2 * self.bindings + param
    }

    /// Number of info words a launch fills.
    pub fn words(&self) -> u32 {
        1 + 2 * self.bindings + self.params
    }
}

/// The info word of parameter `value`: its bits, or for a half float its exact `f32` value's
/// bits (the module converts it back exactly: naga has no bit cast from a word to halves).
pub fn param_word_bits(value: Scalar) -> u32 {
    match value {
        Scalar::F16(v) => v.to_f32().to_bits(),
        Scalar::BF16(v) => v.to_f32().to_bits(),
        other => other.to_bits(),
    }
}

/// How the module binds its resources: what the device must put in bind group 0.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BindingPlan {
    /// Per WGSL storage binding, in binding-number order: whether it is read-only. There is one
    /// per alias group (see [`lower`]), in the order of the groups' first bindings.
    pub read_only: Vec<bool>,
    /// The kernel binding (declared ones, then the fault record) whose buffer each WGSL storage
    /// binding binds: the first of its group.
    pub sources: Vec<u32>,
    /// The info words, bound last (binding number `read_only.len()`), read-only, with a dynamic
    /// offset.
    pub info: InfoLayout,
}

/// Which kernel bindings share one buffer at a launch: `aliases[b]` is the first binding with
/// `b`'s buffer (so `aliases[b] <= b`). wgpu cannot bind one buffer twice when either binding
/// is writable, so a group is declared once, as words, and each member reads its own slice
/// of it through its info offset.
pub fn aliases_of(buffers: &[u64]) -> Vec<u32> {
    buffers
        .iter()
        .enumerate()
        .map(|(b, id)| {
            buffers[..b]
                .iter()
                .position(|other| other == id)
                .unwrap_or(b) as u32
        })
        .collect()
}

/// A lowered kernel: its WGSL and how to bind it.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The WGSL module, entry point [`ENTRY_POINT`].
    pub wgsl: String,
    /// What bind group 0 must hold.
    pub plan: BindingPlan,
}

/// The WGSL entry point of every lowered kernel.
pub const ENTRY_POINT: &str = "main";

/// Lowers a validated kernel whose bindings (declared ones, then the fault record in checked
/// mode) share buffers as `aliases` says (see [`aliases_of`]; distinct buffers: `0, 1, 2, …`).
pub fn lower(def: &KernelDef, checked: bool, aliases: &[u32]) -> Lowered {
    let info = InfoLayout::of(def, checked);
    let mut atomics = BTreeSet::new();
    collect_atomics(&def.body, &mut atomics);
    if checked {
        atomics.insert((fault_array(def), AtomicOp::Exchange));
    }
    let count = def.bindings.len() + checked as usize;
    let aliases: Vec<u32> = (0..count)
        .map(|b| {
            aliases
                .get(b)
                .copied()
                .filter(|&a| a as usize <= b)
                .unwrap_or(b as u32)
        })
        .collect();
    let mut lowerer = Lowerer {
        def,
        checked,
        info,
        aliases,
        atomics,
        used: BTreeSet::new(),
        helpers: BTreeSet::new(),
        mirror: def.returns_before_barriers(),
        loops: Vec::new(),
        body: String::new(),
        indent: 1,
        temps: 0,
    };
    lowerer.block(&def.body);
    let wgsl = lowerer.module();
    let groups = lowerer.groups();
    let read_only = groups.iter().map(|g| !g.writable).collect();
    let sources = groups.iter().map(|g| g.first).collect();
    Lowered {
        wgsl,
        plan: BindingPlan {
            read_only,
            sources,
            info,
        },
    }
}

/// Bindings that share one buffer and element size, declared as one WGSL variable.
#[derive(Clone, Debug)]
struct Group {
    first: u32,
    /// Every binding declared through this variable.
    members: Vec<u32>,
    /// The element type the variable is declared with: the member's own when alone, else
    /// `u32` (members bit-cast).
    elem: ElemType,
    atomic: bool,
    writable: bool,
}

/// The fault record, as an array: the binding after the declared ones.
fn fault_array(def: &KernelDef) -> Array {
    Array::Binding(BindingId(def.bindings.len() as u32))
}

/// Every array an atomic targets, with the operations applied to it (a compare-exchange
/// counts as an exchange: neither depends on signedness).
fn collect_atomics(body: &[Stmt], out: &mut BTreeSet<(Array, AtomicOp)>) {
    for stmt in body {
        match stmt {
            Stmt::Atomic { op, array, .. } => {
                out.insert((*array, *op));
            }
            Stmt::CompareExchange { array, .. } => {
                out.insert((*array, AtomicOp::Exchange));
            }
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                collect_atomics(then_body, out);
                collect_atomics(else_body, out);
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => collect_atomics(body, out),
            Stmt::Assign { .. }
            | Stmt::Store { .. }
            | Stmt::Break
            | Stmt::Continue
            | Stmt::Barrier
            | Stmt::Return => {}
        }
    }
}

/// What an array is accessed with; each emits one helper function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum AccessKind {
    Load,
    Store,
    Atomic(AtomicOp),
    CompareExchange,
}

impl AccessKind {
    fn prefix(self) -> &'static str {
        match self {
            AccessKind::Load => "load",
            AccessKind::Store => "store",
            AccessKind::Atomic(AtomicOp::Add) => "atomic_add",
            AccessKind::Atomic(AtomicOp::Min) => "atomic_min",
            AccessKind::Atomic(AtomicOp::Max) => "atomic_max",
            AccessKind::Atomic(AtomicOp::Exchange) => "atomic_exchange",
            AccessKind::Atomic(AtomicOp::And) => "atomic_and",
            AccessKind::Atomic(AtomicOp::Or) => "atomic_or",
            AccessKind::Atomic(AtomicOp::Xor) => "atomic_xor",
            AccessKind::CompareExchange => "compare_exchange",
        }
    }
}

/// The name of `array`'s helper for `kind`: `load_b0`, `atomic_min_s1`, ….
fn helper_name(kind: AccessKind, array: Array) -> String {
    match array {
        Array::Binding(b) => format!("{}_b{}", kind.prefix(), b.0),
        Array::Shared(s) => format!("{}_s{}", kind.prefix(), s.0),
        Array::Local(l) => format!("{}_l{}", kind.prefix(), l.0),
    }
}

/// How a helper reaches its array's elements.
struct Slot {
    /// The WGSL variable.
    var: String,
    /// Where the array starts in it (a binding's info word); shared and local arrays start at
    /// 0.
    offset: Option<String>,
    /// The array's length in elements, as a WGSL expression.
    len: String,
    /// The member's own element type.
    elem: ElemType,
    /// The type the variable is declared with (a group's may be `u32` or `i32`).
    stored: ElemType,
    atomic: bool,
}

impl Slot {
    /// The element at `i`, as a WGSL reference expression.
    fn at(&self, i: &str) -> String {
        match &self.offset {
            Some(offset) => format!("{}[{offset} + {i}]", self.var),
            None => format!("{}[{i}]", self.var),
        }
    }

    /// `x` (of the member's type) as the declared type.
    fn as_stored(&self, x: &str) -> String {
        if self.stored == self.elem {
            x.to_owned()
        } else {
            format!("bitcast<{}>({x})", wgsl_type(self.stored))
        }
    }

    /// `x` (of the declared type) as the member's type.
    fn as_member(&self, x: &str) -> String {
        if self.stored == self.elem {
            x.to_owned()
        } else {
            format!("bitcast<{}>({x})", wgsl_type(self.elem))
        }
    }
}

/// Shared helper functions, emitted once when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Helper {
    DivU32,
    RemU32,
    DivI32,
    RemI32,
    IsNan,
    IsNanF16,
    MinF32,
    MaxF32,
    MinF16,
    MaxF16,
    F32ToU32,
    F32ToI32,
    OpaqueZero,
}

/// A lowered expression: WGSL text without side effects, and its value when it is a literal
/// (which the lowerer folds instead of letting WGSL constant evaluation see it).
#[derive(Clone, Debug)]
struct Value {
    text: String,
    constant: Option<Constant>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Constant {
    Scalar(Scalar),
    Bool(bool),
}

impl Value {
    fn runtime(text: String) -> Self {
        Self {
            text,
            constant: None,
        }
    }

    fn scalar(&self) -> Option<Scalar> {
        match self.constant {
            Some(Constant::Scalar(s)) => Some(s),
            _ => None,
        }
    }

    fn boolean(&self) -> Option<bool> {
        match self.constant {
            Some(Constant::Bool(b)) => Some(b),
            _ => None,
        }
    }
}

struct Lowerer<'a> {
    def: &'a KernelDef,
    checked: bool,
    info: InfoLayout,
    /// For each binding, the first binding of its alias group.
    aliases: Vec<u32>,
    /// Arrays accessed atomically, with the operations (the fault record: an exchange).
    atomics: BTreeSet<(Array, AtomicOp)>,
    used: BTreeSet<(Array, AccessKind)>,
    helpers: BTreeSet<Helper>,
    /// Whether the kernel returns early and has barriers, lowered in uniform control flow
    /// (`mirror.rs`).
    mirror: bool,
    /// The loops around the statement being lowered, innermost last: whether each is a
    /// mirrored loop (see `mirror.rs`).
    loops: Vec<bool>,
    body: String,
    indent: usize,
    temps: u32,
}

fn wgsl_type(elem: ElemType) -> &'static str {
    match elem {
        ElemType::U32 => "u32",
        ElemType::I32 => "i32",
        ElemType::F32 => "f32",
        ElemType::F16 => "f16",
        // Never emitted for a device: WGSL has no bfloat16 and the device refuses the kernel.
        ElemType::BF16 => "bf16",
    }
}

/// The half float `v` as WGSL text: its exact `f32` value's bits, converted (exactly) to `f16`;
/// naga has no bit cast from a word to halves.
fn half_bits(v: lockstep::half::f16, opaque: bool) -> String {
    let or_zero = if opaque { " | opaque_zero" } else { "" };
    format!(
        "f16(bitcast<f32>({:#010x}u{or_zero}))",
        v.to_f32().to_bits()
    )
}

/// A literal as WGSL text. Values that WGSL cannot spell as a literal (`i32::MIN`, subnormal
/// and non-finite floats) are bit casts; non-finite ones go through a runtime zero, because
/// WGSL constant evaluation rejects non-finite values.
fn literal(value: Scalar, helpers: &mut BTreeSet<Helper>) -> String {
    match value {
        Scalar::U32(v) => format!("{v}u"),
        Scalar::I32(i32::MIN) => "bitcast<i32>(0x80000000u)".to_owned(),
        Scalar::I32(v) if v < 0 => format!("({v}i)"),
        Scalar::I32(v) => format!("{v}i"),
        Scalar::F32(v) if v.is_finite() && (v == 0.0 || v.is_normal()) => {
            let text = format!("{v:?}f");
            if v.is_sign_negative() {
                format!("({text})")
            } else {
                text
            }
        }
        Scalar::F32(v) if v.is_finite() => format!("bitcast<f32>({:#010x}u)", v.to_bits()),
        Scalar::F32(v) => {
            helpers.insert(Helper::OpaqueZero);
            format!("bitcast<f32>({:#010x}u | opaque_zero)", v.to_bits())
        }
        Scalar::F16(v) if v.is_finite() && (v.to_f32() == 0.0 || v.is_normal()) => {
            let text = format!("{:?}h", v.to_f32());
            if v.is_sign_negative() {
                format!("({text})")
            } else {
                text
            }
        }
        Scalar::F16(v) if v.is_finite() => half_bits(v, false),
        Scalar::F16(v) => {
            helpers.insert(Helper::OpaqueZero);
            half_bits(v, true)
        }
        Scalar::BF16(v) => format!("bf16({:#06x})", v.to_bits()),
    }
}

impl Lowerer<'_> {
    fn is_atomic(&self, array: Array) -> bool {
        self.atomics.iter().any(|&(a, _)| a == array)
    }

    /// Whether `array` takes an atomic whose result depends on signedness (`min`, `max`).
    fn ordered_atomics(&self, array: Array) -> bool {
        self.atomics.contains(&(array, AtomicOp::Min))
            || self.atomics.contains(&(array, AtomicOp::Max))
    }

    /// Element type and writability of binding `b` (the fault record is a writable `u32`).
    fn member(&self, b: u32) -> (ElemType, bool) {
        match self.def.bindings.get(b as usize) {
            Some(decl) => (decl.elem, decl.access == Access::ReadWrite),
            None => (ElemType::U32, true),
        }
    }

    fn groups(&self) -> Vec<Group> {
        let mut groups = Vec::new();
        for first in 0..self.aliases.len() as u32 {
            if self.aliases[first as usize] != first {
                continue;
            }
            let sharing: Vec<u32> = (0..self.aliases.len() as u32)
                .filter(|&b| self.aliases[b as usize] == first)
                .collect();
            // Every variable over one buffer has one access mode: wgpu refuses a buffer bound
            // read-only and read-write in one dispatch.
            let writable = sharing.iter().any(|&b| self.member(b).1);
            // 16-bit elements cannot be bit-cast from 32-bit words: they get a variable of
            // their own over the same buffer.
            let (halves, words): (Vec<u32>, Vec<u32>) =
                sharing.iter().partition(|&&b| self.member(b).0.is_half());
            for members in [words, halves] {
                if let Some(group) = self.group(members, writable) {
                    groups.push(group);
                }
            }
        }
        groups.sort_by_key(|g| g.first);
        groups
    }

    /// The variable declaring `members` (bindings of one buffer and element size), if any.
    fn group(&self, members: Vec<u32>, writable: bool) -> Option<Group> {
        let &first = members.first()?;
        let (own, _) = self.member(first);
        let binding = |b: u32| Array::Binding(BindingId(b));
        // Members bit-cast to one declared type: `u32`, unless a member's `min`/`max` needs
        // its own (signed) order. Only one member of a group can be written by the kernel
        // (launches refuse writable aliases), besides the fault record, whose compare-exchange
        // does not care. Half floats have one type (`f16`) and no atomics.
        let elem = match members.iter().find(|&&b| self.ordered_atomics(binding(b))) {
            _ if members.len() == 1 || own.is_half() => own,
            Some(&b) => self.member(b).0,
            None => ElemType::U32,
        };
        Some(Group {
            first,
            elem,
            atomic: members.iter().any(|&b| self.is_atomic(binding(b))),
            writable,
            members,
        })
    }

    fn group_of(&self, b: u32) -> Group {
        self.groups()
            .into_iter()
            .find(|g| g.members.contains(&b))
            .expect("every binding is a member of a group")
    }

    /// The WGSL variable binding `b` lives in.
    fn var_of(&self, b: u32) -> String {
        let group = self.group_of(b);
        if group.first as usize == self.def.bindings.len() {
            "fault".to_owned()
        } else if group.elem.is_half() {
            format!("h{}", group.first)
        } else {
            format!("b{}", group.first)
        }
    }

    fn line(&mut self, text: &str) {
        for _ in 0..self.indent {
            self.body.push_str("    ");
        }
        self.body.push_str(text);
        self.body.push('\n');
    }

    fn temp(&mut self) -> String {
        self.temps += 1;
        format!("t{}", self.temps)
    }

    fn block(&mut self, body: &[Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if self.mirror {
            self.mirrored(stmt);
        } else {
            self.plain(stmt);
        }
    }

    /// `stmt` as it runs for every invocation (in a mirrored kernel: for a running one).
    fn plain(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Assign { var, value } => {
                let value = self.expr(value);
                self.line(&format!("v{} = {};", var.0, value.text));
            }
            Stmt::Store {
                array,
                index,
                value,
            } => {
                let index = self.expr(index);
                let value = self.expr(value);
                let call = self.access(*array, AccessKind::Store, &[&index, &value]);
                self.line(&format!("{call};"));
            }
            Stmt::Atomic {
                op,
                array,
                index,
                value,
                old,
            } => {
                let index = self.expr(index);
                let value = self.expr(value);
                let call = self.access(*array, AccessKind::Atomic(*op), &[&index, &value]);
                match old {
                    Some(v) => self.line(&format!("v{} = {call};", v.0)),
                    None => self.line(&format!("{call};")),
                }
            }
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
                let args = [&index, &expected, &value];
                let call = self.access(*array, AccessKind::CompareExchange, &args);
                self.line(&format!("v{} = {call};", old.0));
            }
            Stmt::While { cond, body } => {
                self.line("loop {");
                self.indent += 1;
                let cond = self.expr(cond);
                self.line(&format!("if !{} {{ break; }}", paren(&cond.text)));
                self.loop_body(false, body);
                self.indent -= 1;
                self.line("}");
            }
            Stmt::Break => self.line("break;"),
            Stmt::Continue => self.line("continue;"),
            Stmt::Barrier => {
                self.line("storageBarrier();");
                self.line("workgroupBarrier();");
            }
            Stmt::Return if self.mirror => self.returned(),
            Stmt::Return => self.line("return;"),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => self.if_else(cond, then_body, else_body),
            Stmt::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(*var, start, end, body),
        }
    }

    fn if_else(&mut self, cond: &Expr, then_body: &[Stmt], else_body: &[Stmt]) {
        let cond = self.expr(cond);
        self.line(&format!("if {} {{", paren(&cond.text)));
        self.indent += 1;
        self.block(then_body);
        self.indent -= 1;
        if else_body.is_empty() {
            self.line("}");
        } else {
            self.line("} else {");
            self.indent += 1;
            self.block(else_body);
            self.indent -= 1;
            self.line("}");
        }
    }

    /// `start` and `end` are evaluated once, in that order, into a hidden counter and bound,
    /// so assignments to the loop variable in the body do not change the iteration.
    fn for_loop(&mut self, var: VarId, start: &Expr, end: &Expr, body: &[Stmt]) {
        let elem = self.def.locals[var.0 as usize];
        let start = self.expr(start);
        let end = self.expr(end);
        let (i, e) = (self.temp(), self.temp());
        self.line(&format!("var {i}: {} = {};", wgsl_type(elem), start.text));
        self.line(&format!("let {e}: {} = {};", wgsl_type(elem), end.text));
        let one = if elem == ElemType::I32 { "1i" } else { "1u" };
        self.line("loop {");
        self.indent += 1;
        self.line(&format!("if !({i} < {e}) {{ break; }}"));
        self.line(&format!("v{} = {i};", var.0));
        self.loop_body(false, body);
        self.line("continuing {");
        self.line(&format!("    {i} = {i} + {one};"));
        self.line("}");
        self.indent -= 1;
        self.line("}");
    }

    /// Lowers `expr`, emitting `let`s for loads (and short-circuits around them) in evaluation
    /// order, and returns side-effect-free text for its value.
    fn expr(&mut self, expr: &Expr) -> Value {
        match expr {
            Expr::Lit(s) => Value {
                text: literal(*s, &mut self.helpers),
                constant: Some(Constant::Scalar(*s)),
            },
            Expr::Bool(b) => Value {
                text: b.to_string(),
                constant: Some(Constant::Bool(*b)),
            },
            Expr::Builtin(b) => Value::runtime(builtin(*b).to_owned()),
            Expr::Param(p) => Value::runtime(self.param(*p)),
            Expr::Var(v) => Value::runtime(format!("v{}", v.0)),
            Expr::Len(b) => Value::runtime(format!("info[{}]", InfoLayout::len_word(b.0))),
            Expr::Load { array, index } => {
                let index = self.expr(index);
                let call = self.access(*array, AccessKind::Load, &[&index]);
                let t = self.temp();
                self.line(&format!("let {t} = {call};"));
                Value::runtime(t)
            }
            Expr::Binary { op, lhs, rhs } => {
                let l = self.expr(lhs);
                let r = self.expr(rhs);
                if let (Some(a), Some(b)) = (l.scalar(), r.scalar()) {
                    let folded = semantics::binary(*op, a, b);
                    return self.constant(folded);
                }
                let elem = self.type_of(lhs);
                Value::runtime(self.binary(*op, elem, &l.text, &r.text))
            }
            Expr::Cmp { op, lhs, rhs } => self.comparison(*op, lhs, rhs),
            Expr::Logic { op, lhs, rhs } => self.logic(*op, lhs, rhs),
            Expr::Not(e) => {
                let v = self.expr(e);
                match v.boolean() {
                    Some(b) => Value {
                        text: (!b).to_string(),
                        constant: Some(Constant::Bool(!b)),
                    },
                    None => Value::runtime(format!("!{}", paren(&v.text))),
                }
            }
            Expr::Neg(e) => {
                let v = self.expr(e);
                match v.scalar() {
                    Some(s) => self.constant(semantics::negate(s)),
                    None => Value::runtime(format!("(-{})", paren(&v.text))),
                }
            }
            Expr::Unary { op, value } => {
                let v = self.expr(value);
                match v.scalar() {
                    Some(s) => self.constant(semantics::unary(*op, s)),
                    None => Value::runtime(format!("{}({})", op.name(), v.text)),
                }
            }
            Expr::Fma { a, b, c } => {
                let (a, b, c) = (self.expr(a), self.expr(b), self.expr(c));
                match (a.scalar(), b.scalar(), c.scalar()) {
                    (Some(x), Some(y), Some(z)) => self.constant(semantics::fma_scalar(x, y, z)),
                    _ => Value::runtime(format!("fma({}, {}, {})", a.text, b.text, c.text)),
                }
            }
            Expr::Select {
                cond,
                if_true,
                if_false,
            } => {
                // The interpreter evaluates all three, in this order.
                let c = self.expr(cond);
                let t = self.expr(if_true);
                let f = self.expr(if_false);
                match c.boolean() {
                    Some(true) => t,
                    Some(false) => f,
                    None => Value::runtime(format!("select({}, {}, {})", f.text, t.text, c.text)),
                }
            }
            Expr::Cast { to, value } => {
                let from = self.type_of(value);
                let v = self.expr(value);
                if let Some(s) = v.scalar() {
                    return self.constant(semantics::cast(s, *to));
                }
                Value::runtime(self.cast(from, *to, &v.text))
            }
            Expr::Bitcast { to, value } => {
                let v = self.expr(value);
                if let Some(s) = v.scalar() {
                    return self.constant(semantics::bitcast(s, *to));
                }
                Value::runtime(format!("bitcast<{}>({})", wgsl_type(*to), v.text))
            }
            Expr::Bits { op, value } => {
                let v = self.expr(value);
                if let Some(s) = v.scalar() {
                    return self.constant(semantics::bits(*op, s));
                }
                Value::runtime(format!("{}({})", op.name(), v.text))
            }
        }
    }

    /// Parameter `p`, read from its info word.
    fn param(&self, p: u32) -> String {
        let word = self.info.param_word(p);
        match self.def.params[p as usize] {
            ElemType::U32 => format!("info[{word}]"),
            // A half float's word holds its exact `f32` value (see `InfoLayout`).
            ElemType::F16 | ElemType::BF16 => format!("f16(bitcast<f32>(info[{word}]))"),
            other => format!("bitcast<{}>(info[{word}])", wgsl_type(other)),
        }
    }

    /// A comparison, folded to a constant when both sides are.
    fn comparison(&mut self, op: CmpOp, lhs: &Expr, rhs: &Expr) -> Value {
        let l = self.expr(lhs);
        let r = self.expr(rhs);
        if let (Some(a), Some(b)) = (l.scalar(), r.scalar()) {
            let b = semantics::compare(op, a, b);
            return Value {
                text: b.to_string(),
                constant: Some(Constant::Bool(b)),
            };
        }
        let elem = self.type_of(lhs);
        Value::runtime(self.compare(op, elem, &l.text, &r.text))
    }

    /// A call of `array`'s helper for `kind` with `args`; records that the helper is needed.
    fn access(&mut self, array: Array, kind: AccessKind, args: &[&Value]) -> String {
        self.used.insert((array, kind));
        let args: Vec<&str> = args.iter().map(|v| v.text.as_str()).collect();
        format!("{}({})", helper_name(kind, array), args.join(", "))
    }

    fn constant(&mut self, value: Scalar) -> Value {
        Value {
            text: literal(value, &mut self.helpers),
            constant: Some(Constant::Scalar(value)),
        }
    }

    /// `&&`/`||`: without loads on the right, WGSL's own short-circuit operator; with loads, an
    /// explicit branch so that they run only when the interpreter would evaluate them.
    fn logic(&mut self, op: LogicOp, lhs: &Expr, rhs: &Expr) -> Value {
        let l = self.expr(lhs);
        match (op, l.boolean()) {
            (LogicOp::And, Some(false)) | (LogicOp::Or, Some(true)) => return l,
            (_, Some(_)) => return self.expr(rhs),
            (_, None) => {}
        }
        let (wgsl_op, guard) = match op {
            LogicOp::And => ("&&", ""),
            LogicOp::Or => ("||", "!"),
        };
        if !has_load(rhs) {
            let r = self.expr(rhs);
            return match (op, r.boolean()) {
                (LogicOp::And, Some(true)) | (LogicOp::Or, Some(false)) => l,
                _ => Value::runtime(format!("({} {wgsl_op} {})", l.text, r.text)),
            };
        }
        let t = self.temp();
        self.line(&format!("var {t}: bool = {};", l.text));
        self.line(&format!("if {guard}{t} {{"));
        self.indent += 1;
        let r = self.expr(rhs);
        self.line(&format!("{t} = {};", r.text));
        self.indent -= 1;
        self.line("}");
        Value::runtime(t)
    }

    fn binary(&mut self, op: BinOp, elem: ElemType, l: &str, r: &str) -> String {
        let infix = |sym: &str| format!("({l} {sym} {r})");
        let call = |name: &str| format!("{name}({l}, {r})");
        match (op, elem) {
            (BinOp::Add, _) => infix("+"),
            (BinOp::Sub, _) => infix("-"),
            (BinOp::Mul, _) => infix("*"),
            (BinOp::Div, ElemType::U32) => self.need(Helper::DivU32, call("div_u32")),
            (BinOp::Div, ElemType::I32) => self.need(Helper::DivI32, call("div_i32")),
            (BinOp::Div, ElemType::F32 | ElemType::F16 | ElemType::BF16) => infix("/"),
            (BinOp::Rem, ElemType::U32) => self.need(Helper::RemU32, call("rem_u32")),
            (BinOp::Rem, ElemType::I32) => self.need(Helper::RemI32, call("rem_i32")),
            (BinOp::Rem, ElemType::F32 | ElemType::F16 | ElemType::BF16) => infix("%"),
            (BinOp::Min, ElemType::F32) => self.need(Helper::MinF32, call("min_f32")),
            (BinOp::Max, ElemType::F32) => self.need(Helper::MaxF32, call("max_f32")),
            (BinOp::Min, ElemType::F16 | ElemType::BF16) => {
                self.need(Helper::MinF16, call("min_f16"))
            }
            (BinOp::Max, ElemType::F16 | ElemType::BF16) => {
                self.need(Helper::MaxF16, call("max_f16"))
            }
            (BinOp::Min, _) => format!("min({l}, {r})"),
            (BinOp::Max, _) => format!("max({l}, {r})"),
            (BinOp::Pow, _) => call("pow"),
            (BinOp::Atan2, _) => call("atan2"),
            (BinOp::BitAnd, _) => infix("&"),
            (BinOp::BitOr, _) => infix("|"),
            (BinOp::BitXor, _) => infix("^"),
            (BinOp::Shl | BinOp::Shr, _) => {
                let sym = if op == BinOp::Shl { "<<" } else { ">>" };
                let amount = if elem == ElemType::I32 {
                    format!("(bitcast<u32>({r}) & 31u)")
                } else {
                    format!("({r} & 31u)")
                };
                format!("({l} {sym} {amount})")
            }
        }
    }

    /// Records that `helper` (and the helpers it calls) must be emitted; returns `text`.
    fn need<T>(&mut self, helper: Helper, text: T) -> T {
        if matches!(
            helper,
            Helper::MinF32 | Helper::MaxF32 | Helper::F32ToU32 | Helper::F32ToI32
        ) {
            self.helpers.insert(Helper::IsNan);
        }
        if matches!(helper, Helper::MinF16 | Helper::MaxF16) {
            self.helpers.insert(Helper::IsNanF16);
        }
        if helper == Helper::IsNanF16 {
            self.helpers.insert(Helper::IsNan);
        }
        self.helpers.insert(helper);
        text
    }

    fn compare(&mut self, op: CmpOp, elem: ElemType, l: &str, r: &str) -> String {
        let sym = match op {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        };
        let is_nan = match elem {
            ElemType::F32 => self.need(Helper::IsNan, "is_nan"),
            ElemType::F16 | ElemType::BF16 => self.need(Helper::IsNanF16, "is_nan_f16"),
            ElemType::U32 | ElemType::I32 => return format!("({l} {sym} {r})"),
        };
        // NaN is unordered: every comparison but `!=` is false. Tested on the bits, so a
        // driver that assumes finite floats cannot fold it away.
        match op {
            CmpOp::Ne => format!("({is_nan}({l}) || {is_nan}({r}) || ({l} != {r}))"),
            _ => format!("(!{is_nan}({l}) && !{is_nan}({r}) && ({l} {sym} {r}))"),
        }
    }

    fn cast(&mut self, from: ElemType, to: ElemType, v: &str) -> String {
        if from == to {
            return v.to_owned();
        }
        // Half floats convert through their exact `f32` value, and integers to a half float
        // through `f32`, as the IR defines.
        if from.is_half() {
            let wide = format!("f32({v})");
            return self.cast(ElemType::F32, to, &wide);
        }
        if to.is_half() {
            let wide = self.cast(from, ElemType::F32, v);
            return format!("{}({wide})", wgsl_type(to));
        }
        match (from, to) {
            (ElemType::U32, ElemType::I32) | (ElemType::I32, ElemType::U32) => {
                format!("bitcast<{}>({v})", wgsl_type(to))
            }
            (ElemType::U32 | ElemType::I32, ElemType::F32) => format!("f32({v})"),
            (ElemType::F32, ElemType::U32) => {
                self.need(Helper::F32ToU32, format!("f32_to_u32({v})"))
            }
            (ElemType::F32, ElemType::I32) => {
                self.need(Helper::F32ToI32, format!("f32_to_i32({v})"))
            }
            // The same type: a no-op.
            _ => v.to_owned(),
        }
    }

    /// The element type of a validated scalar expression.
    fn type_of(&self, expr: &Expr) -> ElemType {
        // Validated kernels never take the type of a boolean expression.
        self.def.elem_type_of(expr).unwrap_or(ElemType::U32)
    }

    /// The whole WGSL module: header, bindings and shared arrays, helpers and accessors, then
    /// the entry point around the lowered body.
    fn module(&self) -> String {
        let mut out = String::new();
        if lockstep::kernel::uses_half(self.def) {
            out.push_str("enable f16;\n");
        }
        let mode = if self.checked { "checked" } else { "unchecked" };
        let _ = writeln!(out, "// Lockstep kernel `{}` ({mode}).", self.def.name);
        let _ = writeln!(
            out,
            "// info: [0] kernel id; per binding [1 + 2b] offset, [2 + 2b] length (elements); then parameters."
        );
        self.declarations(&mut out);
        out.push('\n');
        self.functions(&mut out);
        self.entry_point(&mut out);
        out
    }

    /// One storage binding per group of arrays, the `info` binding after them, the workgroup
    /// arrays and the vote's flags, the local arrays, and the opaque zero when a literal needs
    /// it.
    fn declarations(&self, out: &mut String) {
        let groups = self.groups();
        for (slot, group) in groups.iter().enumerate() {
            let ty = wgsl_type(group.elem);
            let array = if group.atomic {
                format!("array<atomic<{ty}>>")
            } else {
                format!("array<{ty}>")
            };
            let access = if group.writable { "read_write" } else { "read" };
            let _ = writeln!(
                out,
                "@group(0) @binding({slot}) var<storage, {access}> {}: {array};",
                self.var_of(group.first)
            );
        }
        let next = groups.len();
        let _ = writeln!(
            out,
            "@group(0) @binding({next}) var<storage, read> info: array<u32, {}>;",
            self.info.words()
        );
        for (s, decl) in self.def.shared.iter().enumerate() {
            let ty = wgsl_type(decl.elem);
            let shared = Array::Shared(lockstep::kernel::SharedId(s as u32));
            let element = if self.is_atomic(shared) {
                format!("atomic<{ty}>")
            } else {
                ty.to_owned()
            };
            let _ = writeln!(out, "var<workgroup> s{s}: array<{element}, {}>;", decl.len);
        }
        if self.mirror {
            out.push_str(mirror::VOTE_VARS);
        }
        // `private` variables are per invocation and zero at its start, as local arrays are.
        for (l, decl) in self.def.local_arrays.iter().enumerate() {
            let ty = wgsl_type(decl.elem);
            let _ = writeln!(out, "var<private> l{l}: array<{ty}, {}>;", decl.len);
        }
        if self.helpers.contains(&Helper::OpaqueZero) {
            out.push_str(
                "// Zero that WGSL constant evaluation cannot see (non-finite literals).\nvar<private> opaque_zero: u32;\n",
            );
        }
    }

    /// The helpers the body called, the fault record's writer (checked kernels that access
    /// arrays) and one accessor per array and kind of access the body used.
    fn functions(&self, out: &mut String) {
        for &helper in &self.helpers {
            let text = helper_text(helper);
            if !text.is_empty() {
                out.push_str(text);
                out.push('\n');
            }
        }
        if self.mirror {
            out.push_str(mirror::VOTE_FN);
            out.push('\n');
        }
        if self.checked && !self.used.is_empty() {
            out.push_str(&self.fault_fn());
            out.push('\n');
        }
        for &(array, kind) in &self.used {
            out.push_str(&self.access_fn(array, kind));
            out.push('\n');
        }
    }

    /// `main` with its builtins, the zeroed locals and the lowered body.
    fn entry_point(&self, out: &mut String) {
        let [x, y, z] = self.def.workgroup_size;
        let _ = writeln!(out, "@compute @workgroup_size({x}, {y}, {z})");
        out.push_str(
            "fn main(\n    @builtin(global_invocation_id) gid: vec3<u32>,\n    @builtin(local_invocation_id) lid: vec3<u32>,\n    @builtin(workgroup_id) wid: vec3<u32>,\n    @builtin(num_workgroups) nwg: vec3<u32>,\n) {\n",
        );
        for (i, &elem) in self.def.locals.iter().enumerate() {
            let zero = literal(semantics::zero(elem), &mut BTreeSet::new());
            let _ = writeln!(out, "    var v{i}: {} = {zero};", wgsl_type(elem));
        }
        if self.mirror {
            out.push_str("    var ls_done: bool = false;\n");
        }
        out.push_str(&self.body);
        out.push_str("}\n");
    }

    fn fault_fn(&self) -> String {
        let record = self.slot(fault_array(self.def));
        let at = |word: usize| format!("{}[base + {word}u]", record.var);
        let (zero, one) = (record.as_stored("0u"), record.as_stored("1u"));
        format!(
            "// First fault wins: the invocation whose compare-and-swap sets the flag fills the record.
fn report_fault(binding: u32, index: u32) {{
    let base = {base};
    loop {{
        let r = atomicCompareExchangeWeak(&{flag}, {zero}, {one});
        if r.exchanged {{
            atomicStore(&{kernel}, {kid});
            atomicStore(&{binding}, {binding_value});
            atomicStore(&{index}, {index_value});
            break;
        }}
        if r.old_value != {zero} {{ break; }}
    }}
}}
",
            flag = at(FaultRecord::FLAG),
            kernel = at(FaultRecord::KERNEL),
            binding = at(FaultRecord::BINDING),
            index = at(FaultRecord::INDEX),
            base = record.offset.as_deref().unwrap_or("0u"),
            kid = record.as_stored(&format!("info[{}]", InfoLayout::KERNEL_ID)),
            binding_value = record.as_stored("binding"),
            index_value = record.as_stored("index"),
        )
    }

    /// How helpers reach `array`'s element `i`.
    fn slot(&self, array: Array) -> Slot {
        match array {
            Array::Binding(b) => {
                let group = self.group_of(b.0);
                let off = InfoLayout::offset_word(b.0);
                Slot {
                    var: self.var_of(b.0),
                    offset: Some(format!("info[{off}]")),
                    len: format!("info[{}]", InfoLayout::len_word(b.0)),
                    elem: self.member(b.0).0,
                    stored: group.elem,
                    atomic: group.atomic,
                }
            }
            Array::Shared(s) => {
                let decl = self.def.shared[s.0 as usize];
                Slot {
                    var: format!("s{}", s.0),
                    offset: None,
                    len: format!("{}u", decl.len),
                    elem: decl.elem,
                    stored: decl.elem,
                    atomic: self.is_atomic(array),
                }
            }
            Array::Local(l) => {
                let decl = self.def.local_arrays[l.0 as usize];
                Slot {
                    var: format!("l{}", l.0),
                    offset: None,
                    len: format!("{}u", decl.len),
                    elem: decl.elem,
                    stored: decl.elem,
                    atomic: false,
                }
            }
        }
    }

    fn access_fn(&self, array: Array, kind: AccessKind) -> String {
        let slot = self.slot(array);
        let name = helper_name(kind, array);
        let zero = literal(semantics::zero(slot.elem), &mut BTreeSet::new());
        let (signature, body) = access_parts(&slot, kind, &name);
        let returns = !matches!(kind, AccessKind::Store);
        let indented = |depth: &str| body.replace('\n', &format!("\n{depth}"));
        if !self.checked {
            return format!("{signature} {{\n    {}\n}}\n", indented("    "));
        }
        let early_return = if returns { "" } else { "\n        return;" };
        let word = FaultRecord::array_word(array);
        let mut text = format!(
            "{signature} {{\n    if i < {} {{\n        {}{early_return}\n    }}\n    report_fault({word}u, i);\n",
            slot.len,
            indented("        ")
        );
        if returns {
            let _ = writeln!(text, "    return {zero};");
        }
        text.push_str("}\n");
        text
    }
}

/// The signature and the unchecked body of `slot`'s helper `name` for `kind`: plain or atomic
/// loads and stores (an atomic array is accessed atomically throughout), atomic operations
/// returning the old value, and compare-exchange as a loop over WGSL's weak one.
fn access_parts(slot: &Slot, kind: AccessKind, name: &str) -> (String, String) {
    let ty = wgsl_type(slot.elem);
    let place = &slot.at("i");
    match kind {
        AccessKind::Load => {
            let read = if slot.atomic {
                format!("atomicLoad(&{place})")
            } else {
                place.clone()
            };
            (
                format!("fn {name}(i: u32) -> {ty}"),
                format!("return {};", slot.as_member(&read)),
            )
        }
        AccessKind::Store => {
            let v = slot.as_stored("v");
            let write = if slot.atomic {
                format!("atomicStore(&{place}, {v});")
            } else {
                format!("{place} = {v};")
            };
            (format!("fn {name}(i: u32, v: {ty})"), write)
        }
        // Two's-complement addition and exchange give the same bits for `i32` and `u32`;
        // `min` and `max` run on the member's own type (see `groups`).
        AccessKind::Atomic(op) => {
            let f = match op {
                AtomicOp::Add => "atomicAdd",
                AtomicOp::Min => "atomicMin",
                AtomicOp::Max => "atomicMax",
                AtomicOp::Exchange => "atomicExchange",
                AtomicOp::And => "atomicAnd",
                AtomicOp::Or => "atomicOr",
                AtomicOp::Xor => "atomicXor",
            };
            let old = format!("{f}(&{place}, {})", slot.as_stored("v"));
            (
                format!("fn {name}(i: u32, v: {ty}) -> {ty}"),
                format!("return {};", slot.as_member(&old)),
            )
        }
        AccessKind::CompareExchange => {
            let e = slot.as_stored("expected");
            (
                format!("fn {name}(i: u32, expected: {ty}, v: {ty}) -> {ty}"),
                [
                    format!("var old: {};", wgsl_type(slot.stored)),
                    "loop {".to_owned(),
                    format!(
                        "    let r = atomicCompareExchangeWeak(&{place}, {e}, {});",
                        slot.as_stored("v")
                    ),
                    "    old = r.old_value;".to_owned(),
                    format!("    if r.exchanged || old != {e} {{ break; }}"),
                    "}".to_owned(),
                    format!("return {};", slot.as_member("old")),
                ]
                .join("\n"),
            )
        }
    }
}

fn builtin(b: Builtin) -> &'static str {
    use lockstep::kernel::Axis::{X, Y, Z};
    match b {
        Builtin::GlobalId(X) => "gid.x",
        Builtin::GlobalId(Y) => "gid.y",
        Builtin::GlobalId(Z) => "gid.z",
        Builtin::LocalId(X) => "lid.x",
        Builtin::LocalId(Y) => "lid.y",
        Builtin::LocalId(Z) => "lid.z",
        Builtin::WorkgroupId(X) => "wid.x",
        Builtin::WorkgroupId(Y) => "wid.y",
        Builtin::WorkgroupId(Z) => "wid.z",
        Builtin::NumWorkgroups(X) => "nwg.x",
        Builtin::NumWorkgroups(Y) => "nwg.y",
        Builtin::NumWorkgroups(Z) => "nwg.z",
    }
}

fn has_load(expr: &Expr) -> bool {
    match expr {
        Expr::Load { .. } => true,
        Expr::Lit(_)
        | Expr::Bool(_)
        | Expr::Builtin(_)
        | Expr::Param(_)
        | Expr::Var(_)
        | Expr::Len(_) => false,
        Expr::Binary { lhs, rhs, .. }
        | Expr::Cmp { lhs, rhs, .. }
        | Expr::Logic { lhs, rhs, .. } => has_load(lhs) || has_load(rhs),
        Expr::Not(e) | Expr::Neg(e) | Expr::Unary { value: e, .. } => has_load(e),
        Expr::Fma { a, b, c } => has_load(a) || has_load(b) || has_load(c),
        Expr::Select {
            cond,
            if_true,
            if_false,
        } => has_load(cond) || has_load(if_true) || has_load(if_false),
        Expr::Cast { value, .. } | Expr::Bitcast { value, .. } | Expr::Bits { value, .. } => {
            has_load(value)
        }
    }
}

/// Wraps `text` in parentheses unless it already is one group.
fn paren(text: &str) -> String {
    if text.starts_with('(') && text.ends_with(')') && balanced_outer(text) {
        text.to_owned()
    } else {
        format!("({text})")
    }
}

/// Whether the first parenthesis of `text` closes at its last character.
fn balanced_outer(text: &str) -> bool {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i != text.len() - 1 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

fn helper_text(helper: Helper) -> &'static str {
    match helper {
        Helper::DivU32 => {
            "fn div_u32(a: u32, b: u32) -> u32 {\n    if b == 0u { return a; }\n    return a / b;\n}\n"
        }
        Helper::RemU32 => {
            "fn rem_u32(a: u32, b: u32) -> u32 {\n    if b == 0u { return 0u; }\n    return a % b;\n}\n"
        }
        Helper::DivI32 => {
            "fn div_i32(a: i32, b: i32) -> i32 {\n    if b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i) { return a; }\n    return a / b;\n}\n"
        }
        Helper::RemI32 => {
            "fn rem_i32(a: i32, b: i32) -> i32 {\n    if b == 0i || (a == bitcast<i32>(0x80000000u) && b == -1i) { return 0i; }\n    return a % b;\n}\n"
        }
        Helper::IsNan => {
            "fn is_nan(x: f32) -> bool {\n    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;\n}\n"
        }
        Helper::IsNanF16 => "fn is_nan_f16(x: f16) -> bool {\n    return is_nan(f32(x));\n}\n",
        Helper::MinF16 => {
            "fn min_f16(a: f16, b: f16) -> f16 {\n    if is_nan_f16(a) { return b; }\n    if is_nan_f16(b) { return a; }\n    return select(a, b, b < a);\n}\n"
        }
        Helper::MaxF16 => {
            "fn max_f16(a: f16, b: f16) -> f16 {\n    if is_nan_f16(a) { return b; }\n    if is_nan_f16(b) { return a; }\n    return select(a, b, b > a);\n}\n"
        }
        Helper::MinF32 => {
            "fn min_f32(a: f32, b: f32) -> f32 {\n    if is_nan(a) { return b; }\n    if is_nan(b) { return a; }\n    return select(a, b, b < a);\n}\n"
        }
        Helper::MaxF32 => {
            "fn max_f32(a: f32, b: f32) -> f32 {\n    if is_nan(a) { return b; }\n    if is_nan(b) { return a; }\n    return select(a, b, b > a);\n}\n"
        }
        Helper::F32ToU32 => {
            "// Saturating, NaN to zero (Rust's `as`).\nfn f32_to_u32(x: f32) -> u32 {\n    if is_nan(x) || x < 1.0f { return 0u; }\n    if x >= 4294967296.0f { return 4294967295u; }\n    return u32(x);\n}\n"
        }
        Helper::F32ToI32 => {
            "// Saturating, NaN to zero (Rust's `as`).\nfn f32_to_i32(x: f32) -> i32 {\n    if is_nan(x) { return 0i; }\n    if x >= 2147483648.0f { return 2147483647i; }\n    if x < -2147483648.0f { return bitcast<i32>(0x80000000u); }\n    return i32(x);\n}\n"
        }
        Helper::OpaqueZero => "",
    }
}

mod mirror;

#[cfg(test)]
mod tests;
