//! The recorder: many dispatches encoded into one command buffer, submitted once, optionally timed.
use super::binds::{BindKey, Uniform, UNIFORM_BYTES};
use super::{add_since, Buf, Gpu, GpuError, PipelineKey};
use std::time::Instant;

/// One storage binding of a dispatch: a whole buffer or a byte range of one.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Whole(&'a Buf),
    Range(&'a Buf, u64, u64),
}

struct Dispatch {
    kernel: &'static str,
    variant: &'static str,
    /// The source, which tells a variant's stages apart.
    source: &'static str,
    pipeline: Pipeline,
    groups: [u32; 3],
    /// Byte offset of this dispatch's words in the recorder's uniform arena, and their length.
    params: (u64, u64),
    /// The bound buffers and ranges (held until submitted, so no pool hands them out earlier).
    bound: Vec<(Buf, Option<(u64, u64)>)>,
    /// On Metal, a translated kernel's runtime-array sizes: their binding and their words' range in the uniform arena.
    sizes: Option<(u32, (u64, u64))>,
}

/// A dispatch's compiled kernel: a wgpu pipeline, or the harness's build of its MSL.
enum Pipeline {
    Wgpu(wgpu::ComputePipeline),
    Emu(std::sync::Arc<super::msl_emu::EmuKernel>),
}

impl Pipeline {
    fn wgpu(&self) -> Result<&wgpu::ComputePipeline, GpuError> {
        match self {
            Pipeline::Wgpu(p) => Ok(p),
            Pipeline::Emu(_) => Err(GpuError::Shader { kernel: "recorder".into(), message: "a harness kernel has no wgpu pipeline".into() }),
        }
    }
}

/// Collects dispatches; `submit` writes every dispatch's parameters in one uniform buffer and encodes them in one compute pass of one command buffer.
pub struct Recorder<'g> {
    gpu: &'g Gpu,
    dispatches: Vec<Dispatch>,
    words: Vec<u32>,
}

impl<'g> Recorder<'g> {
    /// An empty recorder on `gpu`.
    pub fn new(gpu: &'g Gpu) -> Recorder<'g> {
        Recorder { gpu, dispatches: Vec::new(), words: Vec::new() }
    }

    /// The device this records for.
    pub fn gpu(&self) -> &'g Gpu {
        self.gpu
    }

    /// Adds one dispatch: `params` follow the runtime zero in the uniform at binding 0, `args` bind from 1.
    pub fn dispatch(&mut self, key: &PipelineKey, params: &[u32], args: &[Arg], groups: [u32; 3]) -> Result<(), GpuError> {
        let t0 = Instant::now();
        let (pipeline, sized) = match &self.gpu.emu {
            Some(emu) => (Pipeline::Emu(emu.kernel(key)?), None),
            None => {
                let c = self.gpu.compiled(key)?;
                (Pipeline::Wgpu(c.pipeline), c.sizes)
            }
        };
        let mut words = vec![0];
        words.extend_from_slice(params);
        let params = self.push_uniform(&words);
        let sizes = sized.map(|(binding, of)| {
            let bytes = |b: u32| match args.get(b as usize - 1) {
                Some(Arg::Whole(buf)) => buf.bytes as u32,
                Some(Arg::Range(_, _, size)) => *size as u32,
                None => 0,
            };
            let w: Vec<u32> = of.iter().map(|&b| bytes(b)).collect();
            (binding, self.push_uniform(&w))
        });
        let bound = args
            .iter()
            .map(|a| match *a {
                Arg::Whole(b) => (b.clone(), None),
                Arg::Range(b, offset, size) => (b.clone(), Some((offset, size))),
            })
            .collect();
        self.dispatches.push(Dispatch { kernel: key.shader.kernel, variant: key.shader.variant, source: key.shader.source, pipeline, groups, params, bound, sizes });
        add_since(&self.gpu.host.record, t0);
        Ok(())
    }

    /// Appends `words` to the uniform arena at the device's offset alignment, padded to 16 bytes; their byte range.
    fn push_uniform(&mut self, words: &[u32]) -> (u64, u64) {
        let align = (self.gpu.limits.min_uniform_buffer_offset_alignment.max(16) / 4) as usize;
        let start = self.words.len().div_ceil(align) * align;
        self.words.resize(start, 0);
        self.words.extend_from_slice(words);
        let len = words.len().max(1).div_ceil(4) * 4;
        self.words.resize(start + len, 0);
        (4 * start as u64, 4 * len as u64)
    }

