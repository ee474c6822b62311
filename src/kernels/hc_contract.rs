//! Contract registrations of the mHC, engram gate, RoPE and QAT kernels.
#[path = "hc_contract_engram.rs"]
mod engram_contract;
#[path = "hc_contract_mixes.rs"]
mod mixes_contract;
#[path = "hc_contract_qat.rs"]
mod qat_contract;
#[path = "hc_contract_rope.rs"]
mod rope_contract;
#[path = "hc_contract_stream.rs"]
mod stream_contract;

use super::hc::dispatch;
use super::qat::{Qat, QAT};
use crate::contract::Kernel;
use crate::gpu::Shader;

static STREAM_KERNELS: [stream_contract::StreamKernel; 2] = [stream_contract::StreamKernel { expand: false }, stream_contract::StreamKernel { expand: true }];
static ROPE_KERNELS: [rope_contract::RopeKernel; 2] = [rope_contract::RopeKernel { inverse: false }, rope_contract::RopeKernel { inverse: true }];
static MIXES: mixes_contract::MixesKernel = mixes_contract::MixesKernel;
static ENGRAM: engram_contract::EngramKernel = engram_contract::EngramKernel;
static QAT_KERNELS: [qat_contract::QatKernel; 3] = [qat_contract::QatKernel(Qat::Fp8), qat_contract::QatKernel(Qat::Fp4Rows), qat_contract::QatKernel(Qat::Fp4Index)];

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    let mut k: Vec<&'static dyn Kernel> = Vec::new();
    k.push(&MIXES);
    k.extend(STREAM_KERNELS.iter().map(|s| s as &dyn Kernel));
    k.push(&ENGRAM);
    k.extend(ROPE_KERNELS.iter().map(|r| r as &dyn Kernel));
    k.extend(QAT_KERNELS.iter().map(|q| q as &dyn Kernel));
    k
}

/// This family's WGSL sources.
pub fn shaders() -> Vec<Shader> {
    let mut v = Vec::new();
    v.extend([dispatch::HC_MIXES, dispatch::HC_COLLAPSE, dispatch::HC_EXPAND]);
    v.push(super::engram_op::ENGRAM_GATE);
    v.extend([super::rope::ROPE, super::rope::ROPE_INVERSE]);
    v.extend(QAT);
    v
}
