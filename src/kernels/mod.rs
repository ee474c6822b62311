//! Kernel families, a folder each: the op's CPU oracle, f64 reference and bound, its typed dispatcher, its contract registration; its WGSL in `wgsl/<family>/`.
pub mod attention;
pub mod ceiling;
pub mod compressor;
pub(crate) mod dispatch;
pub mod engram;
pub mod gemm;
pub mod hc;
pub mod indexer;
pub mod lib;
pub mod moe;
pub mod ops;
pub mod qat;
pub mod registry;
pub mod rope;
pub mod rows;
pub mod state;
pub mod vision;
mod util;

pub use registry::registry;