    /// The bind group of every dispatch over one uniform buffer holding all their parameters (kept bind groups where the uniform buffer is a kept one).
    fn bind_groups(&self) -> Result<(Vec<wgpu::BindGroup>, Uniform), GpuError> {
        let t0 = Instant::now();
        let gpu = self.gpu;
        let bytes: &[u8] = if self.words.is_empty() { &[0; 16] } else { bytemuck::cast_slice(&self.words) };
        let kept = bytes.len() as u64 <= UNIFORM_BYTES;
        let uniform = if kept { gpu.uniform(bytes) } else { gpu.uniform_once(bytes) };
        let mut out = Vec::with_capacity(self.dispatches.len());
        for d in &self.dispatches {
            let make = || self.make_bind_group(d, &uniform.buffer);
            let group = if kept {
                let bound = d.bound.iter().map(|(b, r)| (b.buffer.clone(), *r)).collect();
                gpu.bind_group(BindKey { pipeline: d.pipeline.wgpu()?.clone(), uniform: uniform.buffer.clone(), params: d.params, sizes: d.sizes, bound }, make)?
            } else {
                make()?
            };
            out.push(group);
        }
        add_since(&gpu.host.bind, t0);
        Ok((out, uniform))
    }

    /// A new bind group of one dispatch over `uniform`.
    fn make_bind_group(&self, d: &Dispatch, uniform: &wgpu::Buffer) -> Result<wgpu::BindGroup, GpuError> {
        let device = &self.gpu.device;
        let (offset, size) = d.params;
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: uniform, offset, size: wgpu::BufferSize::new(size) }),
        }];
        for (i, (b, range)) in d.bound.iter().enumerate() {
            let resource = match *range {
                None => b.buffer.as_entire_binding(),
                Some((offset, size)) => wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: &b.buffer, offset, size: wgpu::BufferSize::new(size) }),
            };
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource });
        }
        if let Some((binding, (offset, size))) = d.sizes {
            entries.push(wgpu::BindGroupEntry { binding, resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: uniform, offset, size: wgpu::BufferSize::new(size) }) });
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(d.kernel), layout: &d.pipeline.wgpu()?.get_bind_group_layout(0), entries: &entries });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(GpuError::Shader { kernel: format!("{}/{}", d.kernel, d.variant), message: e.to_string() });
        }
        Ok(group)
    }

    /// Number of dispatches recorded.
    pub fn len(&self) -> usize {
        self.dispatches.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty()
    }

    /// Encodes and submits everything recorded, then waits; returns the pass's device time in seconds when timestamps exist.
    pub fn submit(self) -> Result<Option<f64>, GpuError> {
        let gpu = self.gpu;
        let done = self.submit_async()?;
        gpu.wait()?;
        done.device_seconds()
    }

    /// Encodes and submits everything recorded without waiting; the device time is read from the result after a later wait.
    pub fn submit_async(self) -> Result<Submitted<'g>, GpuError> {
        let gpu = self.gpu;
        if let Some(emu) = &gpu.emu {
            for d in &self.dispatches {
                let Pipeline::Emu(k) = &d.pipeline else { continue };
                let (start, len) = ((d.params.0 / 4) as usize, (d.params.1 / 4) as usize);
                let params: Vec<u8> = self.words[start..start + len].iter().flat_map(|w| w.to_le_bytes()).collect();
                emu.run(gpu, k, d.kernel, params, &d.bound, d.groups)?;
            }
            return Ok(Submitted { gpu, stamps: None, _uniform: None });
        }
        let (groups, uniform) = self.bind_groups()?;
        let t0 = Instant::now();
        let stamps = gpu.has_timestamps().then(|| gpu.pass_stamps());
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let timestamp_writes = stamps.as_ref().map(|st| wgpu::ComputePassTimestampWrites {
                query_set: &st.set,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            });
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
            for (d, g) in self.dispatches.iter().zip(&groups) {
                pass.set_pipeline(d.pipeline.wgpu()?);
                pass.set_bind_group(0, g, &[]);
                pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
            }
        }
        if let Some(st) = &stamps {
            enc.resolve_query_set(&st.set, 0..2, &st.resolve, 0);
            enc.copy_buffer_to_buffer(&st.resolve, 0, &st.staging, 0, 16);
        }
        gpu.queue.submit([enc.finish()]);
        let stamps = stamps.map(|st| {
            let (tx, rx) = std::sync::mpsc::channel();
            st.staging.map_async(wgpu::MapMode::Read, .., move |r| {
                let _ = tx.send(r.is_ok());
            });
            (st, rx)
        });
        add_since(&gpu.host.submit, t0);
        Ok(Submitted { gpu, stamps, _uniform: Some(uniform) })
    }

    /// Encodes each dispatch in its own timed compute pass, submits and waits; returns each dispatch's (kernel, variant, source) and device seconds (empty without timestamps).
    pub fn submit_profiled(self) -> Result<Vec<([&'static str; 3], [u32; 3], f64)>, GpuError> {
        let gpu = self.gpu;
        if !gpu.has_timestamps() || gpu.emu.is_some() {
            self.submit()?;
            return Ok(Vec::new());
        }
        let (groups, _uniform) = self.bind_groups()?;
        let mut out = Vec::with_capacity(self.dispatches.len());
        for (chunk, chunk_groups) in self.dispatches.chunks(PROFILE_CHUNK).zip(groups.chunks(PROFILE_CHUNK)) {
            let count = 2 * chunk.len() as u32;
            let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: None, ty: wgpu::QueryType::Timestamp, count });
            let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: 8 * u64::from(count),
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let stamps = gpu.alloc(8 * u64::from(count))?;
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            for (i, (d, g)) in chunk.iter().zip(chunk_groups).enumerate() {
                let timestamp_writes = wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                };
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: Some(timestamp_writes) });
                pass.set_pipeline(d.pipeline.wgpu()?);
                pass.set_bind_group(0, g, &[]);
                pass.dispatch_workgroups(d.groups[0], d.groups[1], d.groups[2]);
            }
            enc.resolve_query_set(&set, 0..count, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &stamps.buffer, 0, 8 * u64::from(count));
            gpu.queue.submit([enc.finish()]);
            gpu.wait()?;
            let t: Vec<u64> = bytemuck::pod_collect_to_vec(&gpu.read(&stamps)?[..8 * count as usize]);
            let period = f64::from(gpu.queue.get_timestamp_period());
            out.extend(chunk.iter().zip(t.chunks(2)).map(|(d, p)| ([d.kernel, d.variant, d.source], d.groups, p[1].wrapping_sub(p[0]) as f64 * period * 1e-9)));
        }
        Ok(out)
    }
}

