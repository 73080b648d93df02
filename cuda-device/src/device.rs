//! `CudaDevice`: the [`Device`] trait on the CUDA driver API.
//!
//! Streams are non-blocking CUDA streams; events are pooled CUDA events (without timing for
//! ordering, with timing for timestamps); host transfers go through the context's pool of
//! pinned blocks (`staging.rs`, `pinned.rs`), reads returned in the block they landed in; kernels are lowered to CUDA C (`lower.rs`), compiled by NVRTC for the
//! device's architecture and cached per context by (IR hash, checked); graphs are CUDA graphs
//! captured from the stream.
//!
//! **Errors.** A sticky CUDA error (illegal address, assert, hardware exception) makes the
//! context unusable for the rest of the process: it becomes [`DeviceError::Lost`], carrying the
//! CUDA error's name, and every later call of every device on the context returns it. No call
//! blocks after it: waits on a lost context fail at once. Nothing here panics on an error of
//! the driver or of a caller.
//!
//! **Soundness.** Every call checks its preconditions first (`lockstep::device::contract`:
//! ranges inside this device's buffers, streams of this device, launches that match their
//! kernel, graphs whose buffers are live) and refuses a broken one with
//! [`DeviceError::Contract`], so no safe call hands the driver an address outside an allocation
//! of this device. `free` waits for this device's streams before `cuMemFree`: only they can
//! use its buffers (other devices refuse them), so nothing queued can reach freed memory.

mod arguments;
mod nccl;
mod watch;
mod world;

pub use world::JoinWorldError;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUresult};
use lockstep::collective::CommunicatorId;
use lockstep::device::contract::{self, CheckedBuffer, LiveBuffers, Owner};
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::host_pool::{HostPoolStats, class_of};
use lockstep::kernel::{CompileOptions, ElemType, KernelDef, Scalar};
use lockstep::{
    Bytes, ContractViolation, Device, DeviceError, DeviceProperties, Features, GraphSupport,
    ReduceOperation,
};

use self::arguments::ArgumentSlots;
use crate::context::{Context, Function};
use crate::pinned::{self, PinnedAllocator, PinnedPool};
use crate::staging::{self, CudaRead, WriteStaging};

/// Writes up to this size are handed to the driver straight from the caller's memory: it
/// copies them into its command stream before returning, which beats staging for small sizes.
const DIRECT_WRITE_BYTES_MAX: usize = 64 << 10;
/// Blocks per multiprocessor an indirect launch runs; its blocks loop over the workgroups the
/// device reads when the launch executes.
const INDIRECT_BLOCKS_PER_SM: u32 = 16;

/// A CUDA context on one GPU, shareable by several [`CudaDevice`]s (cheap to clone).
///
/// Creating a context costs hundreds of milliseconds and a compiled kernel is cached per
/// context, so a process that opens many devices (the conformance suite opens one per case)
/// opens the context once and a device per use with [`CudaDevice::with_context`].
///
/// The context's pinned host blocks (what reads land in and writes stage through) are shared
/// by its devices and outlive them: every block lent holds the pool, which holds the context.
#[derive(Clone, Debug)]
pub struct CudaContext {
    ctx: Arc<Context>,
    host: Arc<PinnedPool>,
}

impl CudaContext {
    /// Opens the primary context of GPU `ordinal`. [`DeviceError::Unavailable`] says why when
    /// there is no driver, no NVRTC, no GPU, or a driver older than CUDA 13.
    pub fn new(ordinal: u32) -> Result<Self, DeviceError> {
        let ctx = Context::new(ordinal)?;
        Ok(Self {
            host: PinnedAllocator::pool(ctx.clone()),
            ctx,
        })
    }

    /// The GPU's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.ctx.info.name
    }

    /// The compute capability, e.g. `(9, 0)`.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.ctx.info.compute_capability
    }
}

/// A device allocation (`cuMemAlloc`).
#[derive(Debug)]
pub struct CudaBuffer {
    ptr: sys::CUdeviceptr,
    bytes: u64,
    owner: Owner,
    /// Numbers the device's allocations, for the liveness check at graph replay.
    id: u64,
}

