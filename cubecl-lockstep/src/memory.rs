//! The memory table: each cubecl allocation the server was asked to back, with the Lockstep
//! memory behind it.
//!
//! cubecl mints a memory handle on the client and hands the server one clone of it
//! (`initialize_memory`); every user handle and binding holds another. cubecl has no free
//! call: an allocation is free once the server's clone is the only one left
//! (`ManagedMemoryHandle::is_free`). The sweep drops those, and dropping the Lockstep handle
//! releases its memory once the work that used it completed (Lockstep's rule).

use std::collections::HashMap;

use cubecl_runtime::memory_management::{ManagedMemoryHandle, ManagedMemoryId, MemoryLocation};
use cubecl_runtime::server::BufferBinding;
use lockstep::Handle;

use crate::books::Region;

/// One allocation: the server's clone of cubecl's handle and the Lockstep memory.
#[derive(Debug)]
struct Allocation {
    handle: ManagedMemoryHandle,
    /// `None` for an allocation of zero bytes, which Lockstep does not make.
    memory: Option<Handle>,
}

/// The allocations the server backs, by cubecl memory id.
#[derive(Debug, Default)]
pub struct MemoryTable {
    allocations: HashMap<ManagedMemoryId, Allocation>,
    /// Allocations made so far: each gets a distinct location, so cubecl sees it allocated.
    made: u32,
}

/// A binding the table cannot serve.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    /// The binding's memory was never allocated (its allocation failed: the failure books
    /// hold why), or is no longer.
    #[error("memory {0:?} has no Lockstep allocation")]
    Unknown(ManagedMemoryId),
    /// The binding's range does not fit its allocation.
    #[error("memory {memory:?}: bytes {start}..{end} do not fit the allocation")]
    OutOfRange {
        /// The allocation.
        memory: ManagedMemoryId,
        /// First byte of the binding.
        start: u64,
        /// One past its last byte.
        end: u64,
    },
}

impl MemoryTable {
    /// Records that `memory` (`None` for zero bytes) backs `handle`.
    pub fn insert(&mut self, handle: ManagedMemoryHandle, memory: Option<Handle>) {
        self.made = self.made.wrapping_add(1);
        handle
            .descriptor()
            .update_location(MemoryLocation::new(0, 0, self.made));
        let id = handle.descriptor().id;
        self.allocations.insert(id, Allocation { handle, memory });
    }

    /// Drops every allocation no cubecl handle or binding holds any more, and returns their
    /// ids (for the failure books).
    pub fn sweep(&mut self) -> Vec<ManagedMemoryId> {
        let free: Vec<ManagedMemoryId> = self
            .allocations
            .iter()
            .filter(|(_, a)| a.handle.is_free())
            .map(|(&id, _)| id)
            .collect();
        for id in &free {
            self.allocations.remove(id);
        }
        free
    }

    /// The Lockstep view of `binding`'s bytes; `None` when they are zero bytes.
    pub fn view(&self, binding: &BufferBinding) -> Result<Option<Handle>, MemoryError> {
        let id = binding.memory.id();
        let allocation = self.allocations.get(&id).ok_or(MemoryError::Unknown(id))?;
        let range = binding.range();
        let out_of_range = MemoryError::OutOfRange {
            memory: id,
            start: range.start,
            end: range.end,
        };
        if range.is_empty() {
            return Ok(None);
        }
        let memory = allocation.memory.as_ref().ok_or(out_of_range.clone())?;
        let view = memory
            .slice(range.start, range.end - range.start)
            .map_err(|_| out_of_range)?;
        Ok(Some(view))
    }
}

/// The bytes of its allocation `binding` names.
pub fn region(binding: &BufferBinding) -> Region {
    Region {
        memory: binding.memory.id(),
        bytes: binding.range(),
    }
}

#[cfg(test)]
mod tests;
