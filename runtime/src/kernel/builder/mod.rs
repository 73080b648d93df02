//! A builder that makes IR readable to write: a kernel reads like the maths it computes.
//!
//! ```
//! use lockstep::kernel::{Access, Axis, ElemType, KernelBuilder};
//!
//! let mut k = KernelBuilder::new("scale", [64, 1, 1]);
//! let data = k.binding(ElemType::F32, Access::ReadWrite);
//! let factor = k.param(ElemType::F32);
//! let i = k.global_id(Axis::X);
//! k.if_(i.lt(data.len()), |k| k.store(data, i, data.load(i) * factor));
//! let kernel = k.build()?; // validated, hashed, ready to launch
//! assert_eq!(kernel.name(), "scale");
//! # Ok::<(), lockstep::kernel::KernelError>(())
//! ```
//!
//! # Values are handles
//!
//! Expressions are [`Value`]s: `Copy` handles, so `i` is written wherever the maths has `i`.
//! A literal or a builtin is held in the value itself; any other value is an index into an
//! arena of nodes that its builder owns, plus the builder's id (a value is 16 bytes). The
//! arenas of the builders open on a thread live in a thread-local list (`arena.rs`), so that
//! an operator (`a * b`) records its node without a `&mut` to the builder: it finds the arena
//! by the id its operands carry. Each statement resolves its values into [`Expr`] trees when it
//! is added — a value used twice becomes two equal subtrees, as `.clone()` made them before —
//! so the IR that validation and every device lowering read is the tree it always was, and
//! [`build`](KernelBuilder::build) only validates.
//!
//! The alternatives cost more or caught less: `Rc` trees are `Clone`, not `Copy`; operators
//! that take `&mut KernelBuilder` do not read like the maths; plain indices without a builder
//! id would turn a value of one kernel used in another into a silently wrong kernel.
//!
//! # Misuse is reported, not panicked on
//!
//! A value, [`Var`], [`Binding`], [`Shared`] or [`LocalArray`] used in the kernel of another
//! builder, or after its builder was built or dropped, makes `build` fail with
//! [`KernelError::ForeignValue`], naming where it came from ([`ForeignOrigin`]). Several
//! builders may be open on one thread at once (a kernel built while building another): each
//! value carries its builder, so they do not mix. The one value with no builder of its own is
//! an operation on literals and builtins only (`Value::from(2u32) * 3u32`): it is recorded in
//! the most recently created builder still open. Builders and values are not `Send`: the
//! arenas are per thread.
//!
//! # Validated once
//!
//! `build` returns a [`Kernel`]: it validates the definition once, through [`Kernel::new`],
//! which stays the way to launch a hand-made [`KernelDef`] (and validates it).

mod arena;
mod handles;
mod value;

pub use arena::ForeignOrigin;
use arena::Registration;
pub use handles::{Binding, KernelArray, LocalArray, Shared, Var};
pub use value::Value;

use super::Kernel;
use super::ir::{
    Access, Array, AtomicOp, Axis, BindingDecl, BindingId, Builtin, ElemType, Expr, KernelDef,
    LocalArrayDecl, LocalArrayId, SharedDecl, SharedId, Stmt, VarId,
};
use super::validate::KernelError;
use arena::Node;

/// A kernel under construction. Statements go into the innermost open block (`if_`,
/// `for_range`, `while_`).
#[derive(Debug)]
pub struct KernelBuilder {
    def: KernelDef,
    /// Open statement blocks; the first is the kernel body. Never empty.
    blocks: Vec<Vec<Stmt>>,
    /// The first value, variable or array of another builder that a statement used.
    foreign: Option<KernelError>,
    registration: Registration,
}

impl KernelBuilder {
    /// Starts a kernel named `name` whose workgroups hold `workgroup_size` (`[x, y, z]`)
    /// invocations; [`build`](Self::build) checks the size.
    pub fn new(name: impl Into<String>, workgroup_size: [u32; 3]) -> Self {
        let name = name.into();
        Self {
            registration: Registration::open(&name),
            def: KernelDef {
                name,
                workgroup_size,
                bindings: Vec::new(),
                params: Vec::new(),
                locals: Vec::new(),
                shared: Vec::new(),
                local_arrays: Vec::new(),
                body: Vec::new(),
            },
            blocks: vec![Vec::new()],
            foreign: None,
        }
    }

    /// Declares the next buffer argument, an array of `elem` the kernel may write when `access` is
    /// [`Access::ReadWrite`]; bindings are numbered in declaration order, as launches pass them.
    pub fn binding(&mut self, elem: ElemType, access: Access) -> Binding {
        self.def.bindings.push(BindingDecl { elem, access });
        Binding {
            id: BindingId(self.def.bindings.len() as u32 - 1),
            owner: self.registration.id(),
        }
    }

