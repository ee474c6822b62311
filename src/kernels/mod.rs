//! Kernel families: each op with its WGSL sources, typed dispatcher, CPU oracle, f64 reference, bound, shapes and controls.
pub mod attention;
pub mod compressor;
pub mod engram_op;
pub mod gemm;
pub mod gemm_grouped;
pub mod hc;
pub mod indexer;
pub mod moe;
pub mod qat;
pub mod rope;
mod attention_contract;
mod gemm_contract;
mod hc_contract;
mod indexer_contract;
mod moe_contract;
mod lib_contract;
pub mod ops;
mod ops_contract;
mod select_contract;
pub mod shaders;
mod util;

use crate::contract::Kernel;
use ops::Elementwise;

static LIB_FORMATS: lib_contract::LibFormats = lib_contract::LibFormats;
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
    let mut k: Vec<&'static dyn Kernel> = lib_contract::LIB_FNS.iter().map(|f| f as &dyn Kernel).collect();
    k.push(&LIB_FORMATS);
    k.push(&ACT_QUANT);
    k.extend(gemm_contract::KERNELS.iter().map(|g| g as &dyn Kernel));
    k.extend([&RMSNORM as &dyn Kernel, &SWIGLU]);
    k.extend(ELEMENTWISE.iter().map(|e| e as &dyn Kernel));
    k.extend([&SOFTMAX as &dyn Kernel, &ARGMAX, &TOPK]);
    k.extend(hc_contract::kernels());
    k.extend(attention_contract::kernels());
    k.extend(indexer_contract::kernels());
    k.extend(moe_contract::kernels());
    k
}
