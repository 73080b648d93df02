//! Host transfers through pinned (page-locked) staging memory.
//!
//! The GPU's copy engines reach only pinned memory at full speed: a pageable copy is staged by
//! the driver, one small buffer at a time (6–15 GB/s on an H200, against about 55 GB/s pinned).
//! So large transfers go through a pool of pinned buffers shared by the devices of a context,
//! in chunks of [`CHUNK_BYTES`], and the host-side copies into and out of those chunks run on
//! several threads while the copy engine moves the chunks already staged.
//!
//! **Invariants.** A staging buffer is in exactly one place: idle in the pool, lent to one
//! transfer, or busy (a copy engine may still read it) with the event that completes after
//! that copy. A busy buffer is handed out again only after its event completed. A pending
//! read owns its buffers until its bytes are copied out, or until its drop has waited for them.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::result;
use cudarc::driver::sys;
use lockstep::DeviceError;

use crate::context::Context;
use crate::error::describe;
use crate::pinned;

/// Size of the pieces a large transfer is cut into: each is staged, copied and waited on by
/// itself, so host copies of one chunk overlap the copy engine's work on others. Measured on an
/// H200 (256 MiB writes, 16 threads): 2 MiB chunks 40 GB/s, 4 MiB 33 GB/s, 8 MiB 29 GB/s.
pub(crate) const CHUNK_BYTES: usize = 2 << 20;
/// Smallest staging buffer; smaller transfers round up to it.
const SLOT_BYTES_MIN: usize = 4 << 10;
/// Pinned memory the pool keeps; past it, finished buffers are freed instead of kept, and a
/// transfer waits for a busy buffer rather than pinning more.
const BYTES_CACHED_MAX: usize = 512 << 20;
/// Most threads one transfer uses for its host-side copies. Reads are bound by the page faults
/// of their fresh output `Vec`, which scale with threads (H200 host, 256 MiB: 9 GB/s with 8
/// threads, 16 GB/s with 16).
const COPY_THREADS_MAX: usize = 16;

/// The size class (a power of two) of a staging buffer for `len` bytes.
fn class_of(len: usize) -> usize {
    len.next_power_of_two().clamp(SLOT_BYTES_MIN, CHUNK_BYTES)
}

/// One page-locked host allocation. Freed only through [`StagingPool`], with the context
/// current. Its bytes are initialised: zeroed when allocated (`pinned::alloc_zeroed`), written
/// since only through `slice_mut` or by the copy engine.
#[derive(Debug)]
pub(crate) struct PinnedBuf {
    ptr: NonNull<u8>,
    bytes: usize,
}

// SAFETY: the buffer is plain host memory owned by this value; nothing else aliases it while
// it is lent out (see the module invariants).
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    fn alloc(bytes: usize) -> Result<Self, cudarc::driver::DriverError> {
        let ptr = pinned::alloc_zeroed(bytes)?;
        Ok(Self { ptr, bytes })
    }

    fn free(self) {
        // SAFETY: allocated by `cuMemHostAlloc`; no copy uses it any more (module invariants).
        let _ = unsafe { result::free_host(self.ptr.as_ptr().cast()) };
    }

    fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr().cast()
    }

    fn slice(&self, len: usize) -> &[u8] {
        assert!(len <= self.bytes, "a staging buffer holds at most its size");
        // SAFETY: `len` initialised bytes (see the type) of this allocation. Callers read only
        // after the copy that wrote them completed (a read's chunk after its event), so no copy
        // engine writes them while the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }

    fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.bytes, "a staging buffer holds at most its size");
        // SAFETY: `len` initialised bytes (see the type) of this allocation, exclusively
        // borrowed through `&mut self`; a copy engine reads them only after the caller's
        // writes, and the caller waits for that copy before writing again (`stage_chunk`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }
}

/// A recorded event that completes after the copy that used a staging buffer.
#[derive(Debug)]
struct CopyEvent(sys::CUevent);

// SAFETY: an opaque driver handle, used from whichever thread has the context current.
unsafe impl Send for CopyEvent {}

/// Pinned staging buffers of one context, by size class.
#[derive(Debug, Default)]
pub(crate) struct StagingPool {
    idle: BTreeMap<usize, Vec<PinnedBuf>>,
    /// Oldest first: buffers a copy engine may still read, each with the event after it.
    busy: VecDeque<(PinnedBuf, CopyEvent)>,
    /// Everything allocated and not yet freed: idle, busy and lent out.
    bytes_total: usize,
}

