//! A validated kernel: what the builder returns and every launch takes.

use std::sync::Arc;

use super::validate::fits_device;
use super::{ElemType, KernelChecks, KernelDef, KernelError, types, validate};
use crate::properties::DeviceProperties;

/// A validated kernel, cheap to clone (one reference count). Devices compile it once and
/// cache it by content hash and mode.
///
/// A kernel is checked unless it was made unchecked with [`Kernel::with_checks`]; a launch is
/// checked when both its kernel and its server are
/// ([`ServerOptions::kernel_checks`](crate::ServerOptions::kernel_checks)).
#[derive(Clone)]
pub struct Kernel {
    validated: Arc<Validated>,
    checks: KernelChecks,
}

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
        let validated = Arc::new(Validated {
            hash: def.content_hash(),
            used: types::used(&def),
            shared_bytes: def.shared_bytes(),
            def,
        });
        Ok(Self {
            validated,
            checks: KernelChecks::checked(),
        })
    }

    /// This kernel with `checks`: `KernelChecks::unchecked()` launches it without guards even
    /// on a checked server, as a library whose kernel guards its own accesses asks for (cubecl's
    /// `launch_unchecked`). The definition is shared, not copied. A checked kernel on an
    /// unchecked server still runs unchecked: the server's choice covers every kernel.
    pub fn with_checks(self, checks: KernelChecks) -> Self {
        Self { checks, ..self }
    }

    /// Whether this kernel asks for guarded accesses (see [`Kernel::with_checks`]).
    pub fn checks(&self) -> KernelChecks {
        self.checks
    }

    /// [`validate_for_device`](super::validate_for_device) of this kernel, without walking it.
    ///
    /// # Errors
    /// As [`validate_for_device`](super::validate_for_device).
    pub fn validate_for_device(&self, properties: &DeviceProperties) -> Result<(), KernelError> {
        let v = &self.validated;
        fits_device(&v.def.name, &v.used, v.shared_bytes, properties)
    }

    /// The kernel's definition, as validated.
    pub fn def(&self) -> &KernelDef {
        &self.validated.def
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.validated.def.name
    }

    /// The content hash devices key their compiled kernels by ([`KernelDef::content_hash`]).
    pub fn content_hash(&self) -> u64 {
        self.validated.hash
    }
}

/// The definition and its hash: what identifies a kernel (the rest derives from the
/// definition, and traces that print a kernel do not depend on how it is cached); `unchecked`
/// only for a kernel made unchecked, so checked kernels print as they always have.
impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Kernel");
        debug
            .field("def", &self.validated.def)
            .field("hash", &self.validated.hash);
        if !self.checks.is_checked() {
            debug.field("unchecked", &true);
        }
        debug.finish()
    }
}
