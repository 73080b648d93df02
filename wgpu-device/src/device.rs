//! `WgpuDevice`: the [`Device`] trait over one wgpu queue. See the crate documentation for the
//! ordering it gives.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lockstep::device::contract::{self, CheckedBuffer, LiveBuffers, Owner};
use lockstep::device::{BufferSlice, LaunchCount};
use lockstep::kernel::{CompileOptions, KernelDef, Scalar};
use lockstep::{Bytes, Device, DeviceError, DeviceProperties, Features, GraphSupport};

use crate::batch::{Batch, Staged};
use crate::bind::BindGroups;
use crate::context::{GpuContext, WgpuOptions, device_error, lock};
use crate::lower::{self, InfoLayout};
use crate::pipelines::{BYTE_COPY_WORKGROUP, ByteCopy, CompiledKernel};

/// Where a requested mapping's outcome lands (`WgpuDevice::request_map`).
type Mapping = Arc<std::sync::Mutex<Option<Result<(), wgpu::BufferAsyncError>>>>;

/// A device allocation. The wgpu buffer's size is `bytes` rounded up to a multiple of 4 (wgpu
/// copies whole words).
#[derive(Debug)]
pub struct WgpuBuffer {
    /// Unique within the context; keys the bind group cache.
    pub(crate) id: u64,
    pub(crate) buffer: wgpu::Buffer,
    /// The size asked for, what ranges are checked against.
    bytes: u64,
    owner: Owner,
}