impl StagingPool {
    /// A buffer of at least `len` bytes (at most [`CHUNK_BYTES`]) for one transfer.
    fn take(&mut self, ctx: &Context, len: usize) -> Result<PinnedBuf, DeviceError> {
        let class = class_of(len);
        if let Some(buf) = self.idle.get_mut(&class).and_then(Vec::pop) {
            return Ok(buf);
        }
        // Only when nothing idle fits: look for busy buffers whose copies have completed.
        self.reap(ctx);
        if let Some(buf) = self.idle.get_mut(&class).and_then(Vec::pop) {
            return Ok(buf);
        }
        if self.bytes_total + class > BYTES_CACHED_MAX
            && let Some(at) = self.busy.iter().position(|(b, _)| b.bytes == class)
        {
            let (buf, event) = self.busy.remove(at).expect("the position is in range");
            // SAFETY: the event is from this context's pool and was recorded after the copy.
            let waited = unsafe { result::event::synchronize(event.0) };
            ctx.recycle_event(event.0);
            return match waited {
                Ok(()) => Ok(buf),
                Err(e) => {
                    self.give(buf);
                    Err(ctx.fail("cuEventSynchronize", e))
                }
            };
        }
        let buf = PinnedBuf::alloc(class).map_err(|e| match ctx.fail("cuMemHostAlloc", e) {
            DeviceError::ExecutionFault { .. } => DeviceError::TransferFailed {
                reason: format!(
                    "cannot allocate {class} bytes of pinned staging memory: {}",
                    describe(e)
                ),
            },
            other => other,
        })?;
        self.bytes_total += class;
        Ok(buf)
    }

    /// Returns a buffer no copy uses any more.
    fn give(&mut self, buf: PinnedBuf) {
        if self.bytes_total > BYTES_CACHED_MAX {
            self.bytes_total -= buf.bytes;
            buf.free();
        } else {
            self.idle.entry(buf.bytes).or_default().push(buf);
        }
    }

    /// Returns a buffer a copy engine may still read until `event` completes.
    fn retire(&mut self, buf: PinnedBuf, event: CopyEvent) {
        self.busy.push_back((buf, event));
    }

    /// Moves busy buffers whose copies completed back to idle.
    fn reap(&mut self, ctx: &Context) {
        let mut index = 0;
        while index < self.busy.len() {
            if ctx.event_done(self.busy[index].1.0) {
                let (buf, event) = self.busy.remove(index).expect("the index is in range");
                ctx.recycle_event(event.0);
                self.give(buf);
            } else {
                index += 1;
            }
        }
    }

    /// Frees every buffer. The context is current and idle (or lost), so no copy uses them.
    pub fn release_all(&mut self) {
        for (buf, event) in std::mem::take(&mut self.busy) {
            // SAFETY: the context is idle; the event is referenced nowhere else.
            let _ = unsafe { result::event::destroy(event.0) };
            buf.free();
        }
        for buf in std::mem::take(&mut self.idle).into_values().flatten() {
            buf.free();
        }
        self.bytes_total = 0;
    }
}

/// How many threads copy a transfer of `len` bytes on the host: one per chunk, up to the
/// machine's cores and [`COPY_THREADS_MAX`].
fn copy_threads(len: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    len.div_ceil(CHUNK_BYTES)
        .min(cores)
        .clamp(1, COPY_THREADS_MAX)
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

/// Enqueues a host-to-device copy of `data` to `dst` on `stream` through pinned staging.
/// Returns once every byte of `data` is in staging memory, so the caller may reuse `data`.
///
/// Each copy thread takes its share of the chunks with two staging buffers of its own: it
/// fills one while the copy engine reads the other, and waits for a buffer's previous copy
/// before refilling it. The pool is touched twice per thread, not per chunk.
pub(crate) fn upload(
    ctx: &Context,
    stream: sys::CUstream,
    dst: sys::CUdeviceptr,
    data: &[u8],
) -> Result<(), DeviceError> {
    let threads = copy_threads(data.len());
    let chunks: Vec<(usize, &[u8])> = data
        .chunks(CHUNK_BYTES)
        .enumerate()
        .map(|(i, chunk)| (i * CHUNK_BYTES, chunk))
        .collect();
    let mut shares: Vec<Vec<(usize, &[u8])>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, chunk) in chunks.into_iter().enumerate() {
        shares[i % threads].push(chunk);
    }
    let stream = StreamHandle(stream);
    for_each_parallel(ctx, shares, threads, |share| {
        let mut buffers: [Option<(PinnedBuf, Option<CopyEvent>)>; 2] = [None, None];
        let mut outcome = Ok(());
        for (k, (offset, chunk)) in share.into_iter().enumerate() {
            outcome = stage_chunk(
                ctx,
                stream.get(),
                &mut buffers[k % 2],
                dst + offset as u64,
                chunk,
            );
            if outcome.is_err() {
                break;
            }
        }
        let mut pool = ctx.staging();
        for (buf, event) in buffers.into_iter().flatten() {
            match event {
                Some(event) => pool.retire(buf, event),
                None => pool.give(buf),
            }
        }
        outcome
    })
}

