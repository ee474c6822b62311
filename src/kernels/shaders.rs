//! Every WGSL source the engine, the contract and the benchmarks compile, for the lint and the contract's coverage.
use crate::gpu::Shader;

/// All shaders (without the library prepended).
pub fn all() -> Vec<Shader> {
    let mut v: Vec<Shader> = super::gemm::shaders().to_vec();
    v.extend([super::ops::ACT_QUANT, super::ops::RMSNORM, super::ops::SWIGLU, super::ops::SOFTMAX, super::ops::SELECT]);
    v.extend(super::ops::ELEMENTWISE);
    v.push(super::lib_contract::PROBE);
    v.push(crate::contract::PROBE_SHADER);
    v.push(crate::bench::STREAM);
    v
}
