//! Pinned host memory handed to users ([`ComputeClient::staging`]), and writes that the copy
//! engine reads straight from it, skipping the staging copy of `staging.rs`.
//!
//! **Invariant:** a [`CudaPinned`] is freed only after the last copy reading it completed: a
//! write records an event after its copy and the memory's drop waits for that event.
//!
//! [`ComputeClient::staging`]: lockstep::ComputeClient::staging

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUresult};
use lockstep::{Bytes, DeviceError, PinnedMemory};

use crate::context::Context;

/// Page-locked host memory of one context (`cuMemHostAlloc`, portable).
#[derive(Debug)]
pub(crate) struct CudaPinned {
    ptr: NonNull<u8>,
    len: usize,
    ctx: Arc<Context>,
    /// Recorded after the last copy that reads this memory.
    in_flight: Option<sys::CUevent>,
}

// SAFETY: plain host memory owned by this value; the raw event is an opaque driver handle,
// used only with the context bound.
unsafe impl Send for CudaPinned {}
// SAFETY: shared access only reads the memory.
unsafe impl Sync for CudaPinned {}

impl CudaPinned {
    /// `len` zeroed bytes as pinned [`Bytes`].
    pub(crate) fn alloc(ctx: &Arc<Context>, len: usize) -> Result<Bytes, DeviceError> {
        ctx.bind()?;
        // SAFETY: allocates at least one byte of portable pinned memory; checked below.
        let ptr = unsafe { result::malloc_host(len.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(|e| ctx.fail("cuMemHostAlloc", e))?;
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| {
            ctx.fail(
                "cuMemHostAlloc",
                cudarc::driver::DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            )
        })?;
        // SAFETY: `len` bytes of the allocation; zeroed so that slices of it are initialised.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(Bytes::from_pinned(Box::new(Self {
            ptr,
            len,
            ctx: ctx.clone(),
            in_flight: None,
        })))
    }

    /// The pinned memory of `ctx` behind `data`, if that is what `data` is.
    pub(crate) fn of_context<'a>(data: &'a mut Bytes, ctx: &Arc<Context>) -> Option<&'a mut Self> {
        let memory: &mut dyn Any = data.pinned_mut()?;
        memory
            .downcast_mut::<Self>()
            .filter(|pinned| Arc::ptr_eq(&pinned.ctx, ctx))
    }

    /// Enqueues a copy of all of this memory to `dst` on `stream`, read in place by the copy
    /// engine; the memory stays allocated until the copy completed.
    pub(crate) fn copy_to_device(
        &mut self,
        stream: sys::CUstream,
        dst: sys::CUdeviceptr,
    ) -> Result<(), DeviceError> {
        self.wait_in_flight();
        // SAFETY: `len` bytes of pinned memory owned by `self`, which outlives the copy (see
        // the module invariant); the destination range is inside the runtime's buffer.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, self.ptr.as_ptr().cast(), self.len, stream) }
            .result()
            .map_err(|e| self.ctx.fail("cuMemcpyHtoDAsync", e))?;
        let event = self.ctx.event()?;
        // SAFETY: a pooled event of this context; the stream belongs to it.
        if let Err(e) = unsafe { result::event::record(event, stream) } {
            self.ctx.recycle_event(event);
            // The copy may be in flight: wait for the stream before the memory can go.
            // SAFETY: the stream belongs to this context.
            let _ = unsafe { result::stream::synchronize(stream) };
            return Err(self.ctx.fail("cuEventRecord", e));
        }
        self.in_flight = Some(event);
        Ok(())
    }

    /// Blocks until the last copy reading this memory completed (at once on a lost context).
    fn wait_in_flight(&mut self) {
        if let Some(event) = self.in_flight.take() {
            if self.ctx.bind().is_ok() {
                // SAFETY: a pooled event of this context, recorded after the copy.
                let _ = unsafe { sys::cuEventSynchronize(event) };
            }
            self.ctx.recycle_event(event);
        }
    }
}

impl PinnedMemory for CudaPinned {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` bytes owned by `self`; copies only read them.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // A copy may still read the memory: let it finish before handing out a writer.
        self.wait_in_flight();
        // SAFETY: `len` bytes owned by `self`, and no copy reads them any more.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for CudaPinned {
    fn drop(&mut self) {
        self.wait_in_flight();
        // On a lost context the memory goes with the process.
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by `cuMemHostAlloc`; no copy reads it any more.
            let _ = unsafe { result::free_host(self.ptr.as_ptr().cast()) };
        }
    }
}
