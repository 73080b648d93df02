//! WGSL, as cubecl-wgpu's `WgslCompiler` emits it and naga parses it, translated into a
//! Lockstep [`KernelDef`].
//!
//! The translation is exact or refused: every construct below either maps to IR whose
//! semantics are WGSL's bit for bit (or, for transcendental functions, within WGSL's accuracy
//! bounds, as Lockstep's IR states), or is an [`Unsupported`] naming it.
//!
//! - **Values** are lanes (`types::Value`): a vector becomes one expression per lane, so
//!   `array<vec4<f32>>` is an `f32` binding whose element `i*4 + k` is lane `k` of line `i`.
//! - **Evaluation order** follows naga's `Emit` statements: an expression that reads memory
//!   the kernel writes (a local, a workgroup array, a written storage buffer, an atomic), or
//!   that is used more than once, is computed into fresh locals where naga emits it
//!   (`materialize.rs`); every other expression is pure and inlined where it is used.
//! - **Booleans** held across statements live in `u32` locals (1 for true).
//! - **Bindings** (`bindings.rs`): storage buffer `@binding(k)` is launch resource `k`,
//!   read-only unless the kernel stores to it; the info struct is one read-only `u32` binding
//!   of the info words (plus an `f32` view of the same words when it holds `f32` scalars).

mod bindings;
mod error;
mod expr;
mod materialize;
mod math;
mod ops;
mod place;
mod stmt;
mod types;

use std::collections::HashMap;

use lockstep::kernel::{Array, ElemType, Expr, KernelDef, LocalArrayDecl, LocalArrayId, VarId};
use naga::valid::FunctionInfo;
use naga::{Expression, Function, Handle, LocalVariable, Module, ShaderStage};

pub use bindings::{BindingSource, LaunchPlan};
pub use error::{Construct, Translation, Unsupported};

use bindings::{ArrayOf, Globals};
use types::{ScalarTy, Value};

/// A translated kernel: its definition and what each of its bindings takes at launch.
#[derive(Clone, Debug)]
pub struct Translated {
    /// The kernel, not yet validated.
    pub def: KernelDef,
    /// Where each binding of `def` comes from.
    pub plan: LaunchPlan,
}

/// Translates the one compute entry point of `module` (validated, with `info` its analysis).
///
/// # Errors
/// [`Unsupported`] naming the first construct the translator cannot run exactly.
pub fn translate(module: &Module, info: &naga::valid::ModuleInfo) -> Translation<Translated> {
    let [entry] = module.entry_points.as_slice() else {
        return Err(Unsupported {
            kernel: "?".to_owned(),
            construct: Construct::Statement("entry points".to_owned()),
            detail: format!("{} entry points, one expected", module.entry_points.len()),
        });
    };
    let mut translator = Translator::new(module, &entry.function, info.get_entry_point(0));
    translator.kernel = entry.name.clone();
    translator.workgroup_size = entry.workgroup_size;
    if entry.stage != ShaderStage::Compute {
        return Err(translator.refuse(
            Construct::Statement(format!("{:?} entry point", entry.stage)),
            "only compute kernels run on Lockstep",
        ));
    }
    translator.run()
}

/// The translation of one entry point: what has been declared so far and how each naga
/// handle maps onto it.
pub(crate) struct Translator<'a> {
    kernel: String,
    module: &'a Module,
    function: &'a Function,
    info: &'a FunctionInfo,
    workgroup_size: [u32; 3],
    def: KernelDef,
    globals: Globals,
    /// Each local variable's lanes.
    locals: HashMap<Handle<LocalVariable>, Vec<VarId>>,
    /// Each function-scope array, as a Lockstep local array.
    local_arrays: HashMap<Handle<LocalVariable>, ArrayOf>,
    /// Each materialized expression's locals, reused when naga emits it again (a loop's
    /// continuing block is translated at every `continue`).
    slots: HashMap<Handle<Expression>, Vec<VarId>>,
    /// What a materialized expression reads as, once its statement ran.
    materialized: HashMap<Handle<Expression>, Value>,
    /// What each member of a materialized struct reads as (a compare-exchange's result).
    members: HashMap<Handle<Expression>, Vec<Value>>,
}

