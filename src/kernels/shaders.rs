//! Every WGSL source the engine, the contract and the benchmarks compile, for the lint and the contract's coverage.
use crate::gpu::Shader;

/// All shaders (without the library prepended).
pub fn all() -> Vec<Shader> {
    let mut v: Vec<Shader> = super::gemm::shaders().to_vec();
    v.extend(super::gemm_grouped::shaders());
    v.extend([super::ops::ACT_QUANT, super::ops::RMSNORM, super::ops::SWIGLU, super::ops::SOFTMAX, super::ops::SELECT]);
    v.extend(super::ops::ELEMENTWISE);
    v.extend(super::hc_contract::shaders());
    v.extend(super::attention_contract::shaders());
    v.extend(super::indexer_contract::shaders());
    v.extend(super::moe_contract::shaders());
    v.push(super::lib_contract::PROBE);
    v.push(crate::contract::PROBE_SHADER);
    v.push(crate::bench::STREAM);
    v
}