/// Stages `chunk` in `slot` (waiting for the slot's previous copy first) and enqueues its copy
/// to `dst`, leaving the slot busy with the copy's event.
fn stage_chunk(
    ctx: &Context,
    stream: sys::CUstream,
    slot: &mut Option<(PinnedBuf, Option<CopyEvent>)>,
    dst: sys::CUdeviceptr,
    chunk: &[u8],
) -> Result<(), DeviceError> {
    let (buf, pending) = match slot {
        Some(entry) => entry,
        None => slot.insert((ctx.staging().take(ctx, CHUNK_BYTES)?, None)),
    };
    if let Some(event) = pending.take() {
        // SAFETY: the event is from this context's pool and was recorded after the copy.
        let waited = unsafe { result::event::synchronize(event.0) };
        ctx.recycle_event(event.0);
        waited.map_err(|e| ctx.fail("cuEventSynchronize", e))?;
    }
    buf.slice_mut(chunk.len()).copy_from_slice(chunk);
    // SAFETY: `buf` holds `chunk.len()` staged bytes and is not written again before the
    // event recorded below completes; `dst` lies inside the range the device checked
    // (`contract::range`).
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, buf.as_ptr(), chunk.len(), stream) }
        .result()
        .map_err(|e| ctx.fail("cuMemcpyHtoDAsync", e))?;
    match record(ctx, stream) {
        Ok(event) => {
            *pending = Some(event);
            Ok(())
        }
        Err(err) => {
            // Without an event, wait for the copy itself before the buffer can be reused.
            // SAFETY: the stream belongs to this context.
            let _ = unsafe { result::stream::synchronize(stream) };
            Err(err)
        }
    }
}

/// Records a pooled event on `stream`.
fn record(ctx: &Context, stream: sys::CUstream) -> Result<CopyEvent, DeviceError> {
    let event = ctx.event()?;
    // SAFETY: the event is from this context's pool; the stream belongs to the context.
    match unsafe { result::event::record(event, stream) } {
        Ok(()) => Ok(CopyEvent(event)),
        Err(e) => {
            ctx.recycle_event(event);
            Err(ctx.fail("cuEventRecord", e))
        }
    }
}

/// A stream handle that helper threads may use.
#[derive(Clone, Copy)]
struct StreamHandle(sys::CUstream);

// SAFETY: an opaque driver handle; each helper thread binds the stream's context first.
unsafe impl Send for StreamHandle {}
// SAFETY: as for `Send`; the handle is only copied.
unsafe impl Sync for StreamHandle {}

impl StreamHandle {
    /// The raw handle. A method (not the field) so closures capture the whole `Sync` wrapper.
    fn get(self) -> sys::CUstream {
        self.0
    }
}

/// One staged piece of a read: the copy engine fills `buf` and then `event` completes.
#[derive(Debug)]
struct ReadChunk {
    buf: PinnedBuf,
    event: CopyEvent,
    len: usize,
}

/// A device-to-host copy in flight (the device's `PendingRead`). Dropping it unconsumed waits
/// for its copies, so no staging buffer returns to the pool while a copy engine writes it.
#[derive(Debug)]
pub struct CudaRead {
    ctx: Arc<Context>,
    chunks: Vec<ReadChunk>,
    len: usize,
}

