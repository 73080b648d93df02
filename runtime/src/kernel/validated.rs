//! A validated kernel: what the builder returns and every launch takes.

use std::sync::Arc;

use super::validate::fits_device;
use super::{ElemType, KernelDef, KernelError, types, validate};
use crate::properties::DeviceProperties;

/// A validated kernel, cheap to clone (one reference count). Devices compile it once and
/// cache it by content hash.
#[derive(Clone)]
pub struct Kernel(Arc<Validated>);

struct Validated {
    def: KernelDef,
    hash: u64,
    /// What a launch checks against the device, computed once from `def`: the element types
    /// it uses (`types::used`) and its shared memory bytes.
    used: Vec<ElemType>,
    shared_bytes: u64,
}

impl Kernel {
    /// Validates `def`, a hand-made definition, and hashes it.
    /// [`KernelBuilder::build`](crate::kernel::KernelBuilder::build) calls it: a built kernel
    /// is validated once.
    ///
    /// # Errors
    /// What [`validate`] finds wrong with `def`.
    pub fn new(def: KernelDef) -> Result<Self, KernelError> {
        validate(&def)?;
        Ok(Self(Arc::new(Validated {
            hash: def.content_hash(),
            used: types::used(&def),
            shared_bytes: def.shared_bytes(),
            def,
        })))
    }

    /// [`validate_for_device`](super::validate_for_device) of this kernel, without walking it.
    ///
    /// # Errors
    /// As [`validate_for_device`](super::validate_for_device).
    pub fn validate_for_device(&self, properties: &DeviceProperties) -> Result<(), KernelError> {
        let v = &self.0;
        fits_device(&v.def.name, &v.used, v.shared_bytes, properties)
    }

    /// The kernel's definition, as validated.
    pub fn def(&self) -> &KernelDef {
        &self.0.def
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.0.def.name
    }

    /// The content hash devices key their compiled kernels by ([`KernelDef::content_hash`]).
    pub fn content_hash(&self) -> u64 {
        self.0.hash
    }
}

/// The definition and its hash: what identifies a kernel (the rest derives from the
/// definition, and traces that print a kernel do not depend on how it is cached).
impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("def", &self.0.def)
            .field("hash", &self.0.hash)
            .finish()
    }
}
