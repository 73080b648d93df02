//! The open batch: one command encoder that every stream records into, in enqueue order, and
//! the upload arena its commands read (info words of launches, small writes).
//!
//! **Invariant:** the arena's bytes for a batch are written with `Queue::write_buffer` right
//! before the batch is submitted, so they land before any of its commands run and after every
//! earlier submission (wgpu orders both). A region of the arena is written for one command of
//! one batch only; a dispatch that repeats the previous one of its pass (same pipeline, bind
//! group and info words) reads that one's region, which shaders only read.

use lockstep::DeviceError;

use crate::context::GpuContext;

/// Bytes of the upload arena. A batch whose uploads would overflow it is submitted first.
pub(crate) const ARENA_BYTES: u64 = 4 << 20;
// Every offset in the arena fits a 32-bit dynamic offset.
const _: () = assert!(ARENA_BYTES <= u32::MAX as u64);

/// Bytes a command of the open batch reads: in the arena (`id` set) or in a buffer of its own.
#[derive(Debug)]
pub(crate) struct Staged {
    /// The arena's id (bind groups over it are cached); `None` for a one-off buffer.
    pub id: Option<u64>,
    pub buffer: wgpu::Buffer,
    pub offset: u64,
}

/// What a submission carried, for error routing and completion tracking.
#[derive(Debug)]
pub(crate) struct Submitted {
    pub number: u64,
    pub ops: u32,
    /// Streams that had work in it.
    pub streams: Vec<u32>,
    pub error: Option<wgpu::Error>,
}

/// The compute pass consecutive dispatches share, and what its last dispatch bound.
#[derive(Debug)]
struct OpenPass {
    pass: wgpu::ComputePass<'static>,
    bound: Option<Bound>,
}

/// Bind group 0 of a pass as its last dispatch set it. wgpu records a bind group with dynamic
/// offsets again at every `set_bind_group` (it deduplicates only those without), so a dispatch
/// that repeats this state skips the binding: the cost per dispatch of straight wgpu.
#[derive(Debug)]
struct Bound {
    pipeline: wgpu::ComputePipeline,
    group: wgpu::BindGroup,
    /// The info words at the bound dynamic offset.
    info: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    /// Ended before any other command.
    pass: Option<OpenPass>,
    arena_id: u64,
    arena: wgpu::Buffer,
    uploads: Vec<u8>,
    streams: Vec<u32>,
    ops: u32,
    /// This batch's number; batches are numbered from 1 in submission order.
    number: u64,
}