/// A submitted command buffer whose timestamps are read once the device has been waited for.
pub struct Submitted<'g> {
    gpu: &'g Gpu,
    stamps: Option<(PassStamps, std::sync::mpsc::Receiver<bool>)>,
    /// The parameters' uniform buffer, kept from reuse until the submit is waited for.
    _uniform: Option<Uniform>,
}

impl Submitted<'_> {
    /// The pass's device seconds (None without timestamps); call after `Gpu::wait`.
    pub fn device_seconds(self) -> Result<Option<f64>, GpuError> {
        let Some((st, rx)) = self.stamps else { return Ok(None) };
        if !rx.recv().unwrap_or(false) {
            return Err(GpuError::Map);
        }
        let t: [u64; 2] = bytemuck::pod_read_unaligned(&st.staging.get_mapped_range(..).map_err(|_| GpuError::Map)?[..16]);
        st.staging.unmap();
        self.gpu.stamps.lock().unwrap_or_else(|p| p.into_inner()).push(st);
        let period = f64::from(self.gpu.queue.get_timestamp_period());
        Ok(Some(t[1].wrapping_sub(t[0]) as f64 * period * 1e-9))
    }
}

/// A pass's two timestamps: the query set, the buffer they resolve into, and the buffer mapped to read them (kept for later submits once read).
pub(crate) struct PassStamps {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    staging: wgpu::Buffer,
}

impl Gpu {
    /// A kept set of pass timestamps, or a new one when every kept set is in flight.
    fn pass_stamps(&self) -> PassStamps {
        if let Some(st) = self.stamps.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            return st;
        }
        let set = self.device.create_query_set(&wgpu::QuerySetDescriptor { label: None, ty: wgpu::QueryType::Timestamp, count: 2 });
        let buffer = |usage| self.device.create_buffer(&wgpu::BufferDescriptor { label: None, size: 16, usage, mapped_at_creation: false });
        let resolve = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let staging = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        PassStamps { set, resolve, staging }
    }
}

/// Dispatches per query set of a profiled submit (two timestamps each, within wgpu's 4096-query limit).
const PROFILE_CHUNK: usize = 1024;
