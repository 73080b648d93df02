//! Host transfers at the copy engine's speed, through the context's pool of pinned blocks
//! (`pinned.rs`).
//!
//! The GPU's copy engines reach only pinned memory at full speed: a pageable copy is staged by
//! the driver, one small buffer at a time (6–15 GB/s on an H200, against about 55 GB/s pinned).
//! - A read is one transfer into a pooled pinned block, which the caller receives as `Bytes`:
//!   no copy follows the transfer (a copy into a fresh `Vec` ran at 9–16 GB/s, bound by its
//!   page faults).
//! - A large write from pageable bytes is staged into a pooled pinned block chunk by chunk, by
//!   several threads, each enqueueing a chunk's transfer as soon as it copied it, so the host's
//!   copies of later chunks overlap the copy engine's work on earlier ones; one event after
//!   the last transfer returns the block to use. The copies use non-temporal stores
//!   (`streaming_copy.rs`): the CPU never reads a staged chunk again.
//!
//! **Invariants.** A block a transfer uses is lent to that transfer (a pending read, a write
//! being staged) and returns to the pool with the event recorded after its transfers; the pool
//! reuses it only once that event completed (`lockstep::host_pool`). A transfer that fails
//! after enqueueing copies without an event synchronises the stream before its block returns.

use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys;
use lockstep::host_pool::{HostBlock, class_of};
use lockstep::{Bytes, DeviceError};

use crate::context::Context;
use crate::pinned::{LentBlock, PinnedPool};
use crate::streaming_copy::copy_streaming;

/// Most bytes one pinned block stages of a write; longer writes go a segment at a time, so
/// staging never pins more than this per write.
const SEGMENT_BYTES_MAX: usize = 256 << 20;

/// The pinned pool's bytes an upload of `len` bytes lends, a segment at a time.
pub(crate) fn pool_bytes_needed(len: usize) -> u64 {
    let segments = len / SEGMENT_BYTES_MAX;
    let last = len % SEGMENT_BYTES_MAX;
    let last_class = if last == 0 { 0 } else { class_of(last) };
    (segments * class_of(SEGMENT_BYTES_MAX) + last_class) as u64
}

/// How writes from pageable bytes are staged ([`CudaDevice::with_write_staging`]): chunks of
/// `chunk_bytes`, copied by up to `threads_max` threads (the calling one included, and never
/// more than the machine's cores). `benches/runtime_vs_raw.rs` measures a sweep of both.
///
/// [`CudaDevice::with_write_staging`]: crate::CudaDevice::with_write_staging
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteStaging {
    /// Bytes each thread copies into pinned memory before that chunk's transfer starts.
    pub chunk_bytes: usize,
    /// Most threads copying at once, the calling one included (capped at the machine's cores).
    pub threads_max: usize,
}

impl Default for WriteStaging {
    /// 2 MiB chunks on up to 16 threads: the best of the chunked staging measured on an H200
    /// (256 MiB, 16 threads: 2 MiB 40 GB/s, 4 MiB 33, 8 MiB 29).
    fn default() -> Self {
        Self {
            chunk_bytes: 2 << 20,
            threads_max: 16,
        }
    }
}

impl WriteStaging {
    /// Chunks of at least 4 KiB, at least one thread.
    pub(crate) fn sanitized(self) -> Self {
        Self {
            chunk_bytes: self.chunk_bytes.max(4 << 10),
            threads_max: self.threads_max.max(1),
        }
    }

    /// Threads for `len` bytes: one per chunk, up to the cores and `threads_max`.
    fn threads(self, len: usize) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        len.div_ceil(self.chunk_bytes)
            .min(cores)
            .clamp(1, self.threads_max)
    }
}

