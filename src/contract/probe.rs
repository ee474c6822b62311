//! Device probe: does `x*y + z` contract into an FMA here, and does `mul_rn(x, y) + z` stay unfused.
use crate::gpu::{Arg, Gpu, GpuError, PipelineKey, Recorder, Shader};
use std::fmt;

pub const PROBE_SHADER: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "probe_fusion", variant: "wgsl", source: include_str!("../../wgsl/contract/fusion_probe.wgsl") };

/// What the probe saw on 4096 inputs chosen so that the fused and unfused results differ.
#[derive(Clone, Debug)]
pub struct FusionProbe {
    pub inputs: usize,
    /// Plain `x*y + z` matched the fused result on some input.
    pub plain_fuses: bool,
    /// `mul_rn(x,y) + z` matched the unfused (CPU) result on every input.
    pub mul_rn_unfused: bool,
}

impl fmt::Display for FusionProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plain = if self.plain_fuses { "x*y+z fuses" } else { "x*y+z unfused" };
        let guarded = if self.mul_rn_unfused { "mul_rn unfused" } else { "MUL_RN FUSED" };
        write!(f, "{plain}, {guarded}")
    }
}

/// Triples (x, y, z) whose fused and unfused results differ as f32.
pub fn fusion_inputs(count: usize) -> Vec<[f32; 3]> {
    let mut rng = super::Rng::new(0xf05e);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let x = rng.uniform(1.0, 2.0);
        let y = rng.uniform(1.0, 2.0);
        let z = -(x * y) * rng.uniform(0.5, 1.0);
        let fused = x.mul_add(y, z);
        if fused != x * y + z {
            out.push([x, y, z]);
        }
    }
    out
}

/// Runs the probe kernel and compares with Rust's unfused and fused results.
pub fn probe_fusion(gpu: &Gpu) -> Result<FusionProbe, GpuError> {
    let triples = fusion_inputs(4096);
    let flat: Vec<f32> = triples.iter().flatten().copied().collect();
    let input = gpu.upload_pod(&flat)?;
    let out = gpu.alloc((triples.len() * 8) as u64)?;
    gpu.fill_u32(&out, super::POISON);
    let mut rec = Recorder::new(gpu);
    let n = triples.len() as u32;
    rec.dispatch(&PipelineKey::new(PROBE_SHADER, &[]), &[n], &[Arg::Whole(&input), Arg::Whole(&out)], [n.div_ceil(64), 1, 1])?;
    rec.submit()?;
    let got = gpu.read_u32(&out)?;
    let mut plain_fuses = false;
    let mut mul_rn_unfused = true;
    for (i, [x, y, z]) in triples.iter().enumerate() {
        plain_fuses |= got[2 * i] == x.mul_add(*y, *z).to_bits();
        mul_rn_unfused &= got[2 * i + 1] == (x * y + z).to_bits();
    }
    Ok(FusionProbe { inputs: triples.len(), plain_fuses, mul_rn_unfused })
}