impl CudaRead {
    /// Enqueues a copy of `len` bytes at `src` into staging, chunk by chunk, each followed by
    /// an event.
    pub(crate) fn enqueue(
        ctx: &Arc<Context>,
        stream: sys::CUstream,
        src: sys::CUdeviceptr,
        len: usize,
    ) -> Result<Self, DeviceError> {
        // Built up as chunks are enqueued, so that an error midway drops (and waits for) the
        // chunks already in flight.
        let mut read = Self {
            ctx: ctx.clone(),
            chunks: Vec::with_capacity(len.div_ceil(CHUNK_BYTES)),
            len,
        };
        let mut offset = 0;
        while offset < len {
            let chunk = (len - offset).min(CHUNK_BYTES);
            let buf = ctx.staging().take(ctx, chunk)?;
            // SAFETY: `buf` has room for `chunk` bytes and is owned by this read until its
            // event completes; `src + offset` lies inside the range the device checked
            // (`contract::range`).
            let copied = unsafe {
                sys::cuMemcpyDtoHAsync_v2(buf.as_ptr(), src + offset as u64, chunk, stream)
            }
            .result();
            if let Err(e) = copied {
                ctx.staging().give(buf);
                return Err(ctx.fail("cuMemcpyDtoHAsync", e));
            }
            let event = match record(ctx, stream) {
                Ok(event) => event,
                Err(err) => {
                    // SAFETY: the stream belongs to this context.
                    let _ = unsafe { result::stream::synchronize(stream) };
                    ctx.staging().give(buf);
                    return Err(err);
                }
            };
            read.chunks.push(ReadChunk {
                buf,
                event,
                len: chunk,
            });
            offset += chunk;
        }
        Ok(read)
    }

    /// Waits for each chunk and copies it out, several chunks at a time on large reads: the
    /// first chunks are copied out (and the fresh output's pages faulted in) while the copy
    /// engine still fills the later ones.
    /// Whether every chunk has arrived (never blocks).
    pub(crate) fn arrived(&self) -> bool {
        // The chunks are copied in order on one stream: the last event completes last.
        self.chunks
            .last()
            .is_none_or(|chunk| self.ctx.event_done(chunk.event.0))
    }

    pub(crate) fn finish(mut self) -> Result<Vec<u8>, DeviceError> {
        self.ctx.bind()?;
        let mut out = vec![0u8; self.len];
        let threads = copy_threads(self.len);
        let mut shares: Vec<Vec<(ReadChunk, &mut [u8])>> =
            (0..threads).map(|_| Vec::new()).collect();
        let chunks = std::mem::take(&mut self.chunks);
        for (i, item) in chunks
            .into_iter()
            .zip(out.chunks_mut(CHUNK_BYTES))
            .enumerate()
        {
            shares[i % threads].push(item);
        }
        let ctx = &*self.ctx;
        for_each_parallel(ctx, shares, threads, |share| {
            let mut outcome = Ok(());
            let mut done = Vec::with_capacity(share.len());
            for (chunk, dst) in share {
                // SAFETY: the event is from this context's pool and was recorded after the copy.
                let waited = unsafe { result::event::synchronize(chunk.event.0) };
                ctx.recycle_event(chunk.event.0);
                match waited {
                    Ok(()) => dst.copy_from_slice(chunk.buf.slice(chunk.len)),
                    Err(e) if outcome.is_ok() => outcome = Err(ctx.fail("cuEventSynchronize", e)),
                    Err(_) => {}
                }
                done.push(chunk.buf);
            }
            let mut pool = ctx.staging();
            done.into_iter().for_each(|buf| pool.give(buf));
            outcome
        })?;
        Ok(out)
    }
}

impl Drop for CudaRead {
    fn drop(&mut self) {
        if self.chunks.is_empty() {
            return;
        }
        // Unconsumed: wait for the copies before the buffers go back to the pool. On a lost
        // context the waits fail at once and nothing writes the buffers any more.
        let _ = self.ctx.bind();
        for chunk in std::mem::take(&mut self.chunks) {
            // SAFETY: the event is from this context's pool and was recorded after the copy.
            let _ = unsafe { result::event::synchronize(chunk.event.0) };
            self.ctx.recycle_event(chunk.event.0);
            self.ctx.staging().give(chunk.buf);
        }
    }
}
