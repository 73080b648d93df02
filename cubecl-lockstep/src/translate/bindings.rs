//! Global variables: storage buffers and the info struct become bindings, workgroup variables
//! shared arrays; what each binding takes at launch is the [`LaunchPlan`].

use std::collections::HashMap;

use lockstep::kernel::{Access, Array, BindingDecl, BindingId, ElemType, SharedDecl, SharedId};
use naga::{AddressSpace, ArraySize, GlobalVariable, Handle, TypeInner};

use super::Translator;
use super::error::{Construct, Translation};
use super::types::{ScalarTy, type_name};

/// What fills one binding of a translated kernel at launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindingSource {
    /// The launch's `k`-th resource (cubecl's `KernelArguments::resources[k]`, the WGSL
    /// `@binding(k)`).
    Resource(usize),
    /// The launch's info words (scalars and metadata), read-only.
    Info,
}

/// Where each binding of a translated kernel comes from, in binding order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchPlan {
    /// One source per binding of the kernel.
    pub bindings: Vec<BindingSource>,
}

/// An array the kernel indexes (a storage buffer, a workgroup array or a function-scope
/// array), by element: each element is `lanes` lanes of `ty`, stored one after another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayOf {
    pub array: Array,
    pub ty: ScalarTy,
    pub lanes: usize,
    pub atomic: bool,
}

/// How the translator sees each global variable.
#[derive(Clone, Debug)]
pub enum GlobalPlace {
    /// An array, indexed by element.
    Array(ArrayOf),
    /// A workgroup scalar or vector: element 0 of a shared array.
    Single(ArrayOf),
    /// The info struct.
    Info,
}

/// The globals' places and the info struct's layout.
#[derive(Debug, Default)]
pub struct Globals {
    pub places: HashMap<Handle<GlobalVariable>, GlobalPlace>,
    /// The info words as `u32` (and `i32`, reinterpreted), and as `f32` when a member is one.
    pub info_words: Option<BindingId>,
    pub info_floats: Option<BindingId>,
    /// Each info member's first word and element type.
    pub info_members: Vec<(u32, ScalarTy)>,
}