/// Runs `job` on every share, each on its own thread (the calling one takes the first), with
/// the context current. Returns the first error; every share runs regardless, so each job
/// releases what its share owns.
fn for_each_parallel<T: Send>(
    ctx: &Context,
    shares: Vec<T>,
    threads: usize,
    job: impl Fn(T) -> Result<(), DeviceError> + Sync,
) -> Result<(), DeviceError> {
    debug_assert_eq!(shares.len(), threads, "one share per thread");
    let mut shares = shares.into_iter();
    let Some(own) = shares.next() else {
        return Ok(());
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = shares
            .map(|share| {
                scope.spawn(|| {
                    // A fresh thread: make the context current before any driver call.
                    ctx.bind()?;
                    job(share)
                })
            })
            .collect();
        let mut first = job(own);
        for helper in helpers {
            let outcome = helper.join().unwrap_or_else(|_| {
                Err(DeviceError::TransferFailed {
                    reason: "a staging copy thread panicked".to_owned(),
                })
            });
            if first.is_ok() {
                first = outcome;
            }
        }
        first
    })
}

/// Enqueues a host-to-device copy of `data` to `dst` on `stream`, staged through pooled pinned
/// blocks a segment at a time. Returns once every byte of `data` is in pinned memory, so the
/// caller may reuse `data`.
///
/// # Safety
/// `pool` is `ctx`'s pool of pinned blocks; `stream` is a live stream of `ctx`, which is
/// current on the calling thread; and the `data.len()` bytes from `dst` lie inside a device
/// allocation of `ctx` that stays allocated until the copies complete.
pub(crate) unsafe fn upload(
    pool: &Arc<PinnedPool>,
    ctx: &Context,
    stream: sys::CUstream,
    dst: sys::CUdeviceptr,
    data: &[u8],
    staging: WriteStaging,
) -> Result<(), DeviceError> {
    for (index, segment) in data.chunks(SEGMENT_BYTES_MAX).enumerate() {
        let at = dst + (index * SEGMENT_BYTES_MAX) as u64;
        // SAFETY: the segment's bytes from `at` are the part of `dst`'s range it fills, inside
        // the allocation; pool, context and stream as this function's contract says.
        unsafe { upload_segment(pool, ctx, stream, at, segment, staging) }?;
    }
    Ok(())
}

/// A chunk of a write: its offset in the segment, where it is staged, and its source.
type StagedChunk<'a> = (u64, &'a mut [u8], &'a [u8]);

/// Stages `segment` in one pooled block: each thread copies its chunks (every `threads`-th,
/// so the first chunks are staged first) and enqueues each chunk's transfer right after
/// copying it; one event after them all returns the block to use.
///
/// # Safety
/// As for [`upload`], with `segment` for `data`.
unsafe fn upload_segment(
    pool: &Arc<PinnedPool>,
    ctx: &Context,
    stream: sys::CUstream,
    dst: sys::CUdeviceptr,
    segment: &[u8],
    staging: WriteStaging,
) -> Result<(), DeviceError> {
    let mut lent = pool.lend(segment.len())?;
    let chunk = staging.chunk_bytes;
    let threads = staging.threads(segment.len());
    let staged = &mut lent.block_mut().as_mut_slice()[..segment.len()];
    let mut shares: Vec<Vec<StagedChunk<'_>>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, (to, from)) in staged
        .chunks_mut(chunk)
        .zip(segment.chunks(chunk))
        .enumerate()
    {
        shares[i % threads].push(((i * chunk) as u64, to, from));
    }
    let stream_handle = StreamHandle(stream);
    let copied = for_each_parallel(ctx, shares, threads, |share| {
        for (offset, to, from) in share {
            copy_streaming(to, from);
            // SAFETY: `to` is pinned memory of the lent block, which is neither written nor
            // lent again before the event recorded after every chunk completes (or the stream
            // is synchronised on failure, below); `to.len()` bytes from `dst + offset` lie
            // inside the caller's allocation (this function's contract: chunk `i` starts at
            // `i * chunk` of `segment`); `stream_handle` is the caller's stream of `ctx`, which
            // `for_each_parallel` made current on each helper thread.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    dst + offset,
                    to.as_ptr().cast(),
                    to.len(),
                    stream_handle.get(),
                )
            }
            .result()
            .map_err(|e| ctx.fail("cuMemcpyHtoDAsync", e))?;
        }
        Ok(())
    });
    if let Err(err) = copied {
        // Chunks may be in flight without an event: let them finish before the block returns.
        // SAFETY: a live stream of `ctx`, current on this thread (this function's contract).
        let _ = unsafe { result::stream::synchronize(stream) };
        return Err(err);
    }
    // SAFETY: every copy of the block (lent above, idle then: `as_mut_slice` waited) was
    // enqueued on `stream`, a live stream of the block's context: `pool` is `ctx`'s pool.
    unsafe { lent.block_mut().record_in_flight(stream) }
}

