//! The info words (a launch's scalars and metadata) as read-only Lockstep buffers, one per
//! distinct content.
//!
//! The words are the bytes cubecl-wgpu uploads for the WGSL `info_st` struct (its `u64`s,
//! little endian), so the struct's member offsets, which the translator reads from naga,
//! address them as WGSL does. A buffer is never written after its creation, so launches of
//! any kernel on any stream share it.

use std::collections::HashMap;

use lockstep::{Bytes, ComputeClient, Device, Handle, ServerError};

/// Distinct info buffers kept at most; beyond, the cache starts over (the buffers live on
/// while launches hold them).
const KEPT: usize = 1024;

/// Info buffers by content.
#[derive(Debug, Default)]
pub struct InfoBuffers {
    by_words: HashMap<Vec<u64>, Handle>,
}

impl InfoBuffers {
    /// The buffer holding `words`, created on `client`'s stream if no launch made it yet.
    pub fn get<D: Device>(
        &mut self,
        client: &ComputeClient<D>,
        words: &[u64],
    ) -> Result<Handle, ServerError> {
        if let Some(handle) = self.by_words.get(words) {
            return Ok(handle.clone());
        }
        if self.by_words.len() >= KEPT {
            self.by_words.clear();
        }
        let handle = client.create(Bytes::from_elems(words))?;
        self.by_words.insert(words.to_vec(), handle.clone());
        Ok(handle)
    }
}
