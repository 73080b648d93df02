//! Pinned host memory handed to users ([`ComputeClient::staging`]), and writes that the copy
//! engine reads straight from it, skipping the staging copy of `staging.rs`.
//!
//! Pinning and unpinning are slow (hundreds of milliseconds for 256 MiB, and `cuMemFreeHost`
//! stalls other driver calls while it runs), so a device keeps the blocks its staged bytes
//! give back in a [`PinnedCache`] and hands them out again.
//!
//! **Invariants.** A block is in exactly one place: lent to one [`CudaPinned`], or idle in the
//! cache. A block returns to the cache (or is freed) only after the last copy reading it
//! completed: a write records an event after its copy and the memory's drop waits for it.
//!
//! [`ComputeClient::staging`]: lockstep::ComputeClient::staging

use std::any::Any;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUresult};
use lockstep::{Bytes, DeviceError, PinnedMemory};

use crate::context::{Context, lock};

/// Idle pinned memory a cache keeps; past it, returned blocks are freed.
const CACHED_BYTES_MAX: usize = 1 << 30;

/// Allocates `bytes` (at least 1) of portable page-locked host memory, zeroed: every byte of it
/// is initialised, so slices of it are sound whatever copies have or have not written it. The
/// context must be current. Zeroing costs a fraction of what pinning the pages costs.
pub(crate) fn alloc_zeroed(bytes: usize) -> Result<NonNull<u8>, cudarc::driver::DriverError> {
    // SAFETY: allocates `bytes` of portable pinned memory in the current context; the pointer
    // is checked for null below.
    let ptr = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }?;
    let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(cudarc::driver::DriverError(
        CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    ))?;
    // SAFETY: `bytes` writable bytes of the allocation just made, which nothing else
    // references yet.
    unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, bytes) };
    Ok(ptr)
}

/// One page-locked host allocation (`cuMemHostAlloc`, portable). Its bytes are initialised:
/// zeroed when allocated, written only through slices since.
#[derive(Debug)]
struct Block {
    ptr: NonNull<u8>,
    capacity: usize,
}

// SAFETY: plain host memory owned by whoever holds the block (see the module invariants).
unsafe impl Send for Block {}

/// A device's idle pinned blocks, shared with the bytes it lent them to.
#[derive(Debug)]
pub(crate) struct PinnedCache {
    ctx: Arc<Context>,
    idle: Mutex<Vec<Block>>,
}