/// A stream handle that helper threads may use.
#[derive(Clone, Copy)]
struct StreamHandle(sys::CUstream);

// SAFETY: an opaque driver handle, which the driver accepts from any thread with its context
// current: each helper thread binds it first (`for_each_parallel`).
unsafe impl Send for StreamHandle {}
// SAFETY: as for `Send`; the handle is only copied, never changed.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    /// The raw handle. A method (not the field) so closures capture the whole `Sync` wrapper.
    fn get(self) -> sys::CUstream {
        self.0
    }
}

/// A device-to-host copy in flight (the device's `PendingRead`): one transfer into a pooled
/// pinned block, which becomes the read's `Bytes`. Dropped unconsumed, the block returns to the
/// pool with its transfer's event and is reused only once that completed.
#[derive(Debug)]
pub struct CudaRead {
    /// `None` for an empty read.
    lent: Option<LentBlock>,
}

impl CudaRead {
    /// Enqueues a copy of `len` bytes at `src` into a pooled pinned block, followed by an
    /// event.
    ///
    /// # Safety
    /// `pool` is `ctx`'s pool of pinned blocks; `stream` is a live stream of `ctx`, which is
    /// current on the calling thread; and the `len` bytes from `src` lie inside a device
    /// allocation of `ctx` that stays allocated until the copy completes.
    pub(crate) unsafe fn enqueue(
        pool: &Arc<PinnedPool>,
        ctx: &Context,
        stream: sys::CUstream,
        src: sys::CUdeviceptr,
        len: usize,
    ) -> Result<Self, DeviceError> {
        if len == 0 {
            return Ok(Self { lent: None });
        }
        let mut lent = pool.lend(len)?;
        let block = lent.block_mut();
        // SAFETY: the block holds at least `len` bytes and belongs to this read alone, idle
        // when lent (`HostPool::lend` lends a kept block only once its `is_idle` held or
        // `wait_idle` returned, runtime/src/host_pool.rs) and not lent again before the event
        // recorded below completes; source range and stream as this function's contract says.
        unsafe { sys::cuMemcpyDtoHAsync_v2(block.ptr().cast(), src, len, stream) }
            .result()
            .map_err(|e| ctx.fail("cuMemcpyDtoHAsync", e))?;
        // SAFETY: the block's only copy was just enqueued on `stream`, a live stream of the
        // block's context (`pool` is `ctx`'s), current here.
        unsafe { block.record_in_flight(stream) }?;
        Ok(Self { lent: Some(lent) })
    }

    /// Whether the bytes have arrived (never blocks).
    pub(crate) fn arrived(&self) -> bool {
        self.lent.as_ref().is_none_or(|lent| lent.block().arrived())
    }

    /// Waits for the transfer and lends its block as the read's bytes.
    pub(crate) fn finish(mut self) -> Result<Bytes, DeviceError> {
        let Some(mut lent) = self.lent.take() else {
            return Ok(Bytes::default());
        };
        lent.block_mut().wait()?;
        Ok(lent.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_lends_a_class_per_segment() {
        const MIB: u64 = 1 << 20;
        assert_eq!(pool_bytes_needed(0), 0);
        assert_eq!(pool_bytes_needed(1), 4096);
        assert_eq!(pool_bytes_needed(256 << 20), 256 * MIB);
        assert_eq!(pool_bytes_needed((256 << 20) + 1), 256 * MIB + 4096);
        assert_eq!(pool_bytes_needed(5 << 28), 1280 * MIB);
        // 300 MiB: a full segment and 44 MiB, whose class is 48 MiB (steps of 8 MiB below 64).
        assert_eq!(pool_bytes_needed(300 << 20), (256 + 48) * MIB);
    }
}
