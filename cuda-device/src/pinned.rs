//! Page-locked host blocks: the [`HostAllocator`] of a context's [`HostPool`], whose blocks
//! reads land in (lent to the caller as `Bytes`, no copy after the transfer), large writes are
//! staged through, and [`ComputeClient::staging`] lends.
//!
//! Pinning and unpinning are slow (hundreds of milliseconds for 256 MiB, and `cuMemFreeHost`
//! stalls other driver calls while it runs), so blocks go back to the pool for reuse.
//!
//! **Invariants** (beside the pool's, `lockstep::host_pool`). A block a copy engine may still
//! use carries the event recorded after that copy (`in_flight`): the pool lends it again, and
//! a writer gets its bytes, only once that event completed, and the block is freed only after
//! waiting for it. Every block holds an `Arc` of its context, so the context (needed to free
//! pinned memory) outlives it.
//!
//! [`ComputeClient::staging`]: lockstep::ComputeClient::staging

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUresult};
use lockstep::host_pool::{HostAllocator, HostBlock};
use lockstep::{Bytes, DeviceError, HostPool, PooledBlock};

use crate::context::Context;
use crate::error::describe;

/// Most bytes of returned pinned blocks a context's pool keeps; past it, returned blocks are
/// freed.
pub(crate) const POOL_CAP_BYTES: usize = 1 << 30;

/// A context's pool of pinned blocks.
pub(crate) type PinnedPool = HostPool<PinnedAllocator>;
/// A pinned block lent by a [`PinnedPool`].
pub(crate) type LentBlock = PooledBlock<PinnedAllocator>;

/// Allocates `bytes` (at least 1) of portable page-locked host memory, zeroed: every byte of it
/// is initialised, so slices of it are sound whatever copies have or have not written it. The
/// context must be current. Zeroing costs a fraction of what pinning the pages costs.
fn alloc_zeroed(bytes: usize) -> Result<NonNull<u8>, cudarc::driver::DriverError> {
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

/// Makes the pinned blocks of one context.
#[derive(Debug)]
pub(crate) struct PinnedAllocator {
    ctx: Arc<Context>,
}

impl PinnedAllocator {
    pub(crate) fn pool(ctx: Arc<Context>) -> Arc<PinnedPool> {
        HostPool::new(Self { ctx }, POOL_CAP_BYTES)
    }

    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl HostAllocator for PinnedAllocator {
    type Block = PinnedBlock;

    fn allocate(&self, capacity: usize) -> Result<PinnedBlock, DeviceError> {
        self.ctx.bind()?;
        let ptr = alloc_zeroed(capacity).map_err(|e| match self.ctx.fail("cuMemHostAlloc", e) {
            DeviceError::ExecutionFault { .. } => DeviceError::TransferFailed {
                reason: format!(
                    "cannot allocate {capacity} bytes of pinned host memory: {}",
                    describe(e)
                ),
            },
            other => other,
        })?;
        Ok(PinnedBlock {
            ptr,
            capacity,
            ctx: self.ctx.clone(),
            in_flight: None,
        })
    }
}

/// One page-locked host allocation (`cuMemHostAlloc`, portable). Its bytes are initialised:
/// zeroed when allocated, written since only through slices or by the copy engine.
#[derive(Debug)]
pub(crate) struct PinnedBlock {
    ptr: NonNull<u8>,
    capacity: usize,
    ctx: Arc<Context>,
    /// Recorded after the last copy that reads or writes this memory.
    in_flight: Option<sys::CUevent>,
}

// SAFETY: the block owns its host memory (freed once, in `Drop`), which any thread may touch;
// the raw event is an opaque driver handle, which the driver accepts from any thread (`wait`
// and `Drop` make its context current first).
unsafe impl Send for PinnedBlock {}
// SAFETY: through `&self` the memory is only read (`as_slice`), and never while a copy engine
// writes it: the only copies that write a block are reads (`CudaRead::enqueue`, staging.rs),
// whose block is reachable as `Bytes` only after `CudaRead::finish` waited for its event.
unsafe impl Sync for PinnedBlock {}

impl PinnedBlock {
    /// The block's address, for copies the device enqueues.
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Records an event on `stream` after the copies just enqueued there that use this block,
    /// which the block waits for before it is written or reused.
    ///
    /// # Errors
    /// If the event cannot be recorded; the stream was synchronised then, so no copy uses the
    /// block any more.
    ///
    /// # Safety
    /// `stream` is a live stream of this block's context, which is current on the calling
    /// thread, and every copy that uses the block and was not waited for ([`wait`](Self::wait))
    /// was enqueued on `stream`. The one event then follows them all: were a copy on another
    /// stream, the block could be written or lent again while that copy still reads or writes it.
    pub(crate) unsafe fn record_in_flight(
        &mut self,
        stream: sys::CUstream,
    ) -> Result<(), DeviceError> {
        debug_assert!(self.in_flight.is_none(), "earlier copies were waited for");
        let ctx = &self.ctx;
        let event = ctx.event()?;
        // SAFETY: `event` comes from this block's context (`Context::event`), and `stream` is a
        // live stream of that context, current on this thread (this function's contract).
        if let Err(e) = unsafe { result::event::record(event, stream) } {
            // SAFETY: `event` came from `ctx.event()` above and was never recorded: nothing
            // else holds it.
            unsafe { ctx.recycle_event(event) };
            // SAFETY: a live stream of the current context (this function's contract).
            let _ = unsafe { result::stream::synchronize(stream) };
            return Err(ctx.fail("cuEventRecord", e));
        }
        self.in_flight = Some(event);
        Ok(())
    }

    /// Whether the copy in flight, if any, completed. Never blocks.
    pub(crate) fn arrived(&self) -> bool {
        self.in_flight.is_none_or(|event| {
            // SAFETY: `in_flight` holds only events of this block's context, set by
            // `record_in_flight` from `Context::event` and owned by the block until recycled.
            unsafe { self.ctx.event_done(event) }
        })
    }

    /// Blocks until the copy in flight, if any, completed.
    ///
    /// # Errors
    /// The driver's failure to wait (a sticky error loses the context); no copy uses the block
    /// any more then either.
    pub(crate) fn wait(&mut self) -> Result<(), DeviceError> {
        let Some(event) = self.in_flight.take() else {
            return Ok(());
        };
        // On a lost context nothing runs any more: no wait needed.
        let waited = self.ctx.bind().and_then(|()| {
            // SAFETY: `event` came from this context's pool (`record_in_flight`), which the
            // `bind` above made current; pooled events live as long as the context.
            unsafe { sys::cuEventSynchronize(event) }
                .result()
                .map_err(|e| self.ctx.fail("cuEventSynchronize", e))
        });
        // SAFETY: `event` came from `self.ctx.event()` (`record_in_flight`) and was taken out of
        // `in_flight` above: the block no longer holds it.
        unsafe { self.ctx.recycle_event(event) };
        waited
    }
}

impl HostBlock for PinnedBlock {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `capacity` bytes owned by this block, all initialised (`alloc_zeroed`), and
        // no copy engine writes them while the slice lives (see `Sync`).
        unsafe { std::slice::from_raw_parts(self.ptr(), self.capacity) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.wait_idle();
        // SAFETY: as in `as_slice`; exclusively borrowed, and no copy uses the bytes any more
        // (`wait_idle` above waited for the event recorded after the last one).
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.capacity) }
    }

    fn is_idle(&mut self) -> bool {
        if !self.arrived() {
            return false;
        }
        if let Some(event) = self.in_flight.take() {
            // SAFETY: as in `wait`: an event of this context's pool, no longer held by the block.
            unsafe { self.ctx.recycle_event(event) };
        }
        true
    }

    fn wait_idle(&mut self) {
        // A failed wait lost the context: nothing uses the block any more.
        let _ = self.wait();
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        self.wait_idle();
        // On a lost context the memory goes with the process.
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by `cuMemHostAlloc`; no copy uses it any more (waited above).
            let _ = unsafe { result::free_host(self.ptr().cast()) };
        }
    }
}

