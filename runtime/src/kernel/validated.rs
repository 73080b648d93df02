//! A validated kernel: what the builder returns and every launch takes.

use std::sync::Arc;

use super::{KernelDef, KernelError, validate};

/// A validated kernel, cheap to clone. Devices compile it once and cache it by content hash.
#[derive(Clone, Debug)]
pub struct Kernel {
    def: Arc<KernelDef>,
    hash: u64,
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
        let hash = def.content_hash();
        Ok(Self {
            def: Arc::new(def),
            hash,
        })
    }

    /// The kernel's definition, as validated.
    pub fn def(&self) -> &KernelDef {
        &self.def
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The content hash devices key their compiled kernels by ([`KernelDef::content_hash`]).
    pub fn content_hash(&self) -> u64 {
        self.hash
    }
}