    /// Declares a scalar launch parameter and returns the value that reads it.
    pub fn param(&mut self, elem: ElemType) -> Value {
        self.def.params.push(elem);
        let param = self.def.params.len() as u32 - 1;
        Value::leaf(self.registration.id(), Node::Param(param))
    }

    /// Declares a workgroup-shared array of `len` elements (undefined until written).
    pub fn shared(&mut self, elem: ElemType, len: u32) -> Shared {
        self.def.shared.push(SharedDecl { elem, len });
        Shared {
            id: SharedId(self.def.shared.len() as u32 - 1),
            len,
            owner: self.registration.id(),
        }
    }

    /// Declares a per-invocation array of `len` elements, each zero at kernel entry.
    pub fn local_array(&mut self, elem: ElemType, len: u32) -> LocalArray {
        self.def.local_arrays.push(LocalArrayDecl { elem, len });
        LocalArray {
            id: LocalArrayId(self.def.local_arrays.len() as u32 - 1),
            len,
            owner: self.registration.id(),
        }
    }

    /// Declares a local variable (zero at kernel entry) and assigns `init` to it here.
    pub fn var(&mut self, elem: ElemType, init: impl Into<Value>) -> Var {
        let var = self.local(elem);
        self.assign(var, init);
        var
    }

    /// Declares a local variable without assigning it.
    fn local(&mut self, elem: ElemType) -> Var {
        self.def.locals.push(elem);
        Var {
            id: VarId(self.def.locals.len() as u32 - 1),
            owner: self.registration.id(),
        }
    }

    /// The invocation's index in the whole grid on `axis` (`workgroup_id * workgroup_size +
    /// local_id`).
    pub fn global_id(&self, axis: Axis) -> Value {
        Value::builtin(Builtin::GlobalId(axis))
    }

    /// The invocation's index in its workgroup on `axis`.
    pub fn local_id(&self, axis: Axis) -> Value {
        Value::builtin(Builtin::LocalId(axis))
    }

    /// The workgroup's index in the grid on `axis`.
    pub fn workgroup_id(&self, axis: Axis) -> Value {
        Value::builtin(Builtin::WorkgroupId(axis))
    }

    /// Number of workgroups of the launch on `axis`.
    pub fn num_workgroups(&self, axis: Axis) -> Value {
        Value::builtin(Builtin::NumWorkgroups(axis))
    }

    /// Remembers the first use of another builder's value, variable or array, which `build`
    /// reports.
    fn refuse(&mut self, what: &'static str, origin: ForeignOrigin) {
        if self.foreign.is_none() {
            self.foreign = Some(KernelError::ForeignValue {
                kernel: self.def.name.clone(),
                what,
                origin,
            });
        }
    }

    /// `value` as a tree of this kernel (a placeholder if it is another builder's).
    fn expr(&mut self, value: impl Into<Value>) -> Expr {
        self.registration
            .resolve(value.into())
            .unwrap_or_else(|origin| {
                self.refuse("value", origin);
                Expr::Bool(false)
            })
    }

    fn array(&mut self, array: impl KernelArray) -> Array {
        let (array, owner) = array.array();
        if let Some(origin) = owner.and_then(|owner| self.registration.foreign(owner)) {
            self.refuse("array", origin);
        }
        array
    }

    fn var_id(&mut self, var: Var) -> VarId {
        if let Some(origin) = self.registration.foreign(var.owner) {
            self.refuse("variable", origin);
        }
        var.id
    }

    fn push(&mut self, stmt: Stmt) {
        self.blocks
            .last_mut()
            .expect("the kernel body block is never popped")
            .push(stmt);
    }

    fn block(&mut self, body: impl FnOnce(&mut Self)) -> Vec<Stmt> {
        self.blocks.push(Vec::new());
        body(self);
        self.blocks
            .pop()
            .expect("the block pushed above is still open")
    }

    /// `var = value`.
    pub fn assign(&mut self, var: Var, value: impl Into<Value>) {
        let stmt = Stmt::Assign {
            var: self.var_id(var),
            value: self.expr(value),
        };
        self.push(stmt);
    }

    /// `array[index] = value`; `array` must be writable.
    pub fn store(
        &mut self,
        array: impl KernelArray,
        index: impl Into<Value>,
        value: impl Into<Value>,
    ) {
        let stmt = Stmt::Store {
            array: self.array(array),
            index: self.expr(index),
            value: self.expr(value),
        };
        self.push(stmt);
    }

    /// `array[index] += value`, atomically, discarding the previous value.
    pub fn atomic_add(
        &mut self,
        array: impl KernelArray,
        index: impl Into<Value>,
        value: impl Into<Value>,
    ) {
        self.atomic(AtomicOp::Add, array, index, value);
    }

