//! What a launch takes: a validated kernel, a workgroup count and arguments.

use std::sync::Arc;

use crate::handle::Handle;
use crate::kernel::{KernelDef, KernelError, Scalar, validate};

/// A validated kernel, cheap to clone. Devices compile it once and cache it by content hash.
#[derive(Clone, Debug)]
pub struct Kernel {
    def: Arc<KernelDef>,
    hash: u64,
}

impl Kernel {
    /// Validates `def` (a no-op cost for kernels from [`KernelBuilder`](crate::kernel::KernelBuilder)).
    pub fn new(def: KernelDef) -> Result<Self, KernelError> {
        validate(&def)?;
        let hash = def.content_hash();
        Ok(Self {
            def: Arc::new(def),
            hash,
        })
    }

    pub fn def(&self) -> &KernelDef {
        &self.def
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    pub fn content_hash(&self) -> u64 {
        self.hash
    }
}

/// How many workgroups a launch runs.
#[derive(Clone, Debug)]
pub enum CubeCount {
    /// Workgroups along x, y and z. A zero in any dimension makes the launch a no-op.
    Static(u32, u32, u32),
    /// Three little-endian `u32` counts read from this handle when the launch executes, so a
    /// kernel can size the next one without a round trip to the host.
    Dynamic(Handle),
}

/// The arguments of a launch: one handle per declared binding, in order, and one scalar per
/// declared parameter.
#[derive(Clone, Debug, Default)]
pub struct KernelArguments {
    pub bindings: Vec<Handle>,
    pub params: Vec<Scalar>,
}

impl KernelArguments {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn binding(mut self, handle: &Handle) -> Self {
        self.bindings.push(handle.clone());
        self
    }

    pub fn param(mut self, value: Scalar) -> Self {
        self.params.push(value);
        self
    }
}

/// A workgroup count as the server sees it: static, or read from a buffer range `R`.
#[derive(Clone, Debug)]
pub(crate) enum CountArg<R> {
    Static([u32; 3]),
    Dynamic(R),
}