impl Translator<'_> {
    /// Declares the bindings and shared arrays of every global the entry point uses.
    pub(crate) fn declare_globals(&mut self) -> Translation<LaunchPlan> {
        let written = self.written_globals();
        let mut plan = LaunchPlan::default();
        for (handle, global) in self.module.global_variables.iter() {
            let place = match global.space {
                AddressSpace::Storage { .. } => {
                    self.storage(handle, global, &written, &mut plan)?
                }
                AddressSpace::WorkGroup => self.workgroup(global)?,
                other => {
                    return Err(self.refuse(
                        Construct::Global(format!("{other:?}")),
                        "kernels take storage buffers and workgroup arrays",
                    ));
                }
            };
            self.globals.places.insert(handle, place);
        }
        Ok(plan)
    }

    fn storage(
        &mut self,
        handle: Handle<GlobalVariable>,
        global: &GlobalVariable,
        written: &[Handle<GlobalVariable>],
        plan: &mut LaunchPlan,
    ) -> Translation<GlobalPlace> {
        let inner = &self.module.types[global.ty].inner;
        if let TypeInner::Struct { members, .. } = inner {
            self.declare_info(members, plan)?;
            return Ok(GlobalPlace::Info);
        }
        let (ty, lanes, atomic) = self.array_element(inner)?;
        let written = written.contains(&handle);
        let access = if written {
            Access::ReadWrite
        } else {
            Access::Read
        };
        // An atomic array no statement updates is read-only: no invocation writes it, so its
        // atomic loads are plain loads.
        let atomic = atomic && written;
        let resource = global.binding.as_ref().map_or(0, |b| b.binding as usize);
        let id = self.bind(ty.stored(), access, BindingSource::Resource(resource), plan);
        let array = Array::Binding(id);
        Ok(GlobalPlace::Array(ArrayOf {
            array,
            ty,
            lanes,
            atomic,
        }))
    }

    /// A new binding of `elem` filled from `source`.
    fn bind(
        &mut self,
        elem: ElemType,
        access: Access,
        source: BindingSource,
        plan: &mut LaunchPlan,
    ) -> BindingId {
        self.def.bindings.push(BindingDecl { elem, access });
        plan.bindings.push(source);
        BindingId(self.def.bindings.len() as u32 - 1)
    }

    /// The element of a storage or workgroup array type: scalar type, lanes, atomic.
    fn array_element(&self, inner: &TypeInner) -> Translation<(ScalarTy, usize, bool)> {
        let TypeInner::Array { base, .. } = inner else {
            return Err(self.refuse(Construct::Type(type_name(inner)), "a buffer is an array"));
        };
        match self.module.types[*base].inner {
            TypeInner::Atomic(scalar) => Ok((self.atomic_ty(scalar)?, 1, true)),
            ref element => {
                let (ty, lanes) = self.value_ty(element)?;
                Ok((ty, lanes, false))
            }
        }
    }

    /// The scalar type of an atomic: `u32` or `i32`, the IR's atomic types.
    fn atomic_ty(&self, scalar: naga::Scalar) -> Translation<ScalarTy> {
        match self.scalar_ty(scalar)? {
            ty @ ScalarTy::Elem(ElemType::U32 | ElemType::I32) => Ok(ty),
            _ => Err(self.refuse(
                Construct::Type(type_name(&TypeInner::Atomic(scalar))),
                "Lockstep's IR has atomics on u32 and i32",
            )),
        }
    }

    fn workgroup(&mut self, global: &GlobalVariable) -> Translation<GlobalPlace> {
        let inner = &self.module.types[global.ty].inner;
        let (of, len, single) = match *inner {
            TypeInner::Array {
                size: ArraySize::Constant(len),
                ..
            } => {
                let (ty, lanes, atomic) = self.array_element(inner)?;
                ((ty, lanes, atomic), len.get(), false)
            }
            TypeInner::Atomic(scalar) => ((self.atomic_ty(scalar)?, 1, true), 1, true),
            ref value => {
                let (ty, lanes) = self.value_ty(value)?;
                ((ty, lanes, false), 1, true)
            }
        };
        let (ty, lanes, atomic) = of;
        self.def.shared.push(SharedDecl {
            elem: ty.stored(),
            len: len * lanes as u32,
        });
        let array = Array::Shared(SharedId(self.def.shared.len() as u32 - 1));
        let of = ArrayOf {
            array,
            ty,
            lanes,
            atomic,
        };
        Ok(if single {
            GlobalPlace::Single(of)
        } else {
            GlobalPlace::Array(of)
        })
    }

    /// The info struct: arrays of `u32`, `i32` or `f32` words at their members' offsets.
    fn declare_info(
        &mut self,
        members: &[naga::StructMember],
        plan: &mut LaunchPlan,
    ) -> Translation<()> {
        let words = self.bind(ElemType::U32, Access::Read, BindingSource::Info, plan);
        self.globals.info_words = Some(words);
        for member in members {
            let (ty, lanes, atomic) = self.array_element(&self.module.types[member.ty].inner)?;
            if lanes != 1 || atomic || ty == ScalarTy::Bool {
                return Err(self.refuse(
                    Construct::Type("info member".to_owned()),
                    "info members are arrays of 32-bit scalars",
                ));
            }
            if ty == ScalarTy::Elem(ElemType::F32) && self.globals.info_floats.is_none() {
                let floats = self.bind(ElemType::F32, Access::Read, BindingSource::Info, plan);
                self.globals.info_floats = Some(floats);
            }
            self.globals.info_members.push((member.offset / 4, ty));
        }
        Ok(())
    }
}
