//! The pipeline cache: WGSL sources with the shared numerics prepended, keyed by kernel, variant and override constants.
use super::{Gpu, GpuError};
use std::collections::HashMap;

/// The shared WGSL numerics every kernel may call.
pub const WGSL_LIB: &str = concat!(include_str!("../../wgsl/lib/formats.wgsl"), "\n", include_str!("../../wgsl/lib/math.wgsl"), "\n", include_str!("../../wgsl/lib/edge.wgsl"), "\n");

/// The language a kernel source is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// WGSL, compiled by wgpu on every backend (the shared numerics prepended).
    Wgsl,
    /// Metal Shading Language, passed through to Metal only.
    Msl,
}

/// A kernel source: its registered name, its variant, its language and its text (compared by the text's address, so cache lookups never hash whole sources).
#[derive(Clone, Copy, Debug)]
pub struct Shader {
    pub lang: Lang,
    pub kernel: &'static str,
    pub variant: &'static str,
    pub source: &'static str,
}

impl Shader {
    /// Whether `o` is the same source: language, names and text (equality proper compares the text's address only).
    pub fn same(&self, o: &Shader) -> bool {
        (self.lang, self.kernel, self.variant, self.source) == (o.lang, o.kernel, o.variant, o.source)
    }
}

impl PartialEq for Shader {
    fn eq(&self, o: &Shader) -> bool {
        (self.lang, self.kernel, self.variant) == (o.lang, o.kernel, o.variant) && std::ptr::eq(self.source, o.source)
    }
}

impl Eq for Shader {}

impl std::hash::Hash for Shader {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.lang, self.kernel, self.variant, self.source.as_ptr(), self.source.len()).hash(h);
    }
}

/// The cache key: shader plus override constants (as bits, so keys hash exactly).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub shader: Shader,
    pub constants: Vec<(&'static str, u64)>,
}

#[derive(Default)]
pub(super) struct Cache {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
}

impl Gpu {
    /// The compute pipeline for `key`, compiled on first use.
    pub fn pipeline(&self, key: &PipelineKey) -> Result<wgpu::ComputePipeline, GpuError> {
        let mut cache = self.pipelines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = cache.pipelines.get(key) {
            return Ok(p.clone());
        }
        let err = |message: String| GpuError::Shader { kernel: format!("{}/{}", key.shader.kernel, key.shader.variant), message };
        if key.shader.lang != Lang::Wgsl {
            return Err(err(format!("{:?} sources run only through Metal's passthrough, not on {:?}", key.shader.lang, self.info.backend)));
        }
        let source = format!("{WGSL_LIB}{}", key.shader.source);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(key.shader.kernel),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let constants: Vec<(&str, f64)> = key.constants.iter().map(|&(n, v)| (n, f64::from_bits(v))).collect();
        let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key.shader.kernel),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions { constants: &constants, zero_initialize_workgroup_memory: false },
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(err(e.to_string()));
        }
        cache.pipelines.insert(key.clone(), pipeline.clone());
        Ok(pipeline)
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
