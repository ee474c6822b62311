//! Reused bind groups: a dispatch whose pipeline, parameter slot and buffers repeat (every decode step) reuses one bind group, over uniform buffers kept across submits.
use super::Gpu;
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes of each kept uniform buffer (a submit with more parameters gets a one-off buffer and fresh bind groups).
pub const UNIFORM_BYTES: u64 = 64 << 10;

/// Bind groups kept before the cache starts over.
const MAX_BIND_GROUPS: usize = 4096;

/// A uniform buffer and the count of its holders (a submit in flight holds one).
#[derive(Clone, Debug)]
pub struct Uniform {
    pub buffer: wgpu::Buffer,
    holders: Arc<()>,
}

/// What a bind group binds: the pipeline, the uniform slot, and each storage buffer with its range.
#[derive(PartialEq, Eq, Hash)]
pub(crate) struct BindKey {
    pub pipeline: wgpu::ComputePipeline,
    pub uniform: wgpu::Buffer,
    pub params: (u64, u64),
    pub sizes: Option<(u32, (u64, u64))>,
    pub bound: Vec<(wgpu::Buffer, Option<(u64, u64)>)>,
}

/// The kept uniform buffers and bind groups of one device.
#[derive(Default)]
pub(crate) struct Binds {
    groups: HashMap<BindKey, wgpu::BindGroup>,
    uniforms: Vec<Uniform>,
}

impl Gpu {
    /// A kept uniform buffer no submit in flight holds, holding `bytes` (at most `UNIFORM_BYTES`).
    pub(crate) fn uniform(&self, bytes: &[u8]) -> Uniform {
        let mut binds = self.binds.lock().unwrap_or_else(|p| p.into_inner());
        let u = match binds.uniforms.iter().find(|u| Arc::strong_count(&u.holders) == 1) {
            Some(u) => u.clone(),
            None => {
                let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("uniforms"),
                    size: UNIFORM_BYTES,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let u = Uniform { buffer, holders: Arc::new(()) };
                binds.uniforms.push(u.clone());
                u
            }
        };
        self.queue.write_buffer(&u.buffer, 0, bytes);
        u
    }

    /// A one-off uniform buffer holding `bytes` (not kept, so its bind groups are not either).
    pub(crate) fn uniform_once(&self, bytes: &[u8]) -> Uniform {
        use wgpu::util::DeviceExt;
        let buffer = self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: None, contents: bytes, usage: wgpu::BufferUsages::UNIFORM });
        Uniform { buffer, holders: Arc::new(()) }
    }

    /// The kept bind group for `key`, made by `make` when missing.
    pub(crate) fn bind_group<E>(&self, key: BindKey, make: impl FnOnce() -> Result<wgpu::BindGroup, E>) -> Result<wgpu::BindGroup, E> {
        let mut binds = self.binds.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = binds.groups.get(&key) {
            return Ok(g.clone());
        }
        let g = make()?;
        if binds.groups.len() >= MAX_BIND_GROUPS {
            binds.groups.clear();
        }
        binds.groups.insert(key, g.clone());
        Ok(g)
    }

    /// Drops every kept bind group (so the buffers they bind can be freed).
    pub fn clear_bind_groups(&self) {
        self.binds.lock().unwrap_or_else(|p| p.into_inner()).groups.clear();
    }
}
