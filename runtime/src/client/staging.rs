//! Staging: [`ComputeClient::staging`] moves host bytes into page-locked memory of the device,
//! which its copy engine reads in place, so a later write of those bytes skips the device's
//! own staging copy.

use super::ComputeClient;
use crate::bytes::{AllocationProperty, Bytes};
use crate::device::Device;
use crate::error::ServerError;

impl<D: Device> ComputeClient<D> {
    /// Moves each of `bytes` that lives in ordinary heap memory into pinned host memory of this
    /// device (same contents, swapped in place), for faster transfers to it. Bytes already
    /// pinned, and lazy reads not yet accessed, are left as they are. A no-op on devices
    /// without pinned memory (the simulator, wgpu).
    ///
    /// `file_only` stages only bytes backed by a file; Lockstep's [`Bytes`] never are (there is
    /// no memory-mapped variant), so with `file_only` nothing is staged.
    ///
    /// # Errors
    /// If the device cannot pin the memory (out of pinned memory, device lost). Nothing was
    /// changed then.
    pub fn staging<'a>(
        &self,
        bytes: impl Iterator<Item = &'a mut Bytes>,
        file_only: bool,
    ) -> Result<(), ServerError> {
        let _span = call_span!(self, "staging", file_only);
        if file_only {
            return Ok(());
        }
        let mut targets: Vec<&mut Bytes> = bytes
            .filter(|b| b.property() == AllocationProperty::Native && !b.is_empty())
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        let sizes: Vec<usize> = targets.iter().map(|b| b.len()).collect();
        let pinned = self.call(move |server, stream| server.alloc_pinned(stream, &sizes))?;
        for (target, mut pinned) in targets.iter_mut().zip(pinned) {
            pinned.copy_from_slice(target);
            std::mem::swap(*target, &mut pinned);
            pinned.free_in_background();
        }
        Ok(())
    }
}