    /// `array[index] = op(array[index], value)`, atomically, discarding the previous value.
    pub fn atomic(
        &mut self,
        op: AtomicOp,
        array: impl KernelArray,
        index: impl Into<Value>,
        value: impl Into<Value>,
    ) {
        let stmt = Stmt::Atomic {
            op,
            array: self.array(array),
            index: self.expr(index),
            value: self.expr(value),
            old: None,
        };
        self.push(stmt);
    }

    /// Like [`atomic`](Self::atomic); returns a fresh variable holding the previous value.
    pub fn fetch_atomic(
        &mut self,
        op: AtomicOp,
        array: impl KernelArray,
        index: impl Into<Value>,
        value: impl Into<Value>,
    ) -> Var {
        let array = self.array(array);
        let old = self.local(self.elem_or_u32(array));
        let stmt = Stmt::Atomic {
            op,
            array,
            index: self.expr(index),
            value: self.expr(value),
            old: Some(old.id),
        };
        self.push(stmt);
        old
    }

    /// Atomically replaces `array[index]` by `value` if it equals `expected`; returns a fresh
    /// variable holding the previous value (equal to `expected` exactly when it replaced).
    pub fn compare_exchange(
        &mut self,
        array: impl KernelArray,
        index: impl Into<Value>,
        expected: impl Into<Value>,
        value: impl Into<Value>,
    ) -> Var {
        let array = self.array(array);
        let old = self.local(self.elem_or_u32(array));
        let stmt = Stmt::CompareExchange {
            array,
            index: self.expr(index),
            expected: self.expr(expected),
            value: self.expr(value),
            old: old.id,
        };
        self.push(stmt);
        old
    }

    /// The element type of `array`; `u32` for an undeclared one, which `build` rejects.
    fn elem_or_u32(&self, array: Array) -> ElemType {
        self.def.elem_of(array).unwrap_or(ElemType::U32)
    }

    /// `workgroup_barrier`: see the memory model in the IR's module doc.
    pub fn workgroup_barrier(&mut self) {
        self.push(Stmt::Barrier);
    }

    /// `while cond { body }`.
    pub fn while_(&mut self, cond: impl Into<Value>, body: impl FnOnce(&mut Self)) {
        let cond = self.expr(cond);
        let body = self.block(body);
        self.push(Stmt::While { cond, body });
    }

    /// Leaves the innermost loop.
    pub fn break_(&mut self) {
        self.push(Stmt::Break);
    }

    /// Ends the innermost loop's iteration.
    pub fn continue_(&mut self) {
        self.push(Stmt::Continue);
    }

    /// Ends the invocation (WGSL's `return`); it counts as arrived at every later barrier of
    /// its workgroup.
    pub fn return_(&mut self) {
        self.push(Stmt::Return);
    }

    /// `if cond { then_body }`.
    pub fn if_(&mut self, cond: impl Into<Value>, then_body: impl FnOnce(&mut Self)) {
        self.if_else(cond, then_body, |_| {});
    }

    /// `if cond { then_body } else { else_body }`.
    pub fn if_else(
        &mut self,
        cond: impl Into<Value>,
        then_body: impl FnOnce(&mut Self),
        else_body: impl FnOnce(&mut Self),
    ) {
        let cond = self.expr(cond);
        let then_body = self.block(then_body);
        let else_body = self.block(else_body);
        self.push(Stmt::If {
            cond,
            then_body,
            else_body,
        });
    }

    /// `for i in start..end { body(i) }` with a fresh loop variable of type `elem`.
    pub fn for_range(
        &mut self,
        elem: ElemType,
        start: impl Into<Value>,
        end: impl Into<Value>,
        body: impl FnOnce(&mut Self, Value),
    ) {
        let var = self.local(elem);
        let (start, end) = (self.expr(start), self.expr(end));
        let body = self.block(|k| body(k, var.get()));
        self.push(Stmt::For {
            var: var.id,
            start,
            end,
            body,
        });
    }

    /// Validates the kernel, once, and returns it ready to launch.
    ///
    /// # Errors
    /// [`KernelError::ForeignValue`] when a statement used a value, variable or array of
    /// another builder; otherwise whatever [`validate`](crate::kernel::validate) finds.
    pub fn build(self) -> Result<Kernel, KernelError> {
        let Self {
            mut def,
            mut blocks,
            foreign,
            registration,
        } = self;
        drop(registration);
        if let Some(error) = foreign {
            return Err(error);
        }
        debug_assert_eq!(blocks.len(), 1, "closures close every nested block");
        def.body = blocks.pop().unwrap_or_default();
        Kernel::new(def)
    }
}

#[cfg(test)]
mod tests;
