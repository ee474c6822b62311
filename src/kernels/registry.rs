//! The registry, the one list: every kernel the contract proves, in contract order, with its typed variants and their sources; the shader list and the forward's kernel list are derived from it.
use crate::contract::{Kernel, Variant};
use crate::gpu::Shader;
use crate::kernels::ops::{contract as ops_contract, select_contract, Elementwise};
use crate::kernels::{attention, compressor, engram, gemm, hc, indexer, lib, moe, qat, rope, rows, state, vision};

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

/// Sources that measure the device rather than compute an op: the contract's fusion and edge probes and the benchmarks' bandwidth instrument.
pub const INSTRUMENTS: [Shader; 4] = [crate::contract::PROBE_SHADER, crate::contract::EDGE_SHADER, crate::kernels::ceiling::STREAM, crate::kernels::ceiling::FMA];

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
    k.extend(state::contract::kernels());
    k.extend(indexer::contract::kernels());
    k.extend(moe::contract::kernels());
    k.extend(rows::contract::kernels());
    k.extend(vision::contract::kernels());
    k
}

/// Every variant of every registered kernel, with its kernel's name.
pub fn variants() -> Vec<(&'static str, &'static Variant)> {
    registry().into_iter().flat_map(|k| k.variants().iter().map(move |v| (k.name(), v))).collect()
}

/// Every source the engine, the contract and the benchmarks compile: each variant's shaders, then the instruments (without the library prepended), each once.
pub fn all() -> Vec<Shader> {
    let mut v: Vec<Shader> = Vec::new();
    for s in variants().into_iter().flat_map(|(_, v)| v.shaders.iter().copied()).chain(INSTRUMENTS) {
        if !v.iter().any(|x| x.same(&s)) {
            v.push(s);
        }
    }
    v
}

/// The registered kernels the forward dispatches, by name.
pub fn forward_kernels() -> Vec<&'static str> {
    registry().into_iter().filter(|k| k.in_forward()).map(|k| k.name()).collect()
}

/// A dispatch's name in a profile: `kernel/variant`, with the stage's index where the variant dispatches several sources.
pub fn stage_label(kernel: &str, variant: &str, source: &str) -> String {
    let stages = variants().into_iter().find(|(k, v)| *k == kernel && v.name == variant).map(|(_, v)| v.shaders);
    match stages.and_then(|s| (s.len() > 1).then(|| s.iter().position(|x| x.source == source)).flatten()) {
        Some(i) => format!("{kernel}/{variant}.{i}"),
        None => format!("{kernel}/{variant}"),
    }
}
