//! Bind groups cached by (layout, info size, buffers), so that repeated launches over the same
//! buffers create none. Every binding is a whole buffer (offsets travel in the info words), so
//! the key is just the buffers' ids.
//!
//! **Invariant:** a freed buffer's bind groups are evicted at once: a cached bind group holds
//! its buffers alive, and the runtime expects `free` to return the memory.

use std::collections::HashMap;

use lockstep::DeviceError;

use crate::context::{GpuContext, device_error};
use crate::pipelines::CompiledKernel;

/// Cached bind groups beyond which the cache starts over (keeps stale index entries bounded).
const CACHE_MAX: usize = 4096;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    read_only: Vec<bool>,
    info_bytes: u64,
    buffers: Vec<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct BindGroups {
    groups: HashMap<Key, wgpu::BindGroup>,
    /// Keys by the buffers they bind, for eviction.
    by_buffer: HashMap<u64, Vec<Key>>,
    /// The last bind group handed out: consecutive launches usually repeat it.
    last: Option<(Key, wgpu::BindGroup)>,
}

impl BindGroups {
    /// The bind group of `kernel` over its storage bindings, then the arena's info slot:
    /// storage binding `i` binds `binding(kernel.sources[i])`, an (id, buffer) pair.
    pub fn get_or_create<'a>(
        &mut self,
        ctx: &GpuContext,
        kernel: &CompiledKernel,
        binding: impl Fn(u32) -> (u64, &'a wgpu::Buffer),
        arena: (u64, &wgpu::Buffer),
    ) -> Result<wgpu::BindGroup, DeviceError> {
        let ids = kernel.sources.iter().map(|&b| binding(b).0);
        if let Some((key, group)) = &self.last
            && key.read_only == kernel.read_only
            && key.info_bytes == kernel.info_bytes()
            && key.buffers.iter().copied().eq(ids.clone())
        {
            return Ok(group.clone());
        }
        let key = Key {
            read_only: kernel.read_only.clone(),
            info_bytes: kernel.info_bytes(),
            buffers: ids.collect(),
        };
        let group = match self.groups.get(&key) {
            Some(group) => group.clone(),
            None => {
                let raw: Vec<&wgpu::Buffer> =
                    kernel.sources.iter().map(|&b| binding(b).1).collect();
                let group = self.create(ctx, kernel, &raw, arena)?;
                if self.groups.len() >= CACHE_MAX {
                    self.groups.clear();
                    self.by_buffer.clear();
                }
                for &id in &key.buffers {
                    self.by_buffer.entry(id).or_default().push(key.clone());
                }
                self.groups.insert(key.clone(), group.clone());
                group
            }
        };
        self.last = Some((key, group.clone()));
        Ok(group)
    }

    /// A bind group that is not cached (over a one-off buffer).
    pub fn create(
        &self,
        ctx: &GpuContext,
        kernel: &CompiledKernel,
        buffers: &[&wgpu::Buffer],
        arena: (u64, &wgpu::Buffer),
    ) -> Result<wgpu::BindGroup, DeviceError> {
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, buffer)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: buffers.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: arena.1,
                offset: 0,
                size: wgpu::BufferSize::new(kernel.info_bytes()),
            }),
        });
        let (group, error) = ctx.scoped(|| {
            ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &kernel.layout,
                entries: &entries,
            })
        });
        match error {
            Some(error) => Err(device_error(&error, &format!("binding `{}`", kernel.name))),
            None => Ok(group),
        }
    }

    /// Forgets every bind group over buffer `id`.
    pub fn evict(&mut self, id: u64) {
        if let Some(keys) = self.by_buffer.remove(&id) {
            for key in keys {
                self.groups.remove(&key);
            }
        }
        if self
            .last
            .as_ref()
            .is_some_and(|(key, _)| key.buffers.contains(&id))
        {
            self.last = None;
        }
    }
}