impl Batch {
    pub fn new(ctx: &GpuContext) -> Result<Self, DeviceError> {
        let (arena, error) = ctx.scoped(|| {
            ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("lockstep upload arena"),
                size: ARENA_BYTES,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(error) = error {
            return Err(crate::context::device_error(
                &error,
                "creating the upload arena",
            ));
        }
        Ok(Self {
            encoder: None,
            pass: None,
            arena_id: ctx.next_id(),
            arena,
            uploads: Vec::with_capacity(64 << 10),
            streams: Vec::new(),
            ops: 0,
            number: 1,
        })
    }

    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn ops(&self) -> u32 {
        self.ops
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    pub fn arena(&self) -> (u64, &wgpu::Buffer) {
        (self.arena_id, &self.arena)
    }

    /// Whether `bytes` more at `align` fit in the arena in this batch.
    pub fn fits(&self, bytes: u64, align: u64) -> bool {
        (self.uploads.len() as u64).next_multiple_of(align) + bytes <= ARENA_BYTES
    }

    /// Appends `data` at a multiple of `align` (callers check [`fits`](Self::fits) first).
    pub fn upload(&mut self, data: &[u8], align: u64) -> Staged {
        let offset = self.append(align, |uploads| uploads.extend_from_slice(data));
        Staged {
            id: Some(self.arena_id),
            buffer: self.arena.clone(),
            offset,
        }
    }

    /// Appends `fill`'s bytes at a multiple of `align`, padded to a whole word, and returns
    /// their offset in the arena.
    fn append(&mut self, align: u64, fill: impl FnOnce(&mut Vec<u8>)) -> u64 {
        let offset = (self.uploads.len() as u64).next_multiple_of(align);
        self.uploads.resize(offset as usize, 0);
        fill(&mut self.uploads);
        let padded = self.uploads.len().next_multiple_of(4);
        self.uploads.resize(padded, 0);
        offset
    }

    /// Whether a dispatch of `pipeline` over `group` with `info` would repeat the last
    /// dispatch of the open pass, so that it needs no binding (see [`Bound`]).
    pub fn repeats(
        &self,
        pipeline: &wgpu::ComputePipeline,
        group: &wgpu::BindGroup,
        info: &[u32],
    ) -> bool {
        self.pass
            .as_ref()
            .and_then(|open| open.bound.as_ref())
            .is_some_and(|b| b.pipeline == *pipeline && b.group == *group && b.info == info)
    }

    /// Uploads `info` to the arena (callers check [`fits`](Self::fits) first) and binds
    /// `pipeline` and `group` at its offset in the open pass, for the dispatch that follows.
    pub fn bind(
        &mut self,
        ctx: &GpuContext,
        pipeline: &wgpu::ComputePipeline,
        group: &wgpu::BindGroup,
        info: &[u32],
        align: u64,
    ) {
        let offset = self.append(align, |uploads| {
            uploads.extend(info.iter().flat_map(|w| w.to_le_bytes()));
        });
        self.pass(ctx);
        let open = self.pass.as_mut().expect("opened above");
        open.pass.set_pipeline(pipeline);
        // Below `ARENA_BYTES` (checked by `fits`), so it fits 32 bits (asserted there).
        open.pass.set_bind_group(0, group, &[offset as u32]);
        let bound = open.bound.get_or_insert_with(|| Bound {
            pipeline: pipeline.clone(),
            group: group.clone(),
            info: Vec::new(),
        });
        bound.pipeline.clone_from(pipeline);
        bound.group.clone_from(group);
        bound.info.clear();
        bound.info.extend_from_slice(info);
    }

    /// The encoder, with no pass open, for copies and queries.
    pub fn encoder(&mut self, ctx: &GpuContext) -> &mut wgpu::CommandEncoder {
        self.pass = None;
        self.encoder.get_or_insert_with(|| {
            ctx.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("lockstep batch"),
                })
        })
    }

    /// The open compute pass, beginning one if the last command was not a dispatch.
    pub fn pass(&mut self, ctx: &GpuContext) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let pass = self
                .encoder(ctx)
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("lockstep dispatches"),
                    timestamp_writes: None,
                })
                .forget_lifetime();
            self.pass = Some(OpenPass { pass, bound: None });
        }
        &mut self.pass.as_mut().expect("opened above").pass
    }

    /// Counts an operation of `stream` in this batch.
    pub fn note(&mut self, stream: u32) {
        self.ops += 1;
        if !self.streams.contains(&stream) {
            self.streams.push(stream);
        }
    }

    /// Submits the batch if it holds work and opens the next one.
    pub fn submit(&mut self, ctx: &GpuContext) -> Option<Submitted> {
        if self.ops == 0 {
            return None;
        }
        // A batch of queue writes only has no encoder yet: its empty submission carries them.
        self.encoder(ctx);
        let encoder = self.encoder.take()?;
        let ((), error) = ctx.scoped(|| {
            if !self.uploads.is_empty() {
                ctx.queue.write_buffer(&self.arena, 0, &self.uploads);
            }
            ctx.queue.submit([encoder.finish()]);
        });
        let submitted = Submitted {
            number: self.number,
            ops: self.ops,
            streams: std::mem::take(&mut self.streams),
            error,
        };
        self.uploads.clear();
        self.ops = 0;
        self.number += 1;
        Some(submitted)
    }
}