impl CheckedBuffer for WgpuBuffer {
    fn owner(&self) -> Owner {
        self.owner
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

/// A stream: an index into the device's streams. Every stream feeds the one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgpuStream(u32);

/// A point in the device's single submission order: the batch that holds everything enqueued
/// before it. It has completed once that batch has.
#[derive(Debug)]
pub struct WgpuEvent {
    batch: u64,
}

/// A compiled kernel and the id its fault records carry. `compiled` is the variant for
/// bindings in distinct buffers; launches whose bindings share buffers use another variant
/// (see [`lower::aliases_of`]).
#[derive(Debug)]
pub struct WgpuKernel {
    def: Arc<KernelDef>,
    checked: bool,
    compiled: Arc<CompiledKernel>,
    kernel_id: u32,
}

/// A read in flight: a staging buffer the bytes are copied into, and which of them to return.
#[derive(Debug)]
pub struct WgpuRead {
    staging: Option<wgpu::Buffer>,
    /// Bytes of the staging buffer before the requested range (the read copies whole words).
    skip: usize,
    len: usize,
    batch: u64,
}

/// A captured graph: launches with their pipelines, bind groups and info words prebuilt.
#[derive(Debug)]
pub struct WgpuGraph {
    launches: Vec<Recorded>,
    captured_on: Owner,
}

/// A timestamp query written after everything enqueued before it, and where it is read back.
#[derive(Debug)]
pub struct WgpuTimestamp {
    readback: wgpu::Buffer,
    batch: u64,
}

#[derive(Clone, Debug)]
struct Recorded {
    kernel: Arc<CompiledKernel>,
    bind_group: wgpu::BindGroup,
    info: Vec<u32>,
    count: RecordedCount,
    /// Ids of the buffers bound and of the indirect counts' buffer: all must be live at a
    /// replay (the bind group would keep freed memory alive and in use).
    buffers: Vec<u64>,
}

#[derive(Clone, Debug)]
enum RecordedCount {
    Static([u32; 3]),
    Indirect {
        buffer: wgpu::Buffer,
        offset: u64,
        /// The [`WgpuBuffer::id`] of `buffer`.
        id: u64,
    },
}

#[derive(Debug, Default)]
struct StreamState {
    /// Asynchronous failures not yet taken, oldest first.
    errors: Vec<DeviceError>,
    /// Launches recorded while capturing.
    capture: Option<Vec<Recorded>>,
}

/// Largest write staged through the per-batch upload arena; larger ones get a buffer of their
/// own.
const ARENA_WRITE_MAX: u64 = 64 << 10;
/// Operations after which a batch is submitted without waiting for a flush, so the GPU works
/// while the host keeps encoding.
const BATCH_OPS_MAX: u32 = 256;
/// Staging buffers kept per size class for reuse by reads.
const READBACK_POOL_PER_CLASS: usize = 4;

/// The wgpu device. Create one with [`WgpuDevice::new`], or several views of one adapter with
/// [`WgpuDevice::with_context`].
#[derive(Debug)]
pub struct WgpuDevice {
    ctx: Arc<GpuContext>,
    /// Tells this device's buffers and graphs from other devices' (`contract`).
    owner: Owner,
    live: LiveBuffers,
    properties: DeviceProperties,
    streams: Vec<StreamState>,
    batch: Batch,
    bind_groups: BindGroups,
    /// The highest batch number known complete; set by the queue's completion callbacks.
    completed: Arc<AtomicU64>,
    /// Free MAP_READ staging buffers by size (a power of two).
    readback_pool: HashMap<u64, Vec<wgpu::Buffer>>,
    /// The info words of the launch being encoded, kept between launches so that a launch
    /// allocates none (a captured launch keeps a copy).
    info: Vec<u32>,
}

impl WgpuDevice {
    /// Opens the adapter `options` choose (see [`WgpuOptions::from_env`]). Without one, returns
    /// [`DeviceError::Unavailable`] saying why.
    pub fn new(options: WgpuOptions) -> Result<Self, DeviceError> {
        Self::with_context(GpuContext::open(&options)?)
    }

    /// A fresh device (its own streams, batches and caches of bind groups) over an opened
    /// context; pipelines are shared with every other view of it.
    pub fn with_context(ctx: Arc<GpuContext>) -> Result<Self, DeviceError> {
        let limits = &ctx.limits;
        let max_allocation_bytes = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            & !3;
        let properties = DeviceProperties {
            name: ctx.adapter_name().to_owned(),
            backend: ctx.backend_description(),
            // wgpu does not report the device's memory; its largest buffer is a lower bound.
            memory_bytes: limits.max_buffer_size,
            max_allocation_bytes,
            alignment_bytes: limits.min_storage_buffer_offset_alignment as u64,
            max_load_width_bytes: 16,
            max_workgroups: [limits.max_compute_workgroups_per_dimension; 3],
            max_shared_memory_bytes: limits.max_compute_workgroup_storage_size as u64,
            features: Features {
                graphs: GraphSupport::Software,
                timestamps: ctx.timestamps,
                concurrent_streams: false,
                f16: ctx.shader_f16,
                // WGSL has no bfloat16.
                bf16: false,
            },
        };
        let batch = Batch::new(&ctx)?;
        Ok(Self {
            owner: Owner::fresh(),
            live: LiveBuffers::default(),
            properties,
            streams: Vec::new(),
            batch,
            bind_groups: BindGroups::default(),
            completed: Arc::new(AtomicU64::new(0)),
            readback_pool: HashMap::new(),
            info: Vec::new(),
            ctx,
        })
    }

    /// The context this device drives, to open more views of the same adapter.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// The state of `stream`, which `operation` names; a typed refusal for a stream this
    /// device did not create.
    fn stream_mut(
        &mut self,
        operation: &str,
        stream: WgpuStream,
    ) -> Result<&mut StreamState, DeviceError> {
        let index = contract::stream(operation, stream.0, self.streams.len())?;
        Ok(&mut self.streams[index])
    }

    /// Refuses anything but launches on a capturing stream, as the contract says.
    fn refuse_if_capturing(&self, stream: WgpuStream, operation: &str) -> Result<(), DeviceError> {
        let index = contract::stream(operation, stream.0, self.streams.len())?;
        if self.streams[index].capture.is_some() {
            return Err(DeviceError::Capture {
                reason: format!("`{operation}` cannot be recorded into a graph"),
            });
        }
        Ok(())
    }

    fn enqueue_check(&self, stream: WgpuStream, operation: &str) -> Result<(), DeviceError> {
        self.ctx.check_alive()?;
        self.refuse_if_capturing(stream, operation)
    }

    /// Submits the open batch, if it holds work. Errors wgpu raises for it (validation,
    /// internal, out of memory) and errors raised outside any scope meanwhile are queued on
    /// every stream that had work in it: the whole batch was refused.
    fn submit(&mut self) {
        let Some(submitted) = self.batch.submit(&self.ctx) else {
            return;
        };
        let completed = self.completed.clone();
        let number = submitted.number;
        self.ctx.queue.on_submitted_work_done(move || {
            completed.fetch_max(number, Ordering::AcqRel);
        });
        let mut errors: Vec<DeviceError> = submitted
            .error
            .map(|e| device_error(&e, &format!("batch of {} operations", submitted.ops)))
            .into_iter()
            .collect();
        errors.append(&mut lock(&self.ctx.sink).uncaptured);
        if errors.is_empty() {
            return;
        }
        let streams = if submitted.streams.is_empty() {
            vec![0]
        } else {
            submitted.streams
        };
        for stream in streams {
            if let Some(state) = self.streams.get_mut(stream as usize) {
                state.errors.extend(errors.iter().cloned());
            }
        }
    }

    /// Submits the open batch if it is batch `number`: work to be waited on must be submitted.
    fn submit_through(&mut self, number: u64) {
        if number >= self.batch.number() {
            self.submit();
        }
    }

    /// Blocks until batch `number` has completed or the device is lost.
    fn wait_for(&mut self, number: u64) -> Result<(), DeviceError> {
        self.submit_through(number);
        while self.completed.load(Ordering::Acquire) < number {
            self.ctx.check_alive()?;
            // Bounded waits, so that a lost device is noticed instead of waited on forever.
            let _ = self.ctx.device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(Duration::from_millis(100)),
            });
        }
        self.ctx.check_alive()
    }

