//! The registry: every kernel the contract proves, in contract order, and every WGSL source the engine, the contract and the benchmarks compile.
use crate::contract::Kernel;
use crate::gpu::Shader;
use crate::kernels::ops::{contract as ops_contract, select_contract, Elementwise};
use crate::kernels::{attention, compressor, engram, gemm, hc, indexer, lib, moe, qat, rope, rows};

static LIB_FORMATS: lib::LibFormats = lib::LibFormats;
static ACT_QUANT: ops_contract::ActQuantKernel = ops_contract::ActQuantKernel;
static RMSNORM: ops_contract::RmsNormKernel = ops_contract::RmsNormKernel;
static SWIGLU: ops_contract::SwigluKernel = ops_contract::SwigluKernel;
static ELEMENTWISE: [ops_contract::ElementwiseKernel; 3] = [
    ops_contract::ElementwiseKernel(Elementwise::Add),
    ops_contract::ElementwiseKernel(Elementwise::Scale),
    ops_contract::ElementwiseKernel(Elementwise::RoundBf16),
];
static SOFTMAX: select_contract::SoftmaxKernel = select_contract::SoftmaxKernel;
static ARGMAX: select_contract::SelectKernel = select_contract::SelectKernel { name: "argmax", argmax: true };
static TOPK: select_contract::SelectKernel = select_contract::SelectKernel { name: "topk", argmax: false };

/// Every registered kernel, in contract order.
pub fn registry() -> Vec<&'static dyn Kernel> {
    let mut k: Vec<&'static dyn Kernel> = lib::LIB_FNS.iter().map(|f| f as &dyn Kernel).collect();
    k.push(&LIB_FORMATS);
    k.push(&ACT_QUANT);
    k.extend(gemm::contract::KERNELS.iter().map(|g| g as &dyn Kernel));
    k.extend([&RMSNORM as &dyn Kernel, &SWIGLU]);
    k.extend(ELEMENTWISE.iter().map(|e| e as &dyn Kernel));
    k.extend([&SOFTMAX as &dyn Kernel, &ARGMAX, &TOPK]);
    k.extend(hc::contract::kernels());
    k.extend(engram::contract::kernels());
    k.extend(rope::contract::kernels());
    k.extend(qat::contract::kernels());
    k.extend(attention::contract::kernels());
    k.extend(compressor::contract::kernels());
    k.extend(rows::contract::copy_kernels());
    k.extend(indexer::contract::kernels());
    k.extend(moe::contract::kernels());
    k.extend(rows::contract::kernels());
    k
}

/// All shaders (without the library prepended).
pub fn all() -> Vec<Shader> {
    let mut v: Vec<Shader> = gemm::shaders().to_vec();
    v.extend(gemm::grouped::shaders());
    v.extend([crate::kernels::ops::ACT_QUANT, crate::kernels::ops::RMSNORM, crate::kernels::ops::SWIGLU, crate::kernels::ops::SOFTMAX, crate::kernels::ops::SELECT]);
    v.extend(crate::kernels::ops::ELEMENTWISE);
    v.extend(hc::contract::shaders());
    v.extend(engram::contract::shaders());
    v.extend(rope::contract::shaders());
    v.extend(qat::contract::shaders());
    v.extend(attention::contract::shaders());
    v.extend(compressor::contract::shaders());
    v.extend(indexer::contract::shaders());
    v.extend(moe::contract::shaders());
    v.extend(rows::contract::shaders());
    v.push(lib::PROBE);
    v.push(crate::contract::PROBE_SHADER);
    v.push(crate::kernels::ceiling::STREAM);
    v
}