impl CheckedBuffer for CudaBuffer {
    fn owner(&self) -> Owner {
        self.owner
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

impl CudaBuffer {
    /// The address of byte `offset`. Only called once the contract check of the range that
    /// starts there passed, so it lies inside this allocation.
    fn at(&self, offset: u64) -> sys::CUdeviceptr {
        debug_assert!(offset <= self.bytes, "contract checks come first");
        self.ptr + offset
    }

    /// The allocation's device address (`CUdeviceptr`), for code outside the runtime that
    /// reaches it through [`ComputeClient::get_resource`](lockstep::ComputeClient::get_resource).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The allocation's size in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

/// A stream of this device: an index into its streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaStream(u32);

/// A recorded event without timing. Returns to the context's pool when dropped.
#[derive(Debug)]
pub struct CudaEvent {
    raw: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: an opaque driver handle, which the driver accepts from any thread; the device binds
// its own context before waiting on it (`wait_event`), and recycling it only moves the handle
// into its context's pool, behind a lock.
unsafe impl Send for CudaEvent {}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `self.ctx.event()` (`record_event`, the only maker of a
        // `CudaEvent`), which this value alone held; it is dropped now.
        unsafe { self.ctx.recycle_event(self.raw) };
    }
}

/// A recorded event with timing. Returns to the context's pool when dropped.
#[derive(Debug)]
pub struct CudaTimestamp {
    raw: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: as for `CudaEvent`.
unsafe impl Send for CudaTimestamp {}

impl Drop for CudaTimestamp {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `self.ctx.timing_event()` (`record_timestamp`, the only maker
        // of a `CudaTimestamp`), which this value alone held; it is dropped now.
        unsafe { self.ctx.recycle_timing_event(self.raw) };
    }
}

/// A compiled kernel: the context's cached module entry and the IR a launch is checked against.
#[derive(Debug)]
pub struct CudaKernel {
    function: Function,
    def: Arc<KernelDef>,
    options: CompileOptions,
    /// Keeps the module (cached in the context) loaded while this kernel exists; a device of
    /// another context refuses it.
    ctx: Arc<Context>,
}

/// An instantiated CUDA graph.
#[derive(Debug)]
pub struct CudaGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    captured_on: Owner,
    /// Ids of the buffers its launches use: all must be live at a replay.
    buffers: Vec<u64>,
    /// Keeps the context alive until the graph is destroyed.
    _ctx: Arc<Context>,
}

// SAFETY: opaque driver handles, which the driver accepts from any thread; `replay` and
// `destroy_graph` bind the device's context first.
unsafe impl Send for CudaGraph {}

struct StreamState {
    raw: sys::CUstream,
    /// While capturing: an event recorded just before the capture began, which is what
    /// `synchronize` waits for (a capturing stream cannot be synchronised itself).
    capture: Option<sys::CUevent>,
    /// While capturing: ids of the buffers the captured launches use.
    captured_buffers: Vec<u64>,
}

/// A CUDA GPU as a Lockstep [`Device`]. See the module documentation.
pub struct CudaDevice {
    ctx: Arc<Context>,
    /// Tells this device's buffers and graphs from other devices' (`contract`).
    owner: Owner,
    live: LiveBuffers,
    next_buffer_id: u64,
    properties: DeviceProperties,
    streams: Vec<StreamState>,
    /// This device's ranks of NCCL communicators (`device/nccl.rs`).
    communicators: BTreeMap<CommunicatorId, nccl::Communicator>,
    /// The context's pinned blocks: reads, staged writes, `staging` (`pinned.rs`).
    host: Arc<PinnedPool>,
    /// How writes from pageable bytes are staged.
    write_staging: WriteStaging,
    /// How long a collective may wait for its peers (`device/nccl.rs`).
    collective_timeout: Duration,
    /// Collective failures found by a host wait, for `take_errors` of their stream.
    collective_errors: Vec<(CudaStream, DeviceError)>,
    /// The world of processes this device is a rank of, if any (`device/world.rs`).
    world: Option<world::WorldMember>,
}

// SAFETY: the raw stream and event handles are opaque driver identifiers; the device is driven
// from one thread at a time (`&mut self`), which binds the context before every call.
unsafe impl Send for CudaDevice {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("name", &self.properties.name)
            .field("streams", &self.streams.len())
            .finish_non_exhaustive()
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal` on its own context. [`DeviceError::Unavailable`] says why when the
    /// machine has no CUDA driver, no NVRTC or no such GPU.
    pub fn new(ordinal: u32) -> Result<Self, DeviceError> {
        CudaContext::new(ordinal).map(|ctx| Self::with_context(&ctx))
    }

    /// A fresh device on a shared context: its own streams and allocations, the context's
    /// compiled kernels and staging memory.
    pub fn with_context(ctx: &CudaContext) -> Self {
        let info = &ctx.ctx.info;
        let (major, minor) = info.compute_capability;
        let version = |v: i32| format!("{}.{}", v / 1000, v % 1000 / 10);
        let (nvrtc_major, nvrtc_minor) = info.nvrtc_version;
        let properties = DeviceProperties {
            name: info.name.clone(),
            backend: format!(
                "cuda {} (NVRTC {nvrtc_major}.{nvrtc_minor}), compute capability {major}.{minor} (sm_{major}{minor})",
                version(info.driver_version)
            ),
            memory_bytes: info.memory_bytes,
            max_allocation_bytes: info.memory_bytes,
            alignment_bytes: 256,
            max_load_width_bytes: 16,
            // What the lowering's indirect launches check counts against, at most.
            max_workgroups: [0, 1, 2].map(|d| info.max_grid[d].min(crate::lower::MAX_GRID[d])),
            max_shared_memory_bytes: info.max_shared_bytes,
            features: Features {
                graphs: GraphSupport::Hardware,
                timestamps: true,
                concurrent_streams: true,
                // `cvt.rn.f16.f32` exists on every architecture; `cvt.rn.bf16.f32` from sm_80.
                f16: true,
                bf16: major >= 8,
            },
        };
        Self {
            ctx: ctx.ctx.clone(),
            owner: Owner::fresh(),
            live: LiveBuffers::default(),
            next_buffer_id: 0,
            properties,
            streams: Vec::new(),
            communicators: BTreeMap::new(),
            host: ctx.host.clone(),
            write_staging: WriteStaging::default(),
            collective_timeout: Self::DEFAULT_COLLECTIVE_TIMEOUT,
            collective_errors: Vec::new(),
            world: None,
        }
    }

    /// The device with writes from pageable bytes staged as `staging` says (chunk size and
    /// copy threads; see [`WriteStaging`]).
    pub fn with_write_staging(mut self, staging: WriteStaging) -> Self {
        self.write_staging = staging.sanitized();
        self
    }

    /// This device as `member`'s rank of its world.
    fn in_world(mut self, member: world::WorldMember) -> Self {
        self.world = Some(member);
        self
    }

    /// How long a collective waits for its peers by default: a minute, well past any
    /// rendezvous of live peers.
    pub const DEFAULT_COLLECTIVE_TIMEOUT: Duration = Duration::from_secs(60);

    /// The device with collectives that wait at most `timeout` for their peers: past it, the
    /// collective fails on its stream with `CollectiveError::PeerTimeout` and its communicator
    /// is aborted (`device/nccl.rs`). Each stage is bounded by it on its own: joining the
    /// communicator, NCCL finishing the enqueue, and the collective completing (its clock
    /// starting at its enqueue, so time queued behind earlier work counts), so a collective
    /// whose first stage waited long fails within about three timeouts.
    pub fn with_collective_timeout(mut self, timeout: Duration) -> Self {
        self.collective_timeout = timeout;
        self
    }

    /// The state of `stream`, which `operation` names; a typed refusal for a stream this
    /// device did not create.
    fn stream(&self, operation: &str, stream: CudaStream) -> Result<&StreamState, DeviceError> {
        let index = contract::stream(operation, stream.0, self.streams.len())?;
        Ok(&self.streams[index])
    }

    /// Refuses a `handle` (a kernel, a timestamp) made on another context: the driver is only
    /// handed handles of the context it runs.
    fn same_context(
        &self,
        ctx: &Arc<Context>,
        operation: &str,
        handle: &'static str,
    ) -> Result<(), DeviceError> {
        if Arc::ptr_eq(ctx, &self.ctx) {
            return Ok(());
        }
        Err(DeviceError::Contract {
            operation: operation.to_owned(),
            violation: ContractViolation::ForeignHandle { handle },
        })
    }

    /// The raw stream for an operation that cannot be recorded into a graph.
    fn uncaptured(
        &self,
        stream: CudaStream,
        operation: &str,
    ) -> Result<sys::CUstream, DeviceError> {
        let state = self.stream(operation, stream)?;
        self.ctx.bind()?;
        if state.capture.is_some() {
            return Err(DeviceError::Capture {
                reason: format!("`{operation}` cannot be recorded into a graph"),
            });
        }
        Ok(state.raw)
    }

    /// The grid a launch runs and the address of its dynamic count (0 for a static count): a
    /// dynamic count runs `INDIRECT_BLOCKS_PER_SM` blocks per multiprocessor, which loop over
    /// the workgroups the count holds when the launch executes.
    fn grid(&self, count: &LaunchCount<'_, CudaBuffer>) -> ([u32; 3], u64) {
        match count {
            LaunchCount::Static(dims) => (*dims, 0),
            LaunchCount::Dynamic(slice) => {
                let info = &self.ctx.info;
                let blocks = info
                    .multiprocessors
                    .saturating_mul(INDIRECT_BLOCKS_PER_SM)
                    .min(info.max_grid[0]);
                ([blocks, 1, 1], slice.buffer.at(slice.offset))
            }
        }
    }

    /// Records `event` on `raw_stream`.
    ///
    /// # Safety
    /// `raw_stream` is one of this device's streams (`StreamState::raw`) and `event` came from
    /// its context's pool (`Context::event` or `Context::timing_event`); the context is current
    /// on the calling thread.
    unsafe fn record_on(
        &self,
        raw_stream: sys::CUstream,
        event: sys::CUevent,
    ) -> Result<(), DeviceError> {
        // SAFETY: a live stream and a live event of the current context (this function's
        // contract).
        unsafe { result::event::record(event, raw_stream) }
            .map_err(|e| self.ctx.fail("cuEventRecord", e))
    }
}

/// The element count a kernel sees for a binding of `bytes` holding `elem`s: the IR indexes
/// with `u32`, so a binding beyond `u32::MAX` elements reports `u32::MAX` (every index is then
/// in range).
fn elements(bytes: u64, elem: ElemType) -> u32 {
    u32::try_from(bytes / elem.size_bytes() as u64).unwrap_or(u32::MAX)
}

impl Device for CudaDevice {
    type Buffer = CudaBuffer;
    type Stream = CudaStream;
    type Event = CudaEvent;
    type Kernel = CudaKernel;
    type PendingRead = CudaRead;
    type Graph = CudaGraph;
    type Timestamp = CudaTimestamp;

    const TYPE_ID: u16 = 2;

    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn create_stream(&mut self) -> Result<CudaStream, DeviceError> {
        self.ctx.bind()?;
        let raw = result::stream::create(result::stream::StreamKind::NonBlocking)
            .map_err(|e| self.ctx.fail("cuStreamCreate", e))?;
        self.streams.push(StreamState {
            raw,
            capture: None,
            captured_buffers: Vec::new(),
        });
        Ok(CudaStream(self.streams.len() as u32 - 1))
    }

    fn allocate(&mut self, bytes: u64) -> Result<CudaBuffer, DeviceError> {
        contract::allocation(bytes)?;
        self.ctx.bind()?;
        let max = self.properties.max_allocation_bytes;
        if bytes > max {
            return Err(DeviceError::AllocationTooLarge {
                requested_bytes: bytes,
                max_bytes: max,
            });
        }
        // SAFETY: a plain device allocation of `bytes` (at least 1: `contract::allocation`) in
        // this device's context, which `bind` made current.
        match unsafe { result::malloc_sync(bytes as usize) } {
            Ok(ptr) => {
                let id = self.next_buffer_id;
                self.next_buffer_id += 1;
                self.live.allocated(id);
                Ok(CudaBuffer {
                    ptr,
                    bytes,
                    owner: self.owner,
                    id,
                })
            }
            Err(e) if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY => Err(DeviceError::OutOfMemory {
                requested_bytes: bytes,
                available_bytes: self.ctx.memory_free_bytes(),
            }),
            Err(e) => Err(self.ctx.fail("cuMemAlloc", e)),
        }
    }

    fn free(&mut self, buffer: CudaBuffer) {
        if !contract::owns(self.owner, &buffer) {
            return;
        }
        self.live.freed(buffer.id);
        // On a lost context the memory goes with the process; nothing can use it any more.
        if self.ctx.bind().is_err() {
            return;
        }
        // Only this device's streams can use its buffers. The runtime frees after their work
        // on it completed, so these waits return at once; code that frees early waits here
        // (watched: a collective whose peer never arrives is aborted at its timeout). A wait
        // that fails leaves the memory allocated: it may still be in use.
        for stream in 0..self.streams.len() {
            if self.synchronize(CudaStream(stream as u32)).is_err() {
                return;
            }
        }
        // SAFETY: a buffer of this device (`contract::owns` above), so of this context, which
        // `bind` made current; freed once (`free` takes it by value), after every operation
        // this device enqueued completed (the waits above: only this device's streams can use
        // its buffers); graphs that use it are refused at replay (`live`).
        if let Err(e) = unsafe { result::free_sync(buffer.ptr) } {
            let err = self.ctx.fail("cuMemFree", e);
            if !err.is_fatal() {
                tracing::warn!(error = %err, bytes = buffer.bytes, "cuMemFree failed");
            }
        }
    }

    fn write(
        &mut self,
        stream: CudaStream,
        dst: &CudaBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        contract::range(self.owner, "write", dst, offset, data.len() as u64)?;
        let raw = self.uncaptured(stream, "write")?;
        if data.is_empty() {
            return Ok(());
        }
        if data.len() <= DIRECT_WRITE_BYTES_MAX {
            // SAFETY: `data` is valid for the call, and for pageable memory the driver copies it
            // before returning; `data.len()` bytes from `dst.at(offset)` lie inside `dst`, a
            // buffer of this device (`contract::range` above), which `free` releases only after
            // this device's streams completed; `raw` is this device's stream, its context made
            // current by `uncaptured`.
            return unsafe {
                sys::cuMemcpyHtoDAsync_v2(dst.at(offset), data.as_ptr().cast(), data.len(), raw)
            }
            .result()
            .map_err(|e| self.ctx.fail("cuMemcpyHtoDAsync", e));
        }
        self.make_staging_safe(staging::pool_bytes_needed(data.len()))?;
        // SAFETY: `self.host` is the pool of `self.ctx` (both from one `CudaContext`); `raw` is
        // this device's stream, its context made current by `uncaptured`; `data.len()` bytes
        // from `dst.at(offset)` lie inside `dst`, a buffer of this device (`contract::range`
        // above), which `free` releases only after this device's streams completed.
        unsafe {
            staging::upload(
                &self.host,
                &self.ctx,
                raw,
                dst.at(offset),
                data,
                self.write_staging,
            )
        }
    }

    /// Pinned bytes of this context ([`ComputeClient::staging`](lockstep::ComputeClient::staging))
    /// are copied in place by the copy engine, skipping the staging copy; others as `write`.
    fn write_bytes(
        &mut self,
        stream: CudaStream,
        dst: &CudaBuffer,
        offset: u64,
        mut data: Bytes,
    ) -> Result<(), DeviceError> {
        let len = data.len() as u64;
        let result = contract::range(self.owner, "write", dst, offset, len).and_then(|()| {
            match pinned::of_context(&mut data, &self.ctx) {
                Some(lent) => {
                    // An earlier copy of these bytes may be queued behind a stuck collective:
                    // wait for it watching collectives, not blocked in the driver; and so for
                    // the pool's room to keep them once returned (past its cap it frees them
                    // after their copy).
                    self.wait_watching(|_| Ok(lent.block().arrived()), |_| Ok(()))?;
                    self.make_staging_safe(lent.capacity() as u64)?;
                    let raw = self.uncaptured(stream, "write")?;
                    // SAFETY: `lent` is a block of this device's context (`of_context`) and
                    // `raw` a stream of it, made current by `uncaptured`; `len` bytes from
                    // `dst.at(offset)` lie inside `dst`, a buffer of this device
                    // (`contract::range` above), which `free` releases only after this
                    // device's streams completed.
                    unsafe { pinned::copy_to_device(lent, raw, dst.at(offset)) }
                }
                None => self.write(stream, dst, offset, &data),
            }
        });
        if pinned::of_context(&mut data, &self.ctx).is_some() {
            // Back to the pool at once, with the copy's event: reused once it completed.
            drop(data);
        } else {
            data.free_in_background();
        }
        result
    }

    fn host_pool_stats(&self) -> Option<HostPoolStats> {
        Some(self.host.stats())
    }

    fn alloc_pinned_host(&mut self, bytes: usize) -> Result<Option<Bytes>, DeviceError> {
        self.make_staging_safe(class_of(bytes) as u64)?;
        self.host.lend(bytes).map(|lent| Some(lent.into_bytes()))
    }

    fn read(
        &mut self,
        stream: CudaStream,
        src: &CudaBuffer,
        offset: u64,
        len: u64,
    ) -> Result<CudaRead, DeviceError> {
        contract::range(self.owner, "read", src, offset, len)?;
        let raw = self.uncaptured(stream, "read")?;
        if len > 0 {
            // Its block may come from the pinned pool past its cap, waiting in the driver for a
            // kept block's copy, which may be queued behind a collective whose peer never
            // arrives: as for writes, such a wait first watches the collectives out.
            self.make_staging_safe(class_of(len as usize) as u64)?;
        }
        // SAFETY: `self.host` is the pool of `self.ctx` (both from one `CudaContext`); `raw` is
        // this device's stream, its context made current by `uncaptured`; `len` bytes from
        // `src.at(offset)` lie inside `src`, a buffer of this device (`contract::range` above),
        // which `free` releases only after this device's streams completed.
        unsafe { CudaRead::enqueue(&self.host, &self.ctx, raw, src.at(offset), len as usize) }
    }

    fn wait_read(&mut self, read: CudaRead) -> Result<Bytes, DeviceError> {
        self.wait_watching(|_| Ok(read.arrived()), |_| Ok(()))?;
        read.finish()
    }

    fn copy(
        &mut self,
        stream: CudaStream,
        src: BufferSlice<'_, CudaBuffer>,
        dst: &CudaBuffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        contract::copy(self.owner, &src, dst, dst_offset)?;
        let raw = self.uncaptured(stream, "copy")?;
        if src.len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges lie inside buffers of this device (`contract::copy` above), which
        // `free` releases only after this device's streams completed; `raw` is this device's
        // stream, its context made current by `uncaptured`.
        unsafe {
            result::memcpy_dtod_async(
                dst.at(dst_offset),
                src.buffer.at(src.offset),
                src.len as usize,
                raw,
            )
        }
        .map_err(|e| self.ctx.fail("cuMemcpyDtoDAsync", e))
    }

    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<CudaKernel, DeviceError> {
        contract::compile(kernel, &self.properties)?;
        self.ctx.bind()?;
        let function = self.ctx.function(kernel, options.checks.is_checked())?;
        Ok(CudaKernel {
            function,
            def: Arc::new(kernel.clone()),
            options,
            ctx: self.ctx.clone(),
        })
    }

    fn launch(
        &mut self,
        stream: CudaStream,
        kernel: &CudaKernel,
        count: LaunchCount<'_, CudaBuffer>,
        bindings: &[BufferSlice<'_, CudaBuffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        let checked = kernel.options.checks.is_checked();
        contract::launch(self.owner, &kernel.def, checked, &count, bindings, params)?;
        self.same_context(&kernel.ctx, "launch", "kernel")?;
        let state = self.stream("launch", stream)?;
        let raw = state.raw;
        let capturing = state.capture.is_some();
        self.ctx.bind()?;
        let (grid, count_ptr) = self.grid(&count);
        let mut slots = ArgumentSlots::of_launch(kernel, bindings, params, count_ptr);
        let [bx, by, bz] = kernel.def.workgroup_size;
        // SAFETY: the function is of this context (`same_context` above) and stays loaded while
        // the kernel's `ctx` lives; `raw` is this device's stream, its context made current by
        // `bind`; `args` points at one live slot per parameter of the entry point, in
        // declaration order (`ArgumentSlots::of_launch`), each holding a value of the declared
        // type (`contract::launch` above matched bindings and parameters to the kernel); every
        // binding, the fault record and the dynamic count address ranges inside buffers of this
        // device (checked by the same call), which `free` releases only after this device's
        // streams completed. A checked kernel touches nothing outside those ranges; what an
        // unchecked one indexes is its compiler's caller's promise (`CompileOptions::checked`).
        let launched = slots.with_pointers(|args| unsafe {
            result::launch_kernel(
                kernel.function.0,
                (grid[0], grid[1], grid[2]),
                (bx, by, bz),
                0,
                raw,
                args,
            )
        });
        launched.map_err(|e| match self.ctx.fail("cuLaunchKernel", e) {
            DeviceError::ExecutionFault { reason, .. } => DeviceError::ExecutionFault {
                operation: format!("launch of `{}` with {grid:?} workgroups", kernel.def.name),
                reason,
            },
            other => other,
        })?;
        if capturing {
            let captured = &mut self.streams[stream.0 as usize].captured_buffers;
            captured.extend(bindings.iter().map(|b| b.buffer.id));
            if let LaunchCount::Dynamic(slice) = &count {
                captured.push(slice.buffer.id);
            }
        }
        Ok(())
    }

    fn record_event(&mut self, stream: CudaStream) -> Result<CudaEvent, DeviceError> {
        let raw = self.uncaptured(stream, "record_event")?;
        let event = CudaEvent {
            raw: self.ctx.event()?,
            ctx: self.ctx.clone(),
        };
        // SAFETY: `raw` is this device's stream (`uncaptured`, which made the context current)
        // and `event.raw` came from `self.ctx.event()` just above.
        unsafe { self.record_on(raw, event.raw) }?;
        Ok(event)
    }

    fn wait_event(&mut self, stream: CudaStream, event: &CudaEvent) -> Result<(), DeviceError> {
        let raw = self.uncaptured(stream, "wait_event")?;
        // SAFETY: `raw` is this device's stream, its context made current by `uncaptured`;
        // `event.raw` is a live event (a `CudaEvent` holds its context, whose pool destroys
        // events only when dropped), of this context or of another, on which CUDA lets a
        // stream wait.
        unsafe {
            result::stream::wait_event(
                raw,
                event.raw,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(|e| self.ctx.fail("cuStreamWaitEvent", e))
    }

    fn event_complete(&mut self, event: &CudaEvent) -> bool {
        // A lost context runs nothing any more: every event counts as complete.
        // SAFETY: `event.raw` is live: it came from the pool of `event.ctx` (`record_event`),
        // which the event holds, and a pool destroys its events only with its context.
        self.ctx.bind().is_err() || unsafe { self.ctx.event_done(event.raw) }
    }

    fn flush(&mut self, stream: CudaStream) -> Result<(), DeviceError> {
        let state = self.stream("flush", stream)?;
        self.ctx.bind()?;
        if state.capture.is_some() {
            return Ok(());
        }
        // CUDA submits work as it is enqueued; the query only surfaces a sticky error early.
        // SAFETY: `state.raw` is this device's live stream (`self.stream` checked its index),
        // its context made current by `bind` above.
        match unsafe { sys::cuStreamQuery(state.raw) }.result() {
            Ok(()) => Ok(()),
            Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => Ok(()),
            Err(e) => Err(self.ctx.fail("cuStreamQuery", e)),
        }
    }

    fn synchronize(&mut self, stream: CudaStream) -> Result<(), DeviceError> {
        let state = self.stream("synchronize", stream)?;
        self.ctx.bind()?;
        let (raw, capture) = (state.raw, state.capture);
        let done = |device: &Self| match capture {
            // SAFETY: `before` came from `self.ctx.event()` (`begin_capture`) and is held by the
            // capturing stream's state until `end_capture` recycles it.
            Some(before) => Ok(unsafe { device.ctx.event_done(before) }),
            // SAFETY: `raw` is this device's stream (`self.stream` above), live until `Drop`,
            // its context made current by `bind` above.
            None => match unsafe { sys::cuStreamQuery(raw) }.result() {
                Ok(()) => Ok(true),
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => Ok(false),
                Err(e) => Err(device.ctx.fail("cuStreamQuery", e)),
            },
        };
        let block = |device: &Self| match capture {
            // SAFETY: as in `done`: a live event of this context, recorded before the capture.
            Some(before) => unsafe { result::event::synchronize(before) }
                .map_err(|e| device.ctx.fail("cuEventSynchronize", e)),
            // SAFETY: as in `done`: this device's live stream, its context current.
            None => unsafe { result::stream::synchronize(raw) }
                .map_err(|e| device.ctx.fail("cuStreamSynchronize", e)),
        };
        self.wait_watching(done, block)
    }

    fn take_errors(&mut self, stream: CudaStream) -> Vec<DeviceError> {
        // CUDA reports a failure of enqueued work only as a sticky error, returned by every
        // later call; a loss that another device of the context noticed is reported here,
        // after the collectives of this stream that a host wait found failed.
        let (here, others): (Vec<_>, Vec<_>) = std::mem::take(&mut self.collective_errors)
            .into_iter()
            .partition(|(s, _)| *s == stream);
        self.collective_errors = others;
        here.into_iter()
            .map(|(_, err)| err)
            .chain(self.ctx.check_alive().err())
            .collect()
    }

    fn record_timestamp(&mut self, stream: CudaStream) -> Result<CudaTimestamp, DeviceError> {
        let raw = self.uncaptured(stream, "record_timestamp")?;
        let timestamp = CudaTimestamp {
            raw: self.ctx.timing_event()?,
            ctx: self.ctx.clone(),
        };
        // SAFETY: `raw` is this device's stream (`uncaptured`, which made the context current)
        // and `timestamp.raw` came from `self.ctx.timing_event()` just above.
        unsafe { self.record_on(raw, timestamp.raw) }?;
        Ok(timestamp)
    }

    fn elapsed_ns(
        &mut self,
        start: &CudaTimestamp,
        end: &CudaTimestamp,
    ) -> Result<u64, DeviceError> {
        self.same_context(&start.ctx, "elapsed_ns", "timestamp")?;
        self.same_context(&end.ctx, "elapsed_ns", "timestamp")?;
        self.ctx.bind()?;
        // SAFETY: both events are live timing events (`record_timestamp` took them from
        // `Context::timing_event`) of this context (`same_context` above), which `bind` made
        // current.
        match unsafe { result::event::elapsed(start.raw, end.raw) } {
            Ok(ms) => Ok((f64::from(ms) * 1e6).max(0.0) as u64),
            Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => Err(DeviceError::Unsupported {
                operation: "elapsed_ns of a timestamp that has not completed".to_owned(),
            }),
            Err(e) => Err(self.ctx.fail("cuEventElapsedTime", e)),
        }
    }

    fn begin_capture(&mut self, stream: CudaStream) -> Result<(), DeviceError> {
        let raw = self
            .uncaptured(stream, "begin_capture")
            .map_err(|err| match err {
                DeviceError::Capture { .. } => DeviceError::Capture {
                    reason: "the stream is already capturing".to_owned(),
                },
                other => other,
            })?;
        let before = self.ctx.event()?;
        // SAFETY: `raw` is this device's stream (`uncaptured`, which made the context current)
        // and `before` came from `self.ctx.event()` just above.
        let started = unsafe { self.record_on(raw, before) }.and_then(|()| {
            // Relaxed: other streams may keep allocating, querying and synchronising.
            // SAFETY: `raw` is this device's live stream, its context current, and not
            // capturing (`uncaptured` refused a capturing one).
            unsafe {
                result::stream::begin_capture(
                    raw,
                    sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
                )
            }
            .map_err(|e| match self.ctx.fail("cuStreamBeginCapture", e) {
                DeviceError::ExecutionFault { reason, .. } => DeviceError::Capture { reason },
                other => other,
            })
        });
        match started {
            Ok(()) => {
                let state = &mut self.streams[stream.0 as usize];
                state.capture = Some(before);
                state.captured_buffers.clear();
                Ok(())
            }
            Err(err) => {
                // SAFETY: `before` came from `self.ctx.event()` above and went nowhere: the
                // capture did not start.
                unsafe { self.ctx.recycle_event(before) };
                Err(err)
            }
        }
    }

    fn end_capture(&mut self, stream: CudaStream) -> Result<CudaGraph, DeviceError> {
        let state = self.stream("end_capture", stream)?;
        self.ctx.bind()?;
        let raw = state.raw;
        let Some(before) = state.capture else {
            return Err(DeviceError::Capture {
                reason: "the stream is not capturing".to_owned(),
            });
        };
        let state = &mut self.streams[stream.0 as usize];
        state.capture = None;
        let buffers = std::mem::take(&mut state.captured_buffers);
        // SAFETY: `before` came from `self.ctx.event()` (`begin_capture`) and was taken out of
        // the stream's state just above: nothing else holds it.
        unsafe { self.ctx.recycle_event(before) };
        let capture_error = |call: &str, e| match self.ctx.fail(call, e) {
            DeviceError::ExecutionFault { reason, .. } => DeviceError::Capture { reason },
            other => other,
        };
        // SAFETY: `raw` is this device's live stream, its context made current by `bind` above,
        // and capturing (`state.capture` was set by a successful `begin_capture`).
        let graph = unsafe { result::stream::end_capture(raw) }
            .map_err(|e| capture_error("cuStreamEndCapture", e))?;
        // SAFETY: `graph` was just returned by `cuStreamEndCapture`, in the current context.
        let exec =
            match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
                Ok(exec) => exec,
                Err(e) => {
                    // SAFETY: `graph` is referenced nowhere else: its instantiation failed.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(capture_error("cuGraphInstantiate", e));
                }
            };
        let graph = CudaGraph {
            graph,
            exec,
            captured_on: self.owner,
            buffers,
            _ctx: self.ctx.clone(),
        };
        // Uploading now keeps the first replay as cheap as the later ones.
        // SAFETY: `exec` was just instantiated in this context; `raw` is this device's live
        // stream of it, no longer capturing (its capture ended above).
        unsafe { result::graph::upload(graph.exec, raw) }
            .map_err(|e| capture_error("cuGraphUpload", e))?;
        Ok(graph)
    }

    fn replay(&mut self, stream: CudaStream, graph: &CudaGraph) -> Result<(), DeviceError> {
        let buffers = graph.buffers.iter().copied();
        self.live.replay(self.owner, graph.captured_on, buffers)?;
        let raw = self.stream("replay", stream)?.raw;
        self.ctx.bind()?;
        // SAFETY: `exec` is live (`destroy_graph` takes the graph by value) and was captured on
        // this device (`LiveBuffers::replay` above checked `captured_on`), so in this context,
        // which `bind` made current; every buffer its launches use is still allocated (checked
        // by the same call), and `free` releases one only after this device's streams
        // completed; `raw` is this device's stream.
        unsafe { result::graph::launch(graph.exec, raw) }
            .map_err(|e| self.ctx.fail("cuGraphLaunch", e))
    }

    fn destroy_graph(&mut self, graph: CudaGraph) {
        if self.ctx.bind().is_err() {
            return;
        }
        // SAFETY: the handles are live (their context, which `graph._ctx` keeps alive, destroys
        // them nowhere else) and destroyed once: `graph` is taken by value. A replay may still
        // be in flight: CUDA documents that `cuGraphExecDestroy` of a running graph frees it
        // once that launch completes rather than cutting it short.
        let _ = unsafe { result::graph::exec_destroy(graph.exec) };
        // SAFETY: as above; the template graph is used by nothing once instantiated (a replay
        // runs the executable graph).
        let _ = unsafe { result::graph::destroy(graph.graph) };
    }

    fn ordinal(&self) -> u32 {
        self.member()
    }

    fn device_count(&self) -> u32 {
        self.member_count()
    }

    fn supports_collectives(&self) -> bool {
        nccl::nccl_present()
    }

    fn create_communicator(
        &mut self,
        id: CommunicatorId,
        peers: &[u32],
    ) -> Result<(), DeviceError> {
        self.nccl_create(id, peers)
    }

    fn all_reduce(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        dst: BufferSlice<'_, CudaBuffer>,
        elem: ElemType,
        op: ReduceOperation,
    ) -> Result<(), DeviceError> {
        self.nccl_all_reduce(stream, comm, src, dst, elem, op)
    }

    fn send(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        src: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        self.nccl_send(stream, comm, src, peer)
    }

    fn recv(
        &mut self,
        stream: CudaStream,
        comm: CommunicatorId,
        dst: BufferSlice<'_, CudaBuffer>,
        peer: u32,
    ) -> Result<(), DeviceError> {
        self.nccl_recv(stream, comm, dst, peer)
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Streams die with the device: end any capture, wait for their work, destroy them.
        // Errors are ignored: on a lost context the driver refuses everything and the
        // resources go with the process.
        let _ = self.ctx.bind();
        // First every stream's work, so that a collective waiting for a peer that never
        // arrives is aborted at its timeout instead of blocking the drop.
        for stream in 0..self.streams.len() {
            let _ = self.synchronize(CudaStream(stream as u32));
        }
        self.forget_pending();
        for state in self.streams.drain(..) {
            if let Some(before) = state.capture {
                // SAFETY: `state.raw` is this device's live stream, capturing (`capture` is
                // set); the graph it returns is destroyed at once.
                if let Ok(graph) = unsafe { result::stream::end_capture(state.raw) } {
                    // SAFETY: the graph was never instantiated nor shared.
                    let _ = unsafe { result::graph::destroy(graph) };
                }
                // SAFETY: `before` came from `self.ctx.event()` (`begin_capture`) and goes with
                // the stream's state, drained here.
                unsafe { self.ctx.recycle_event(before) };
            }
            // SAFETY: `state.raw` is this device's stream, created in `create_stream` and
            // destroyed once: its state is drained from `streams` here.
            let _ = unsafe { result::stream::synchronize(state.raw) };
            // SAFETY: as above.
            let _ = unsafe { result::stream::destroy(state.raw) };
        }
    }
}
