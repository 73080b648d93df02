//! The open batch: one command encoder that every stream records into, in enqueue order, and
//! the upload arena its commands read (info words of launches, small writes).
//!
//! **Invariant:** the arena's bytes for a batch are written with `Queue::write_buffer` right
//! before the batch is submitted, so they land before any of its commands run and after every
//! earlier submission (wgpu orders both). A region of the arena is used by one command of one
//! batch only.

use lockstep::DeviceError;

use crate::context::GpuContext;

/// Bytes of the upload arena. A batch whose uploads would overflow it is submitted first.
pub(crate) const ARENA_BYTES: u64 = 4 << 20;

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

#[derive(Debug)]
pub(crate) struct Batch {
    encoder: Option<wgpu::CommandEncoder>,
    /// The compute pass consecutive dispatches share; ended before any other command.
    pass: Option<wgpu::ComputePass<'static>>,
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
        let offset = (self.uploads.len() as u64).next_multiple_of(align);
        self.uploads.resize(offset as usize, 0);
        self.uploads.extend_from_slice(data);
        let padded = self.uploads.len().next_multiple_of(4);
        self.uploads.resize(padded, 0);
        Staged {
            id: Some(self.arena_id),
            buffer: self.arena.clone(),
            offset,
        }
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
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("opened above")
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
        self.pass = None;
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