    /// The batch number an event recorded now refers to.
    fn current_point(&self) -> u64 {
        if self.batch.is_empty() {
            self.batch.number() - 1
        } else {
            self.batch.number()
        }
    }

    fn after_op(&mut self, stream: WgpuStream) {
        self.batch.note(stream.0);
        if self.batch.ops() >= BATCH_OPS_MAX {
            self.submit();
        }
    }

    /// Writes aligned `data` into an empty batch straight through the queue: wgpu runs a
    /// queue write before the next submission (this batch) and after every earlier one, which
    /// is its place in the stream, and it needs neither the arena nor a copy command. Counted
    /// as an operation of the batch, so that events and waits recorded after it cover it.
    fn write_direct(
        &mut self,
        stream: WgpuStream,
        dst: &WgpuBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        let ((), error) = self
            .ctx
            .scoped(|| self.ctx.queue.write_buffer(&dst.buffer, offset, data));
        if let Some(error) = error {
            return Err(device_error(&error, "write"));
        }
        self.after_op(stream);
        Ok(())
    }

    /// Stages `data` (padded to whole words) where a copy in the open batch can read it.
    fn stage(&mut self, data: &[u8]) -> Result<Staged, DeviceError> {
        let padded = (data.len() as u64).next_multiple_of(4);
        if padded <= ARENA_WRITE_MAX {
            if !self.batch.fits(padded, 4) {
                self.submit();
            }
            return Ok(self.batch.upload(data, 4));
        }
        let (buffer, error) = self.ctx.scoped(|| {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep upload"),
                size: padded,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(error) = error {
            return Err(device_error(&error, "write"));
        }
        let mut bytes = data.to_vec();
        bytes.resize(padded as usize, 0);
        // Lands before the open batch's commands, which are the next submission.
        self.ctx.queue.write_buffer(&buffer, 0, &bytes);
        Ok(Staged {
            id: None,
            buffer,
            offset: 0,
        })
    }

    /// Encodes the byte-copy kernel: `len` bytes from `src` (bound whole, starting at byte
    /// `src_offset`) to `dst` at byte `dst_offset`.
    fn byte_copy(
        &mut self,
        dst: &WgpuBuffer,
        dst_offset: u64,
        src: &Staged,
        src_offset: u64,
        len: u64,
    ) -> Result<(), DeviceError> {
        let kernel = self.ctx.byte_copy()?;
        let too_large = |_| DeviceError::TransferFailed {
            reason: format!("an unaligned copy of {len} bytes exceeds 4 GiB"),
        };
        let mut params = ByteCopy {
            dst_word: u32::try_from(dst_offset / 4).map_err(too_large)?,
            dst_head: (dst_offset % 4) as u32,
            len_bytes: u32::try_from(len).map_err(too_large)?,
            src_word: u32::try_from(src_offset / 4).map_err(too_large)?,
            src_head: (src_offset % 4) as u32,
            row_words: 0,
        };
        let groups = params.dst_words().div_ceil(BYTE_COPY_WORKGROUP as u64);
        let max = self.properties.max_workgroups[0] as u64;
        let x = groups.min(max);
        let y = groups.div_ceil(x.max(1));
        if y > max {
            return Err(DeviceError::TransferFailed {
                reason: format!("an unaligned copy of {len} bytes needs too many workgroups"),
            });
        }
        params.row_words = (x * BYTE_COPY_WORKGROUP as u64) as u32;
        let bind_group = match src.id {
            Some(src_id) => {
                let pairs = [(dst.id, &dst.buffer), (src_id, &src.buffer)];
                self.bind_groups.get_or_create(
                    &self.ctx,
                    &kernel,
                    |b| pairs[b as usize],
                    self.batch.arena(),
                )
            }
            None => self.bind_groups.create(
                &self.ctx,
                &kernel,
                &[&dst.buffer, &src.buffer],
                self.batch.arena(),
            ),
        }?;
        let words = params.words();
        self.dispatch(
            &kernel,
            &bind_group,
            &words,
            &RecordedCount::Static([x as u32, y as u32, 1]),
        )
    }

    /// Encodes one dispatch: its info words go to the arena, bound at a dynamic offset, unless
    /// it repeats the pass's last dispatch (then that one's binding stands).
    fn dispatch(
        &mut self,
        kernel: &Arc<CompiledKernel>,
        bind_group: &wgpu::BindGroup,
        info: &[u32],
        count: &RecordedCount,
    ) -> Result<(), DeviceError> {
        // Indirect counts are copied to a buffer of their own first (which ends the open
        // pass): the buffer holding them may also be bound writable by this very dispatch
        // (pool slices share pages), which wgpu forbids within one dispatch.
        let indirect = match count {
            RecordedCount::Static(_) => None,
            RecordedCount::Indirect { buffer, offset, .. } => {
                Some(self.indirect_counts(kernel, buffer, *offset)?)
            }
        };
        if !self.batch.repeats(&kernel.pipeline, bind_group, info) {
            let align = self.properties.alignment_bytes;
            if !self.batch.fits(info.len() as u64 * 4, align) {
                self.submit();
            }
            self.batch
                .bind(&self.ctx, &kernel.pipeline, bind_group, info, align);
        }
        let pass = self.batch.pass(&self.ctx);
        match (indirect, count) {
            (Some(scratch), _) => pass.dispatch_workgroups_indirect(&scratch, 0),
            (None, RecordedCount::Static([x, y, z])) => pass.dispatch_workgroups(*x, *y, *z),
            // Every indirect count has its scratch buffer (made above).
            (None, RecordedCount::Indirect { .. }) => {}
        }
        Ok(())
    }

    /// Copies the three workgroup counts at `offset` of `buffer` into a new indirect buffer.
    fn indirect_counts(
        &mut self,
        kernel: &CompiledKernel,
        buffer: &wgpu::Buffer,
        offset: u64,
    ) -> Result<wgpu::Buffer, DeviceError> {
        let (scratch, error) = self.ctx.scoped(|| {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep indirect counts"),
                size: 16,
                usage: wgpu::BufferUsages::INDIRECT | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(error) = error {
            return Err(device_error(
                &error,
                &format!("launch of `{}`", kernel.name),
            ));
        }
        self.batch
            .encoder(&self.ctx)
            .copy_buffer_to_buffer(buffer, offset, &scratch, 0, 12);
        Ok(scratch)
    }

    fn take_readback(&mut self, bytes: u64) -> Result<wgpu::Buffer, DeviceError> {
        let class = bytes.next_power_of_two().max(256);
        if let Some(buffer) = self.readback_pool.get_mut(&class).and_then(Vec::pop) {
            return Ok(buffer);
        }
        let (buffer, error) = self.ctx.scoped(|| {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep readback"),
                size: class,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        match error {
            Some(error) => Err(device_error(&error, "read")),
            None => Ok(buffer),
        }
    }

    fn return_readback(&mut self, buffer: wgpu::Buffer) {
        let pool = self.readback_pool.entry(buffer.size()).or_default();
        if pool.len() < READBACK_POOL_PER_CLASS {
            pool.push(buffer);
        }
    }

    /// Maps `buffer`'s first `len` bytes (its batch has completed) and copies them out.
    fn map_read(&mut self, buffer: &wgpu::Buffer, len: u64) -> Result<Vec<u8>, DeviceError> {
        let mapping = Self::request_map(buffer, len);
        self.finish_map(buffer, len, mapping)
    }

    /// Asks wgpu to map `buffer`'s first `len` bytes once the submitted work that writes them
    /// has completed (that work must be submitted already: a buffer with a pending map cannot
    /// be used by a later submission). The poll that sees the work complete also runs the
    /// mapping, so a read waits on one poll instead of two.
    fn request_map(buffer: &wgpu::Buffer, len: u64) -> Mapping {
        let mapping: Mapping = Arc::new(std::sync::Mutex::new(None));
        if len > 0 {
            let result = mapping.clone();
            buffer
                .slice(..len)
                .map_async(wgpu::MapMode::Read, move |r| *lock(&result) = Some(r));
        }
        mapping
    }

    /// Waits for `mapping` of `buffer`'s first `len` bytes, copies them out and unmaps.
    fn finish_map(
        &mut self,
        buffer: &wgpu::Buffer,
        len: u64,
        mapping: Mapping,
    ) -> Result<Vec<u8>, DeviceError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        loop {
            if let Some(outcome) = lock(&mapping).take() {
                outcome.map_err(|e| DeviceError::TransferFailed {
                    reason: format!("mapping a readback buffer failed: {e}"),
                })?;
                break;
            }
            self.ctx.check_alive()?;
            let _ = self.ctx.device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(Duration::from_millis(100)),
            });
        }
        let bytes = buffer
            .slice(..len)
            .get_mapped_range()
            .map(|view| view.to_vec())
            .map_err(|e| DeviceError::TransferFailed {
                reason: format!("reading a mapped readback buffer failed: {e}"),
            });
        buffer.unmap();
        bytes
    }

    /// `kernel` as compiled for `bindings`: its own pipeline, unless two bindings share a
    /// buffer (then the variant that binds the shared buffer once, see `lower::aliases_of`).
    fn compiled_for(
        &self,
        kernel: &WgpuKernel,
        bindings: &[BufferSlice<'_, WgpuBuffer>],
    ) -> Result<Arc<CompiledKernel>, DeviceError> {
        let shares = bindings.iter().enumerate().any(|(b, slice)| {
            bindings[..b]
                .iter()
                .any(|other| other.buffer.id == slice.buffer.id)
        });
        if !shares {
            return Ok(kernel.compiled.clone());
        }
        let ids: Vec<u64> = bindings.iter().map(|b| b.buffer.id).collect();
        self.ctx
            .kernel(&kernel.def, kernel.checked, &lower::aliases_of(&ids))
    }

    /// Fills `info` with the launch's info words: the kernel id, each binding's offset and
    /// length in its own elements, then the parameters' bits.
    fn launch_info(
        &self,
        kernel: &WgpuKernel,
        bindings: &[BufferSlice<'_, WgpuBuffer>],
        params: &[Scalar],
        info: &mut Vec<u32>,
    ) -> Result<(), DeviceError> {
        let compiled = &kernel.compiled;
        let refuse = |reason: String| DeviceError::ExecutionFault {
            operation: format!("launch of `{}`", compiled.name),
            reason,
        };
        info.clear();
        info.resize(compiled.info_words as usize, 0);
        info[InfoLayout::KERNEL_ID as usize] = kernel.kernel_id;
        for (b, slice) in bindings.iter().enumerate() {
            // Offsets and lengths count the binding's own elements (the fault record's are
            // `u32`s): a half-float binding is declared as an array of halves.
            let elem_bytes = kernel
                .def
                .bindings
                .get(b)
                .map_or(4, |decl| decl.elem.size_bytes() as u64);
            let elements = |bytes: u64| {
                u32::try_from(bytes / elem_bytes)
                    .map_err(|_| refuse(format!("binding {b} exceeds 2^32 elements")))
            };
            info[InfoLayout::offset_word(b as u32) as usize] = elements(slice.offset)?;
            info[InfoLayout::len_word(b as u32) as usize] = elements(slice.len)?;
        }
        let first_param = 1 + 2 * bindings.len();
        for (word, &param) in info[first_param..].iter_mut().zip(params) {
            *word = crate::lower::param_word_bits(param);
        }
        Ok(())
    }
}

impl Device for WgpuDevice {
    type Buffer = WgpuBuffer;
    type Stream = WgpuStream;
    type Event = WgpuEvent;
    type Kernel = WgpuKernel;
    type PendingRead = WgpuRead;
    type Graph = WgpuGraph;
    type Timestamp = WgpuTimestamp;

    const TYPE_ID: u16 = 1;

    fn properties(&self) -> &DeviceProperties {
        &self.properties
    }

    fn create_stream(&mut self) -> Result<WgpuStream, DeviceError> {
        self.ctx.check_alive()?;
        self.streams.push(StreamState::default());
        Ok(WgpuStream(self.streams.len() as u32 - 1))
    }

    fn allocate(&mut self, bytes: u64) -> Result<WgpuBuffer, DeviceError> {
        contract::allocation(bytes)?;
        self.ctx.check_alive()?;
        let size = bytes.next_multiple_of(4);
        if size > self.properties.max_allocation_bytes {
            return Err(DeviceError::AllocationTooLarge {
                requested_bytes: bytes,
                max_bytes: self.properties.max_allocation_bytes,
            });
        }
        let (buffer, error) = self.ctx.scoped(|| {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::INDIRECT,
                mapped_at_creation: false,
            })
        });
        if let Some(error) = error {
            self.ctx.check_alive()?;
            return Err(match error {
                wgpu::Error::OutOfMemory { .. } => DeviceError::OutOfMemory {
                    requested_bytes: bytes,
                    available_bytes: 0,
                },
                other => {
                    tracing::warn!(error = %other, bytes, "wgpu refused an allocation");
                    DeviceError::AllocationTooLarge {
                        requested_bytes: bytes,
                        max_bytes: self.properties.max_allocation_bytes,
                    }
                }
            });
        }
        let id = self.ctx.next_id();
        self.live.allocated(id);
        Ok(WgpuBuffer {
            id,
            buffer,
            bytes,
            owner: self.owner,
        })
    }

    fn free(&mut self, buffer: WgpuBuffer) {
        if !contract::owns(self.owner, &buffer) {
            return;
        }
        self.live.freed(buffer.id);
        self.bind_groups.evict(buffer.id);
        // wgpu keeps the memory until submitted work that uses it has completed.
        drop(buffer);
    }

    fn write(
        &mut self,
        stream: WgpuStream,
        dst: &WgpuBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        let len = data.len() as u64;
        contract::range(self.owner, "write", dst, offset, len)?;
        self.enqueue_check(stream, "write")?;
        if len == 0 {
            return Ok(());
        }
        let aligned = offset.is_multiple_of(4) && len.is_multiple_of(4);
        if aligned && self.batch.is_empty() {
            return self.write_direct(stream, dst, offset, data);
        }
        let staged = self.stage(data)?;
        if aligned {
            self.batch.encoder(&self.ctx).copy_buffer_to_buffer(
                &staged.buffer,
                staged.offset,
                &dst.buffer,
                offset,
                len,
            );
        } else {
            self.byte_copy(dst, offset, &staged, staged.offset, len)?;
        }
        self.after_op(stream);
        Ok(())
    }

    fn read(
        &mut self,
        stream: WgpuStream,
        src: &WgpuBuffer,
        offset: u64,
        len: u64,
    ) -> Result<WgpuRead, DeviceError> {
        contract::range(self.owner, "read", src, offset, len)?;
        self.enqueue_check(stream, "read")?;
        if len == 0 {
            return Ok(WgpuRead {
                staging: None,
                skip: 0,
                len: 0,
                batch: 0,
            });
        }
        let start = offset & !3;
        let end = (offset + len).next_multiple_of(4);
        let staging = self.take_readback(end - start)?;
        self.batch.encoder(&self.ctx).copy_buffer_to_buffer(
            &src.buffer,
            start,
            &staging,
            0,
            end - start,
        );
        let batch = self.batch.number();
        self.after_op(stream);
        Ok(WgpuRead {
            staging: Some(staging),
            skip: (offset - start) as usize,
            len: len as usize,
            batch,
        })
    }

    /// Heap bytes: the mapped range copied out once, trimmed in place to the range read. The
    /// mapping is requested before the wait, so one poll sees the batch and the mapping done.
    fn wait_read(&mut self, read: WgpuRead) -> Result<Bytes, DeviceError> {
        let Some(staging) = read.staging else {
            return Ok(Bytes::default());
        };
        self.submit_through(read.batch);
        let end = (read.skip + read.len).next_multiple_of(4) as u64;
        let mapping = Self::request_map(&staging, end);
        self.wait_for(read.batch)?;
        let mut bytes = self.finish_map(&staging, end, mapping)?;
        self.return_readback(staging);
        bytes.truncate(read.skip + read.len);
        bytes.drain(..read.skip);
        Ok(Bytes::from(bytes))
    }

    fn copy(
        &mut self,
        stream: WgpuStream,
        src: BufferSlice<'_, WgpuBuffer>,
        dst: &WgpuBuffer,
        dst_offset: u64,
    ) -> Result<(), DeviceError> {
        contract::copy(self.owner, &src, dst, dst_offset)?;
        self.enqueue_check(stream, "copy")?;
        let len = src.len;
        if len == 0 {
            return Ok(());
        }
        let aligned =
            src.offset.is_multiple_of(4) && dst_offset.is_multiple_of(4) && len.is_multiple_of(4);
        if aligned && src.buffer.id != dst.id {
            self.batch.encoder(&self.ctx).copy_buffer_to_buffer(
                &src.buffer.buffer,
                src.offset,
                &dst.buffer,
                dst_offset,
                len,
            );
        } else {
            // Through a temporary: wgpu copies neither within one buffer nor unaligned ranges.
            let start = src.offset & !3;
            let end = (src.offset + len).next_multiple_of(4);
            let (temp, error) = self.ctx.scoped(|| {
                self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("lockstep copy"),
                    size: end - start,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                })
            });
            if let Some(error) = error {
                return Err(device_error(&error, "copy"));
            }
            let encoder = self.batch.encoder(&self.ctx);
            encoder.copy_buffer_to_buffer(&src.buffer.buffer, start, &temp, 0, end - start);
            if aligned {
                encoder.copy_buffer_to_buffer(&temp, 0, &dst.buffer, dst_offset, len);
            } else {
                let staged = Staged {
                    id: None,
                    buffer: temp,
                    offset: 0,
                };
                self.byte_copy(dst, dst_offset, &staged, src.offset - start, len)?;
            }
        }
        self.after_op(stream);
        Ok(())
    }

    fn compile(
        &mut self,
        kernel: &KernelDef,
        options: CompileOptions,
    ) -> Result<WgpuKernel, DeviceError> {
        contract::compile(kernel, &self.properties)?;
        let bindings = kernel.bindings.len() + options.checks.is_checked() as usize;
        let distinct: Vec<u32> = (0..bindings as u32).collect();
        Ok(WgpuKernel {
            def: Arc::new(kernel.clone()),
            checked: options.checks.is_checked(),
            compiled: self
                .ctx
                .kernel(kernel, options.checks.is_checked(), &distinct)?,
            kernel_id: options.kernel_id,
        })
    }

    fn launch(
        &mut self,
        stream: WgpuStream,
        kernel: &WgpuKernel,
        count: LaunchCount<'_, WgpuBuffer>,
        bindings: &[BufferSlice<'_, WgpuBuffer>],
        params: &[Scalar],
    ) -> Result<(), DeviceError> {
        contract::launch(
            self.owner,
            &kernel.def,
            kernel.checked,
            &count,
            bindings,
            params,
        )?;
        let index = contract::stream("launch", stream.0, self.streams.len())?;
        self.ctx.check_alive()?;
        let mut info = std::mem::take(&mut self.info);
        self.launch_info(kernel, bindings, params, &mut info)?;
        let compiled = self.compiled_for(kernel, bindings)?;
        let count = match count {
            LaunchCount::Static(dims) => RecordedCount::Static(dims),
            LaunchCount::Dynamic(slice) => RecordedCount::Indirect {
                buffer: slice.buffer.buffer.clone(),
                offset: slice.offset,
                id: slice.buffer.id,
            },
        };
        let bind_group = self.bind_groups.get_or_create(
            &self.ctx,
            &compiled,
            |b| {
                let slice = &bindings[b as usize];
                (slice.buffer.id, &slice.buffer.buffer)
            },
            self.batch.arena(),
        )?;
        if let Some(capture) = &mut self.streams[index].capture {
            let mut buffers: Vec<u64> = bindings.iter().map(|b| b.buffer.id).collect();
            if let RecordedCount::Indirect { id, .. } = &count {
                buffers.push(*id);
            }
            capture.push(Recorded {
                kernel: compiled.clone(),
                bind_group,
                info: info.clone(),
                count,
                buffers,
            });
        } else {
            self.dispatch(&compiled, &bind_group, &info, &count)?;
            self.after_op(stream);
        }
        self.info = info;
        Ok(())
    }

    fn record_event(&mut self, stream: WgpuStream) -> Result<WgpuEvent, DeviceError> {
        self.enqueue_check(stream, "record_event")?;
        Ok(WgpuEvent {
            batch: self.current_point(),
        })
    }

    fn wait_event(&mut self, stream: WgpuStream, _event: &WgpuEvent) -> Result<(), DeviceError> {
        // Every stream feeds one encoder in enqueue order, so whatever preceded the event
        // already precedes everything enqueued from now on.
        self.enqueue_check(stream, "wait_event")
    }

    fn event_complete(&mut self, event: &WgpuEvent) -> bool {
        if self.ctx.lost().is_some() || self.completed.load(Ordering::Acquire) >= event.batch {
            return true;
        }
        if event.batch >= self.batch.number() {
            // Not submitted yet: it completes only after a flush.
            return false;
        }
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
        self.completed.load(Ordering::Acquire) >= event.batch
    }

    fn flush(&mut self, stream: WgpuStream) -> Result<(), DeviceError> {
        contract::stream("flush", stream.0, self.streams.len())?;
        self.ctx.check_alive()?;
        self.submit();
        let _ = self.ctx.device.poll(wgpu::PollType::Poll);
        self.ctx.check_alive()
    }

    fn synchronize(&mut self, stream: WgpuStream) -> Result<(), DeviceError> {
        contract::stream("synchronize", stream.0, self.streams.len())?;
        self.ctx.check_alive()?;
        let point = self.current_point();
        self.wait_for(point)
    }

    fn take_errors(&mut self, stream: WgpuStream) -> Vec<DeviceError> {
        // A stream this device did not create has no errors to take.
        match self.stream_mut("take_errors", stream) {
            Ok(state) => std::mem::take(&mut state.errors),
            Err(_) => Vec::new(),
        }
    }

    fn record_timestamp(&mut self, stream: WgpuStream) -> Result<WgpuTimestamp, DeviceError> {
        self.enqueue_check(stream, "record_timestamp")?;
        if !self.ctx.timestamps {
            return Err(DeviceError::Unsupported {
                operation:
                    "record_timestamp (the adapter has no timestamp queries inside encoders)"
                        .to_owned(),
            });
        }
        let (created, error) = self.ctx.scoped(|| {
            let query_set = self.ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("lockstep timestamp"),
                ty: wgpu::QueryType::Timestamp,
                count: 1,
            });
            let resolve = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep timestamp resolve"),
                size: 8,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let readback = self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep timestamp readback"),
                size: 8,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            (query_set, resolve, readback)
        });
        if let Some(error) = error {
            return Err(device_error(&error, "record_timestamp"));
        }
        let (query_set, resolve, readback) = created;
        let encoder = self.batch.encoder(&self.ctx);
        encoder.write_timestamp(&query_set, 0);
        encoder.resolve_query_set(&query_set, 0..1, &resolve, 0);
        encoder.copy_buffer_to_buffer(&resolve, 0, &readback, 0, 8);
        let batch = self.batch.number();
        self.after_op(stream);
        Ok(WgpuTimestamp { readback, batch })
    }

