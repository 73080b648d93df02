//! What a [`KernelBuilder`](super::KernelBuilder) declares: bindings, shared arrays, local
//! arrays and local variables, each a `Copy` handle that remembers its builder.

use super::arena::{BuilderId, Node};
use super::value::Value;
use crate::kernel::ir::{Array, BindingId, LocalArrayId, SharedId, VarId};

/// A binding declared on a [`KernelBuilder`](super::KernelBuilder).
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// Index of the binding in the kernel's declarations: launch argument `id.0` binds to it.
    pub id: BindingId,
    pub(super) owner: BuilderId,
}

impl Binding {
    /// Reads element `index` (`u32`) of the binding.
    pub fn load(self, index: impl Into<Value>) -> Value {
        Value::load(self.owner, Array::Binding(self.id), index.into())
    }

    /// Number of elements in the bound buffer.
    pub fn len(self) -> Value {
        Value::leaf(self.owner, Node::Len(self.id))
    }
}

/// A workgroup-shared array declared on a [`KernelBuilder`](super::KernelBuilder).
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    /// Index of the array in the kernel's shared-array declarations.
    pub id: SharedId,
    pub(super) len: u32,
    pub(super) owner: BuilderId,
}

impl Shared {
    /// Reads element `index` (`u32`) of the array in this workgroup's copy.
    pub fn load(self, index: impl Into<Value>) -> Value {
        Value::load(self.owner, Array::Shared(self.id), index.into())
    }

    /// Number of elements: a `u32` literal.
    pub fn len(self) -> Value {
        Value::from(self.len)
    }
}

/// A per-invocation array declared on a [`KernelBuilder`](super::KernelBuilder).
#[derive(Clone, Copy, Debug)]
pub struct LocalArray {
    /// Index of the array in the kernel's local-array declarations.
    pub id: LocalArrayId,
    pub(super) len: u32,
    pub(super) owner: BuilderId,
}

impl LocalArray {
    /// Reads element `index` (`u32`) of this invocation's copy.
    pub fn load(self, index: impl Into<Value>) -> Value {
        Value::load(self.owner, Array::Local(self.id), index.into())
    }

    /// Number of elements: a `u32` literal.
    pub fn len(self) -> Value {
        Value::from(self.len)
    }
}

/// A local variable declared on a [`KernelBuilder`](super::KernelBuilder).
#[derive(Clone, Copy, Debug)]
pub struct Var {
    /// Index of the variable in the kernel's locals.
    pub id: VarId,
    pub(super) owner: BuilderId,
}

impl Var {
    /// Reads the variable's current value.
    pub fn get(self) -> Value {
        Value::leaf(self.owner, Node::Var(self.id))
    }
}

impl From<Var> for Value {
    fn from(v: Var) -> Self {
        v.get()
    }
}

/// An array that a builder's stores and atomics write: a [`Binding`], a [`Shared`] or a
/// [`LocalArray`] of that builder, or an [`Array`] by number (checked only when the kernel is
/// validated).
pub trait KernelArray: sealed::Sealed + Copy {}

impl KernelArray for Binding {}
impl KernelArray for Shared {}
impl KernelArray for LocalArray {}
impl KernelArray for Array {}

pub(super) mod sealed {
    use super::*;

    /// Keeps [`KernelArray`](super::KernelArray) to the builder's own array types.
    pub trait Sealed {
        /// The array, and the builder that declared it (`None` for an array by number).
        fn array(self) -> (Array, Option<BuilderId>);
    }

    impl Sealed for Binding {
        fn array(self) -> (Array, Option<BuilderId>) {
            (Array::Binding(self.id), Some(self.owner))
        }
    }

    impl Sealed for Shared {
        fn array(self) -> (Array, Option<BuilderId>) {
            (Array::Shared(self.id), Some(self.owner))
        }
    }

    impl Sealed for LocalArray {
        fn array(self) -> (Array, Option<BuilderId>) {
            (Array::Local(self.id), Some(self.owner))
        }
    }

    impl Sealed for Array {
        fn array(self) -> (Array, Option<BuilderId>) {
            (self, None)
        }
    }
}

impl From<Binding> for Array {
    fn from(b: Binding) -> Self {
        Array::Binding(b.id)
    }
}

impl From<Shared> for Array {
    fn from(s: Shared) -> Self {
        Array::Shared(s.id)
    }
}

impl From<LocalArray> for Array {
    fn from(l: LocalArray) -> Self {
        Array::Local(l.id)
    }
}
