//! When an expression is computed: at naga's `Emit` into fresh locals, or inlined where it is
//! used.
//!
//! **Invariant:** an inlined expression reads only memory no statement of the kernel writes
//! (read-only bindings, the info words) and locals that materialized expressions assign once
//! per execution of their `Emit`, so computing it at its use gives the value WGSL computes at
//! its `Emit`. Hence every load of a local, of a workgroup array, of a storage buffer the
//! kernel writes and of an atomic is materialized; so is every expression used more than once
//! (computing it once), except leaves.

use lockstep::kernel::{Access, Array, AtomicOp, Expr, Stmt, VarId};
use naga::{Expression, Handle, TypeInner};

use super::Translator;
use super::bindings::{ArrayOf, GlobalPlace};
use super::error::Translation;
use super::place::Place;
use super::types::{ScalarTy, Value, zero};

impl Translator<'_> {
    /// The statements computing the expressions of an `Emit` range that are materialized.
    pub(crate) fn emit(
        &mut self,
        range: naga::Range<Expression>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        for h in range {
            if self.materializes(h) {
                self.materialize(h, out)?;
            }
        }
        Ok(())
    }

    fn materializes(&self, h: Handle<Expression>) -> bool {
        let used = self.info[h].ref_count;
        if used == 0
            || matches!(
                self.type_of(h),
                TypeInner::Pointer { .. } | TypeInner::ValuePointer { .. }
            )
        {
            return false;
        }
        match self.function.expressions[h] {
            Expression::Load { pointer } => self.reads_written_memory(pointer),
            ref e => used > 1 && !is_leaf(e),
        }
    }

    /// Whether `pointer` points into memory some statement of the kernel writes (or an atomic).
    fn reads_written_memory(&self, pointer: Handle<Expression>) -> bool {
        if matches!(self.pointee(pointer), Some(TypeInner::Atomic(_))) {
            return true;
        }
        match self.root_global(pointer) {
            Some(global) => match &self.globals.places[&global] {
                GlobalPlace::Info => false,
                GlobalPlace::Single(_) => true,
                GlobalPlace::Array(of) => self.writable(of.array),
            },
            None => true,
        }
    }

    /// Whether a statement of the kernel may write `array` (every shared and local array may).
    fn writable(&self, array: Array) -> bool {
        match array {
            Array::Shared(_) | Array::Local(_) => true,
            Array::Binding(b) => self.def.bindings[b.0 as usize].access == Access::ReadWrite,
        }
    }

    fn pointee(&self, pointer: Handle<Expression>) -> Option<&TypeInner> {
        match *self.type_of(pointer) {
            TypeInner::Pointer { base, .. } => Some(&self.module.types[base].inner),
            _ => None,
        }
    }

    /// Computes `h` into its locals (the same ones at every emission) and records how it
    /// reads back.
    pub(crate) fn materialize(
        &mut self,
        h: Handle<Expression>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        if let Expression::Load { pointer } = self.function.expressions[h] {
            return self.load_into(h, pointer, out);
        }
        let value = self.compute(h)?;
        self.assign_slots(h, value, out);
        Ok(())
    }

    /// Loads what `pointer` points at into `h`'s locals: an atomic element by an atomic add
    /// of zero (whose old value is the load), anything else by a plain load.
    pub(crate) fn load_into(
        &mut self,
        h: Handle<Expression>,
        pointer: Handle<Expression>,
        out: &mut Vec<Stmt>,
    ) -> Translation<()> {
        let place = self.place(pointer)?;
        match (&place, self.load(&place)?) {
            (_, Some(value)) => self.assign_slots(h, value, out),
            (Place::Element { of, first }, None) => self.atomic_load(h, *of, first.clone(), out),
            (_, None) => {
                return Err(self.refuse(
                    super::error::Construct::Expression("Load".to_owned()),
                    "an atomic load of a lane",
                ));
            }
        }
        Ok(())
    }

    /// Assigns `value` to `h`'s locals and records them as `h`'s value.
    pub(crate) fn assign_slots(
        &mut self,
        h: Handle<Expression>,
        value: Value,
        out: &mut Vec<Stmt>,
    ) {
        let vars = self.slots_of(h, &value);
        out.extend(super::place::assign(&vars, &value));
        self.record(h, value.ty, &vars);
    }

    /// `h`'s locals, made at its first emission.
    pub(crate) fn slots_of(&mut self, h: Handle<Expression>, value: &Value) -> Vec<VarId> {
        if let Some(vars) = self.slots.get(&h) {
            return vars.clone();
        }
        let vars: Vec<VarId> = value
            .lanes
            .iter()
            .map(|_| self.fresh_local(value.ty.stored()))
            .collect();
        self.slots.insert(h, vars.clone());
        vars
    }

    /// Records that `h` reads as locals `vars`.
    pub(crate) fn record(&mut self, h: Handle<Expression>, ty: ScalarTy, vars: &[VarId]) {
        let lanes = vars
            .iter()
            .map(|&v| Translator::read_local(ty, v))
            .collect();
        self.materialized.insert(h, Value { ty, lanes });
    }

    /// `atomicLoad`: an atomic add of zero, whose old value is the load.
    fn atomic_load(
        &mut self,
        h: Handle<Expression>,
        of: ArrayOf,
        index: Expr,
        out: &mut Vec<Stmt>,
    ) {
        let zero = zero(of.ty);
        let vars = self.slots_of(h, &Value::scalar(of.ty, zero.clone()));
        out.push(Stmt::Atomic {
            op: AtomicOp::Add,
            array: of.array,
            index,
            value: zero,
            old: Some(vars[0]),
        });
        self.record(h, of.ty, &vars);
    }
}

/// Expressions cheaper to repeat than to hold in a local.
fn is_leaf(expression: &Expression) -> bool {
    matches!(
        expression,
        Expression::Literal(_)
            | Expression::Constant(_)
            | Expression::ZeroValue(_)
            | Expression::FunctionArgument(_)
            | Expression::GlobalVariable(_)
            | Expression::LocalVariable(_)
    )
}
