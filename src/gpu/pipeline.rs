//! The pipeline cache: WGSL sources with the shared numerics prepended (on Metal, their MSL passed through), hand-written MSL on Metal, keyed by kernel, variant and override constants.
use super::shader::{Lang, Shader, WGSL_LIB};
use super::{Gpu, GpuError};
use std::collections::HashMap;

/// The cache key: shader plus override constants (as bits, so keys hash exactly).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub shader: Shader,
    pub constants: Vec<(&'static str, u64)>,
}

/// A compiled pipeline, and for translated WGSL on Metal the binding that carries its runtime arrays' byte sizes.
#[derive(Clone)]
pub(crate) struct Compiled {
    pub pipeline: wgpu::ComputePipeline,
    /// (binding, bindings whose sizes it holds, one u32 each).
    pub sizes: Option<(u32, Vec<u32>)>,
}

#[derive(Default)]
pub(super) struct Cache {
    pipelines: HashMap<PipelineKey, Compiled>,
}

impl Gpu {
    /// Whether this device runs sources in `lang`: WGSL everywhere, MSL on Metal and in the harness.
    pub fn runs(&self, lang: Lang) -> bool {
        lang == Lang::Wgsl || self.emu.is_some() || self.info.backend == wgpu::Backend::Metal
    }

    /// Whether kernels reach the device as MSL (Metal, or the harness), so the forward takes the MSL fast paths.
    pub fn native_msl(&self) -> bool {
        self.runs(Lang::Msl)
    }

    /// The compute pipeline for `key`, compiled on first use.
    pub fn pipeline(&self, key: &PipelineKey) -> Result<wgpu::ComputePipeline, GpuError> {
        self.compiled(key).map(|c| c.pipeline)
    }

    /// The compiled pipeline for `key`: through wgpu's WGSL path, or on Metal as passed-through MSL (so Metal's fast math never touches it).
    pub(crate) fn compiled(&self, key: &PipelineKey) -> Result<Compiled, GpuError> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.pipelines.get(key) {
            return Ok(p.clone());
        }
        let err = |message: String| GpuError::Shader { kernel: format!("{}/{}", key.shader.kernel, key.shader.variant), message };
        if !self.runs(key.shader.lang) {
            return Err(err(format!("{:?} sources run only on Metal, not on {:?}", key.shader.lang, self.info.backend)));
        }
        let constants: Vec<(&str, f64)> = key.constants.iter().map(|&(n, v)| (n, f64::from_bits(v))).collect();
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let compiled = if self.info.backend == wgpu::Backend::Metal {
            self.passthrough(key, &constants).map_err(err)?
        } else {
            let source = format!("{WGSL_LIB}{}", key.shader.source);
            let desc = wgpu::ShaderModuleDescriptor { label: Some(key.shader.kernel), source: wgpu::ShaderSource::Wgsl(source.into()) };
            let mut checks = wgpu::ShaderRuntimeChecks::checked();
            checks.force_loop_bounding = false;
            // SAFETY: every loop of every kernel ends, its bounds set by parameters the record functions check; bounds checks stay on.
            let module = unsafe { self.device.create_shader_module_trusted(desc, checks) };
            let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(key.shader.kernel),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, zero_initialize_workgroup_memory: false },
                cache: None,
            });
            Compiled { pipeline, sizes: None }
        };
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(err(e.to_string()));
        }
        cache.pipelines.insert(key.clone(), compiled.clone());
        Ok(compiled)
    }

    /// A Metal pipeline from the MSL Metal is given (naga's translation with the exactness header, or a hand-written source), over an explicit layout: the parameter uniform, the storage buffers, and the sizes uniform where the translation reads one.
    fn passthrough(&self, key: &PipelineKey, constants: &[(&str, f64)]) -> Result<Compiled, String> {
        let t = super::msl::metal_text(&key.shader, constants).map_err(|e| e.to_string())?;
        if t.buffers.iter().enumerate().any(|(i, b)| b.binding != i as u32) || t.buffers.first().is_some_and(|b| b.mutable) {
            return Err(format!("bindings {:?}: a passthrough layout needs 0 (the parameters), 1, 2, ... in order", t.buffers.iter().map(|b| b.binding).collect::<Vec<_>>()));
        }
        let entry = |binding: u32, ty: wgpu::BufferBindingType| wgpu::BindGroupLayoutEntry { binding, visibility: wgpu::ShaderStages::COMPUTE, ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None }, count: None };
        let mut entries: Vec<wgpu::BindGroupLayoutEntry> = t.buffers.iter().map(|b| entry(b.binding, if b.binding == 0 { wgpu::BufferBindingType::Uniform } else { wgpu::BufferBindingType::Storage { read_only: !b.mutable } })).collect();
        let sizes = (!t.sized.is_empty()).then(|| (u32::from(t.sizes_slot), t.sized.clone()));
        if let Some((binding, _)) = &sizes {
            entries.push(entry(*binding, wgpu::BufferBindingType::Uniform));
        }
        let bgl = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(key.shader.kernel), entries: &entries });
        let layout = self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: Some(key.shader.kernel), bind_group_layouts: &[Some(&bgl)], immediate_size: 0 });
        let [x, y, z] = t.workgroup;
        let points = [wgpu::PassthroughShaderEntryPoint { name: t.entry.clone().into(), workgroup_size: (x, y, z) }];
        let desc = wgpu::ShaderModuleDescriptorPassthrough { label: Some(key.shader.kernel), entry_points: points[..].into(), msl: Some(t.source.clone().into()), ..Default::default() };
        // SAFETY: the text is the harness-proven MSL whose buffers the layout above declares in Metal's slot order; Metal validates the source when it compiles it.
        let module = unsafe { self.device.create_shader_module_passthrough(desc) };
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key.shader.kernel),
            layout: Some(&layout),
            module: &module,
            entry_point: Some(&t.entry),
            compilation_options: wgpu::PipelineCompilationOptions::default(),
            cache: None,
        });
        Ok(Compiled { pipeline, sizes })
    }
}

impl Gpu {
    /// Every shader compiled on this device so far.
    pub fn compiled_shaders(&self) -> Vec<Shader> {
        let cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<Shader> = cache.pipelines.keys().map(|k| k.shader).collect();
        v.sort_by_key(|s| (s.kernel, s.variant));
        v.dedup();
        v
    }
}

impl PipelineKey {
    /// A key with override constants given as (name, value) pairs.
    pub fn new(shader: Shader, constants: &[(&'static str, f64)]) -> PipelineKey {
        PipelineKey { shader, constants: constants.iter().map(|&(n, v)| (n, v.to_bits())).collect() }
    }
}
