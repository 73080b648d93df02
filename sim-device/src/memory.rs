//! Simulated device memory: poisoned when allocated and retired (a tombstone) when freed, with a
//! shadow map of which bytes were ever written, so reads of garbage and touches of freed memory
//! are reported.
//! It models what the runtime's memory layer manages.

use std::collections::BTreeMap;

/// Fresh memory holds this byte; a read that returns it where nothing was written is a bug.
pub const POISON_FRESH: u8 = 0xA5;

/// A problem the sanitizer found. Each names the operation and the byte range involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SanitizerReport {
    /// Bytes read (by a copy to the host, a device copy or a kernel) that were never written.
    UninitializedRead {
        operation: String,
        buffer: u64,
        offset: u64,
        len: u64,
    },
    /// An operation touched an allocation that had already been freed.
    UseAfterFree { operation: String, buffer: u64 },
    /// The runtime freed an allocation while queued work still used it.
    FreeWhileInUse { buffer: u64 },
    /// Two operations on different streams touched overlapping bytes, at least one writing,
    /// with no happens-before edge between them (see `sanitizer`).
    Race {
        buffer: u64,
        offset: u64,
        len: u64,
        first: String,
        second: String,
    },
}

impl std::fmt::Display for SanitizerReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SanitizerReport::UninitializedRead {
                operation,
                buffer,
                offset,
                len,
            } => write!(
                f,
                "{operation} read never-written bytes {offset}..{} of buffer {buffer}",
                offset + len
            ),
            SanitizerReport::UseAfterFree { operation, buffer } => {
                write!(f, "{operation} used buffer {buffer} after it was freed")
            }
            SanitizerReport::FreeWhileInUse { buffer } => {
                write!(
                    f,
                    "buffer {buffer} was freed while queued work still used it"
                )
            }
            SanitizerReport::Race {
                buffer,
                offset,
                len,
                first,
                second,
            } => write!(
                f,
                "race on buffer {buffer} bytes {offset}..{}: {first} and {second} are not ordered",
                offset + len
            ),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Allocation {
    pub bytes: Vec<u8>,
    /// One bit per byte: set once the byte has been written.
    written: Vec<u64>,
    pub freed: bool,
}

impl Allocation {
    fn new(size: usize) -> Self {
        Self {
            bytes: vec![POISON_FRESH; size],
            written: vec![0; size.div_ceil(64)],
            freed: false,
        }
    }

    pub fn mark_written(&mut self, offset: usize, len: usize) {
        for bit in offset..offset + len {
            self.written[bit / 64] |= 1 << (bit % 64);
        }
    }

    /// Whether every byte of the range was written at some point.
    pub fn all_written(&self, offset: usize, len: usize) -> bool {
        (offset..offset + len).all(|bit| self.written[bit / 64] & (1 << (bit % 64)) != 0)
    }
}

/// All allocations of one device, live and freed. Freed ones are kept as tombstones (without
/// their bytes) so that a late access is recognised as use-after-free rather than as an unknown
/// id.
#[derive(Debug, Default)]
pub(crate) struct SimMemory {
    allocations: BTreeMap<u64, Allocation>,
    next_id: u64,
    pub bytes_live: u64,
}

impl SimMemory {
    pub fn allocate(&mut self, size: u64) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.allocations.insert(id, Allocation::new(size as usize));
        self.bytes_live += size;
        id
    }

    pub fn free(&mut self, id: u64) {
        let alloc = self
            .allocations
            .get_mut(&id)
            .expect("the runtime frees only buffers this device allocated");
        assert!(!alloc.freed, "buffer {id} freed twice");
        alloc.freed = true;
        self.bytes_live -= alloc.bytes.len() as u64;
        // Retire the storage; keep the tombstone for use-after-free detection.
        alloc.bytes = Vec::new();
        alloc.written = Vec::new();
    }

    /// The live allocation `id`, or a use-after-free report naming `operation`.
    pub fn get_mut(
        &mut self,
        id: u64,
        operation: &str,
    ) -> Result<&mut Allocation, SanitizerReport> {
        match self.allocations.get_mut(&id) {
            Some(alloc) if !alloc.freed => Ok(alloc),
            _ => Err(SanitizerReport::UseAfterFree {
                operation: operation.to_owned(),
                buffer: id,
            }),
        }
    }
}
