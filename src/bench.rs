//! Benchmarks: GEMM bandwidth and FLOP rate at the model's shapes, next to the device's copy bandwidth.
use crate::gpu::Gpu;

/// Runs the kernel benchmark and prints one line per shape.
pub fn kernels(_gpu: &Gpu, _reps: usize, _only: Option<&str>) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