/// The pinned block of `ctx` behind `data`, if that is what `data` is.
pub(crate) fn of_context<'a>(data: &'a mut Bytes, ctx: &Arc<Context>) -> Option<&'a mut LentBlock> {
    let memory: &mut dyn Any = data.pinned_mut()?;
    memory
        .downcast_mut::<LentBlock>()
        .filter(|lent| Arc::ptr_eq(lent.pool().allocator().context(), ctx))
}

/// Enqueues a copy of all of `lent` to `dst` on `stream`, read in place by the copy engine; the
/// block is reused only after that copy completed.
///
/// # Safety
/// `stream` is a live stream of `lent`'s context, which is current on the calling thread, and
/// the `lent.len()` bytes from `dst` lie inside a device allocation of that context that stays
/// allocated until the copy completes.
pub(crate) unsafe fn copy_to_device(
    lent: &mut LentBlock,
    stream: sys::CUstream,
    dst: sys::CUdeviceptr,
) -> Result<(), DeviceError> {
    let len = lent.len();
    let block = lent.block_mut();
    // One event covers the block's copies: wait for an earlier one (a second write of the
    // same bytes) first.
    block.wait()?;
    // SAFETY: the source is `len` bytes of pinned memory owned by the block (`lent.len()` is at
    // most its capacity), neither written nor lent again before the event recorded below
    // completes (`PinnedBlock::as_mut_slice` waits for it, and `HostPool::lend` lends a kept
    // block only once it is idle); destination range and stream as this function's contract
    // says.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, block.ptr().cast(), len, stream) }
        .result()
        .map_err(|e| block.ctx.fail("cuMemcpyHtoDAsync", e))?;
    // SAFETY: the only copy of the block not waited for (`wait` above) was just enqueued on
    // `stream`, a live stream of the block's context, current here (this function's contract).
    unsafe { block.record_in_flight(stream) }
}