    fn elapsed_ns(
        &mut self,
        start: &WgpuTimestamp,
        end: &WgpuTimestamp,
    ) -> Result<u64, DeviceError> {
        self.wait_for(start.batch.max(end.batch))?;
        let ticks = |bytes: Vec<u8>| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[..8]);
            u64::from_le_bytes(word)
        };
        let start_ticks = ticks(self.map_read(&start.readback, 8)?);
        let end_ticks = ticks(self.map_read(&end.readback, 8)?);
        let period = self.ctx.queue.get_timestamp_period() as f64;
        Ok((end_ticks.saturating_sub(start_ticks) as f64 * period) as u64)
    }

    fn begin_capture(&mut self, stream: WgpuStream) -> Result<(), DeviceError> {
        self.ctx.check_alive()?;
        let state = self.stream_mut("begin_capture", stream)?;
        if state.capture.is_some() {
            return Err(DeviceError::Capture {
                reason: "the stream is already capturing".to_owned(),
            });
        }
        state.capture = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&mut self, stream: WgpuStream) -> Result<WgpuGraph, DeviceError> {
        self.ctx.check_alive()?;
        let captured_on = self.owner;
        match self.stream_mut("end_capture", stream)?.capture.take() {
            Some(launches) => Ok(WgpuGraph {
                launches,
                captured_on,
            }),
            None => Err(DeviceError::Capture {
                reason: "the stream is not capturing".to_owned(),
            }),
        }
    }

    fn replay(&mut self, stream: WgpuStream, graph: &WgpuGraph) -> Result<(), DeviceError> {
        let buffers = graph
            .launches
            .iter()
            .flat_map(|l| l.buffers.iter().copied());
        self.live.replay(self.owner, graph.captured_on, buffers)?;
        let index = contract::stream("replay", stream.0, self.streams.len())?;
        self.ctx.check_alive()?;
        if let Some(capture) = &mut self.streams[index].capture {
            capture.extend(graph.launches.iter().cloned());
            return Ok(());
        }
        for launch in &graph.launches {
            self.dispatch(
                &launch.kernel,
                &launch.bind_group,
                &launch.info,
                &launch.count,
            )?;
            self.after_op(stream);
        }
        Ok(())
    }

    fn destroy_graph(&mut self, graph: WgpuGraph) {
        drop(graph);
    }

    /// The adapter's index among those of the selected backends; collectives keep the
    /// defaults (unsupported), so copies between clients read and write through the host.
    fn ordinal(&self) -> u32 {
        self.ctx.adapter_index
    }

    fn device_count(&self) -> u32 {
        self.ctx.adapter_count
    }
}

impl Drop for WgpuDevice {
    fn drop(&mut self) {
        // Work still batched is submitted so that nothing the runtime enqueued is lost.
        self.submit();
    }
}
