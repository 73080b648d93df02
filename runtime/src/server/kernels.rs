//! Compiled kernels, cached per device by content hash and mode.

use std::collections::HashMap;

use crate::device::Device;
use crate::error::DeviceError;
use crate::kernel::{CompileOptions, FaultRecord, Kernel, KernelChecks};

pub(crate) struct Compiled<D: Device> {
    pub raw: D::Kernel,
}

pub(crate) struct KernelCache<D: Device> {
    /// Keyed by (content hash, checked). Only looked up, never iterated, so its order cannot
    /// leak into a trace.
    compiled: HashMap<(u64, bool), Compiled<D>>,
    /// Kernel names by `kernel_id`, to name the kernel of a [`FaultRecord`].
    names: Vec<String>,
}

impl<D: Device> KernelCache<D> {
    pub fn new() -> Self {
        Self {
            compiled: HashMap::new(),
            names: Vec::new(),
        }
    }

    /// The compiled form of `kernel`, compiling it on first use.
    pub fn get_or_compile(
        &mut self,
        device: &mut D,
        kernel: &Kernel,
        checks: KernelChecks,
    ) -> Result<&Compiled<D>, DeviceError> {
        let key = (kernel.content_hash(), checks.is_checked());
        if !self.compiled.contains_key(&key) {
            let kernel_id = self.names.len() as u32;
            let raw = device.compile(kernel.def(), CompileOptions { checks, kernel_id })?;
            self.names.push(kernel.def().name.clone());
            self.compiled.insert(key, Compiled { raw });
        }
        Ok(&self.compiled[&key])
    }

    /// The name of the kernel a fault record points at.
    pub fn name_of(&self, record: &FaultRecord) -> String {
        self.names
            .get(record.kernel_id as usize)
            .cloned()
            .unwrap_or_else(|| format!("<unknown kernel id {}>", record.kernel_id))
    }
}