impl<'a> Translator<'a> {
    fn new(module: &'a Module, function: &'a Function, info: &'a FunctionInfo) -> Self {
        Self {
            kernel: String::new(),
            module,
            function,
            info,
            workgroup_size: [1; 3],
            def: KernelDef {
                name: String::new(),
                workgroup_size: [1; 3],
                bindings: Vec::new(),
                params: Vec::new(),
                locals: Vec::new(),
                shared: Vec::new(),
                local_arrays: Vec::new(),
                body: Vec::new(),
            },
            globals: Globals::default(),
            locals: HashMap::new(),
            local_arrays: HashMap::new(),
            slots: HashMap::new(),
            materialized: HashMap::new(),
            members: HashMap::new(),
        }
    }

    fn run(mut self) -> Translation<Translated> {
        let plan = self.declare_globals()?;
        let mut body = self.declare_locals()?;
        self.top_block(&self.function.body, &mut body)?;
        self.def.name = self.kernel.clone();
        self.def.workgroup_size = self.workgroup_size;
        self.def.body = body;
        Ok(Translated {
            def: self.def,
            plan,
        })
    }

    /// An [`Unsupported`] for this kernel.
    pub(crate) fn refuse(&self, construct: Construct, detail: impl Into<String>) -> Unsupported {
        Unsupported {
            kernel: self.kernel.clone(),
            construct,
            detail: detail.into(),
        }
    }

    /// A fresh local of `elem`, zero at entry.
    pub(crate) fn fresh_local(&mut self, elem: ElemType) -> VarId {
        self.def.locals.push(elem);
        VarId(self.def.locals.len() as u32 - 1)
    }

    /// Declares every local variable (one Lockstep local per lane, a local array for an array)
    /// and returns the assignments of those with a constant initializer, which run first.
    fn declare_locals(&mut self) -> Translation<Vec<lockstep::kernel::Stmt>> {
        let mut init = Vec::new();
        for (handle, local) in self.function.local_variables.iter() {
            let inner = &self.module.types[local.ty].inner;
            if let naga::TypeInner::Array { base, size, .. } = *inner {
                let of = self.local_array(base, size, local.init)?;
                self.local_arrays.insert(handle, of);
                continue;
            }
            let (ty, lanes) = self.value_ty(inner)?;
            let vars: Vec<VarId> = (0..lanes).map(|_| self.fresh_local(ty.stored())).collect();
            if let Some(value) = local.init {
                let value = self.value(value)?;
                init.extend(place::assign(&vars, &value));
            }
            self.locals.insert(handle, vars);
        }
        Ok(init)
    }

    /// A function-scope `array<T, N>` of scalars or vectors as a Lockstep local array (zero at
    /// entry, as WGSL's is); an initializer other than zero is refused.
    fn local_array(
        &mut self,
        base: Handle<naga::Type>,
        size: naga::ArraySize,
        init: Option<Handle<Expression>>,
    ) -> Translation<ArrayOf> {
        let naga::ArraySize::Constant(len) = size else {
            return Err(self.refuse(
                Construct::Type("runtime-sized local array".to_owned()),
                "a function-scope array has a constant length",
            ));
        };
        if init.is_some_and(|i| !matches!(self.function.expressions[i], Expression::ZeroValue(_))) {
            return Err(self.refuse(
                Construct::Expression("local array initializer".to_owned()),
                "a local array starts at zero; other initial values are not translated",
            ));
        }
        let (ty, lanes) = self.value_ty(&self.module.types[base].inner)?;
        let len = u64::from(len.get()) * lanes as u64;
        let len = u32::try_from(len)
            .ok()
            .filter(|&len| len <= lockstep::kernel::MAX_LOCAL_ARRAY_LEN)
            .ok_or_else(|| {
                self.refuse(
                    Construct::Type(format!("local array of {len} elements")),
                    "longer than Lockstep's local arrays",
                )
            })?;
        self.def.local_arrays.push(LocalArrayDecl {
            elem: ty.stored(),
            len,
        });
        let id = LocalArrayId(self.def.local_arrays.len() as u32 - 1);
        Ok(ArrayOf {
            array: Array::Local(id),
            ty,
            lanes,
            atomic: false,
        })
    }

    /// How a local holding a lane of `ty` reads back.
    pub(crate) fn read_local(ty: ScalarTy, var: VarId) -> Expr {
        ops::from_stored(ty, Expr::Var(var))
    }
}

#[cfg(test)]
mod tests;
