//! Compiled compute pipelines: user kernels cached by (IR content hash, checked), and the
//! built-in byte-copy kernel that moves ranges wgpu's copies cannot (not 4-byte aligned).
//!
//! **Invariant:** a pipeline's WGSL depends only on the kernel's IR and the mode; the kernel id
//! a fault record names travels in the launch's info words. So one compiled pipeline serves
//! every runtime (every `WgpuDevice` view of a shared context), whatever ids they assign.

use std::collections::HashMap;
use std::sync::Arc;

use lockstep::DeviceError;
use lockstep::kernel::KernelDef;

use crate::context::{GpuContext, device_error, lock};
use crate::lower;

/// A pipeline and how to bind it.
#[derive(Debug)]
pub(crate) struct CompiledKernel {
    pub name: String,
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    /// Per storage binding (before the info binding): whether it is read-only.
    pub read_only: Vec<bool>,
    /// Per storage binding: the launch binding whose buffer it binds.
    pub sources: Vec<u32>,
    /// Words of the info binding.
    pub info_words: u32,
}

impl CompiledKernel {
    /// Bytes of the info binding.
    pub fn info_bytes(&self) -> u64 {
        self.info_words as u64 * 4
    }
}

#[derive(Debug, Default)]
pub(crate) struct Pipelines {
    /// By (IR content hash, checked, aliases of the launch's bindings).
    kernels: HashMap<(u64, bool, Vec<u32>), Arc<CompiledKernel>>,
    byte_copy: Option<Arc<CompiledKernel>>,
}

/// Invocations per workgroup of the byte-copy kernel.
pub(crate) const BYTE_COPY_WORKGROUP: u32 = 64;

/// Parameters of the byte-copy kernel, in info-word order.
pub(crate) struct ByteCopy {
    /// First destination word touched.
    pub dst_word: u32,
    /// Byte of that word where the range starts (0..4).
    pub dst_head: u32,
    pub len_bytes: u32,
    /// Word of the source binding where the source bytes start, and the byte within it.
    pub src_word: u32,
    pub src_head: u32,
    /// Destination words covered per row of workgroups (grid y strides by this).
    pub row_words: u32,
}

/// Info words of the byte-copy kernel.
const BYTE_COPY_WORDS: u32 = 6;

impl ByteCopy {
    pub fn words(&self) -> [u32; BYTE_COPY_WORDS as usize] {
        [
            self.dst_word,
            self.dst_head,
            self.len_bytes,
            self.src_word,
            self.src_head,
            self.row_words,
        ]
    }

    /// Destination words the copy touches.
    pub fn dst_words(&self) -> u64 {
        (self.dst_head as u64 + self.len_bytes as u64).div_ceil(4)
    }
}

/// Copies `len` bytes between arbitrary byte offsets, one invocation per destination word,
/// merging partial words with the bytes already there. Bindings: destination (read-write,
/// whole buffer), source (read-only, whole buffer), then the six words of [`ByteCopy`].
const BYTE_COPY_WGSL: &str = "\
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read> p: array<u32, 6>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let w = gid.x + gid.y * p[5];
    let len = p[2];
    if w * 4u >= p[1] + len { return; }
    var value = dst[p[0] + w];
    for (var b = 0u; b < 4u; b++) {
        let pos = w * 4u + b;
        if pos >= p[1] && pos - p[1] < len {
            let s = p[4] + (pos - p[1]);
            let byte = (src[p[3] + s / 4u] >> ((s % 4u) * 8u)) & 0xffu;
            value = (value & ~(0xffu << (b * 8u))) | (byte << (b * 8u));
        }
    }
    dst[p[0] + w] = value;
}
";

impl GpuContext {
    /// Runs `f` inside error scopes for every filter and returns the first error it raised.
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> T) -> (T, Option<wgpu::Error>) {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let value = f();
        let validation = pollster::block_on(validation.pop());
        let internal = pollster::block_on(internal.pop());
        let oom = pollster::block_on(oom.pop());
        (value, validation.or(internal).or(oom))
    }

    /// The pipeline of `def` in the given mode, compiling it on first use. A WGSL or pipeline
    /// error is [`DeviceError::Compile`] with wgpu's message.
    pub(crate) fn kernel(
        &self,
        def: &KernelDef,
        checked: bool,
        aliases: &[u32],
    ) -> Result<Arc<CompiledKernel>, DeviceError> {
        let key = (def.content_hash(), checked, aliases.to_vec());
        if let Some(compiled) = lock(&self.pipelines).kernels.get(&key) {
            return Ok(compiled.clone());
        }
        let lowered = lower::lower(def, checked, aliases);
        let plan = lowered.plan;
        let compiled = self.build(
            &def.name,
            &lowered.wgsl,
            plan.read_only,
            plan.sources,
            plan.info.words(),
        )?;
        lock(&self.pipelines).kernels.insert(key, compiled.clone());
        Ok(compiled)
    }

    /// The built-in byte-copy pipeline.
    pub(crate) fn byte_copy(&self) -> Result<Arc<CompiledKernel>, DeviceError> {
        if let Some(compiled) = &lock(&self.pipelines).byte_copy {
            return Ok(compiled.clone());
        }
        let compiled = self.build(
            "lockstep byte copy",
            BYTE_COPY_WGSL,
            vec![false, true],
            vec![0, 1],
            BYTE_COPY_WORDS,
        )?;
        lock(&self.pipelines).byte_copy = Some(compiled.clone());
        Ok(compiled)
    }

    fn build(
        &self,
        name: &str,
        wgsl: &str,
        read_only: Vec<bool>,
        sources: Vec<u32>,
        info_words: u32,
    ) -> Result<Arc<CompiledKernel>, DeviceError> {
        self.check_alive()?;
        let layout = self.layout(&read_only);
        let (pipeline, error) = self.scoped(|| {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(wgsl.into()),
                });
            let pipeline_layout =
                self.device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some(name),
                        bind_group_layouts: &[Some(&layout)],
                        immediate_size: 0,
                    });
            self.device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(name),
                    layout: Some(&pipeline_layout),
                    module: &module,
                    entry_point: Some(lower::ENTRY_POINT),
                    compilation_options: Default::default(),
                    cache: None,
                })
        });
        if let Some(error) = error {
            self.check_alive()?;
            return Err(match error {
                wgpu::Error::OutOfMemory { .. } => device_error(&error, "compile"),
                other => DeviceError::Compile {
                    kernel: name.to_owned(),
                    log: other.to_string(),
                },
            });
        }
        Ok(Arc::new(CompiledKernel {
            name: name.to_owned(),
            pipeline,
            layout,
            read_only,
            sources,
            info_words,
        }))
    }
}
