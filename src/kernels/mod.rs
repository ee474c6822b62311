//! Kernel families: each op with its WGSL sources, typed dispatcher, CPU oracle, f64 reference, bound, shapes and controls.
pub mod gemm;
mod gemm_contract;
mod util;

use crate::contract::Kernel;

/// Every registered kernel, in contract order.
pub fn registry() -> Vec<&'static dyn Kernel> {
    let mut k: Vec<&'static dyn Kernel> = Vec::new();
    k.extend(gemm_contract::KERNELS.iter().map(|g| g as &dyn Kernel));
    k
}
