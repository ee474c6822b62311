//! Helpers every family's typed dispatchers share: the pipeline key with its planted control, workgroup grids, and the shape error.
use crate::gpu::{GpuError, PipelineKey, Shader};

/// The pipeline key of `shader` with `CONTROL` (0 in the engine) after any other override constants.
pub(crate) fn key(shader: Shader, control: u32, extra: &[(&'static str, f64)]) -> PipelineKey {
    let mut c = extra.to_vec();
    c.push(("CONTROL", f64::from(control)));
    PipelineKey::new(shader, &c)
}

/// A 1-D grid of 64-wide workgroups covering `n` invocations, folded into 2-D past 32768 groups.
pub(crate) fn grid64(n: usize) -> [u32; 3] {
    let groups = (n as u32).div_ceil(64).max(1);
    let gx = groups.min(32768);
    [gx, groups.div_ceil(gx), 1]
}

/// Workgroups for one workgroup per row, folded into 2-D past 32768 rows.
pub(crate) fn row_groups(m: usize) -> [u32; 3] {
    let m = (m as u32).max(1);
    [m.min(32768), m.div_ceil(32768), 1]
}

/// An error naming the kernel when its sizes are out of range.
pub(crate) fn bad_shape(kernel: &str, message: String) -> GpuError {
    GpuError::Shader { kernel: kernel.to_string(), message }
}