impl PinnedCache {
    pub(crate) fn new(ctx: Arc<Context>) -> Arc<Self> {
        Arc::new(Self {
            ctx,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// `len` bytes of pinned memory (initialised, contents unspecified) as pinned [`Bytes`]:
    /// an idle block of at least `len` and at most twice that, or a fresh zeroed one.
    pub(crate) fn alloc(self: &Arc<Self>, len: usize) -> Result<Bytes, DeviceError> {
        let reused = {
            let mut idle = lock(&self.idle);
            let fits = idle
                .iter()
                .position(|b| b.capacity >= len && b.capacity / 2 <= len);
            fits.map(|i| idle.swap_remove(i))
        };
        let block = match reused {
            Some(block) => block,
            None => self.fresh(len.max(1))?,
        };
        Ok(Bytes::from_pinned(Box::new(CudaPinned {
            block,
            len,
            cache: self.clone(),
            in_flight: None,
        })))
    }

    fn fresh(&self, capacity: usize) -> Result<Block, DeviceError> {
        self.ctx.bind()?;
        let ptr = alloc_zeroed(capacity).map_err(|e| self.ctx.fail("cuMemHostAlloc", e))?;
        Ok(Block { ptr, capacity })
    }

    /// Takes back a block no copy reads any more: idle if the cache has room, else freed.
    fn give(&self, block: Block) {
        let mut idle = lock(&self.idle);
        let cached: usize = idle.iter().map(|b| b.capacity).sum();
        if cached + block.capacity <= CACHED_BYTES_MAX {
            idle.push(block);
        } else {
            drop(idle);
            self.free(block);
        }
    }

    fn free(&self, block: Block) {
        // On a lost context the memory goes with the process.
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by `cuMemHostAlloc`; no copy reads it any more.
            let _ = unsafe { result::free_host(block.ptr.as_ptr().cast()) };
        }
    }
}

impl Drop for PinnedCache {
    fn drop(&mut self) {
        for block in std::mem::take(&mut *lock(&self.idle)) {
            self.free(block);
        }
    }
}

/// `len` bytes of a pinned block, lent to one [`Bytes`].
#[derive(Debug)]
pub(crate) struct CudaPinned {
    block: Block,
    len: usize,
    cache: Arc<PinnedCache>,
    /// Recorded after the last copy that reads this memory.
    in_flight: Option<sys::CUevent>,
}

// SAFETY: the block is owned by this value; the raw event is an opaque driver handle, used only
// with the context bound.
unsafe impl Send for CudaPinned {}
// SAFETY: shared access only reads the memory.
unsafe impl Sync for CudaPinned {}

impl CudaPinned {
    /// The pinned memory of `ctx` behind `data`, if that is what `data` is.
    pub(crate) fn of_context<'a>(data: &'a mut Bytes, ctx: &Arc<Context>) -> Option<&'a mut Self> {
        let memory: &mut dyn Any = data.pinned_mut()?;
        memory
            .downcast_mut::<Self>()
            .filter(|pinned| Arc::ptr_eq(&pinned.cache.ctx, ctx))
    }

    fn ptr(&self) -> *mut u8 {
        self.block.ptr.as_ptr()
    }

    /// Enqueues a copy of all of this memory to `dst` on `stream`, read in place by the copy
    /// engine; the memory stays lent until the copy completed.
    pub(crate) fn copy_to_device(
        &mut self,
        stream: sys::CUstream,
        dst: sys::CUdeviceptr,
    ) -> Result<(), DeviceError> {
        self.wait_in_flight();
        let ctx = &self.cache.ctx;
        // SAFETY: `len` bytes of pinned memory owned by `self`, which outlives the copy (see
        // the module invariants); the caller checked that `len` bytes at `dst` lie inside one
        // of its buffers (`contract::range`).
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, self.ptr().cast(), self.len, stream) }
            .result()
            .map_err(|e| ctx.fail("cuMemcpyHtoDAsync", e))?;
        let event = ctx.event()?;
        // SAFETY: a pooled event of this context; the stream belongs to it.
        if let Err(e) = unsafe { result::event::record(event, stream) } {
            ctx.recycle_event(event);
            // The copy may be in flight: wait for the stream before the memory can go.
            // SAFETY: the stream belongs to this context.
            let _ = unsafe { result::stream::synchronize(stream) };
            return Err(ctx.fail("cuEventRecord", e));
        }
        self.in_flight = Some(event);
        Ok(())
    }

    /// Blocks until the last copy reading this memory completed (at once on a lost context).
    fn wait_in_flight(&mut self) {
        if let Some(event) = self.in_flight.take() {
            let ctx = &self.cache.ctx;
            if ctx.bind().is_ok() {
                // SAFETY: a pooled event of this context, recorded after the copy.
                let _ = unsafe { sys::cuEventSynchronize(event) };
            }
            ctx.recycle_event(event);
        }
    }
}

impl PinnedMemory for CudaPinned {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes of the block owned by `self`; copies only read them.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // A copy may still read the memory: let it finish before handing out a writer.
        self.wait_in_flight();
        // SAFETY: as in `as_slice`, and no copy reads them any more.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len) }
    }
}

impl Drop for CudaPinned {
    fn drop(&mut self) {
        self.wait_in_flight();
        // The block moves to the cache; `self.block` (no drop glue) is not used again.
        self.cache.give(Block {
            ptr: self.block.ptr,
            capacity: self.block.capacity,
        });
    }
}
