//! The GPU executor's row movement: embedding rows, slices, stream repeat, gathers, cache appends and window-ring writes.
use super::cpu::check;
use super::gpu::{GpuExecutor, GpuTensor};
use super::ExecError;

/// The error of an op whose kernel has not landed in the registry.
pub(crate) fn pending(op: &str) -> ExecError {
    ExecError::Unavailable(format!("{op}: kernel not registered yet"))
}

/// Rows `start..start + len` of `x`.
pub(super) fn slice_rows(ex: &mut GpuExecutor, x: &GpuTensor, start: usize, len: usize) -> Result<GpuTensor, ExecError> {
    check(start + len <= x.rows, "slice_rows", || format!("rows {start}..{} of {}", start + len, x.rows))?;
    let _ = ex;
    Err(pending("slice_rows"))
}

/// Each row repeated `hc` times.
pub(super) fn hc_repeat(ex: &mut GpuExecutor, x: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
    let _ = (ex, x, hc);
    Err(pending("hc_repeat"))
}

/// Rows of the BF16 table `module.weight` for `ids`.
pub(super) fn embed(ex: &mut GpuExecutor, module: &str, ids: &[u32]) -> Result<GpuTensor, ExecError> {
    let _ = (ex, module, ids);
    Err(pending("embed"))
}

/// Rows `idx` of `x` into a new `[idx.len(), cols]` tensor.
pub(crate) fn gather_rows(ex: &mut GpuExecutor, x: &GpuTensor, idx: &[u32]) -> Result<GpuTensor, ExecError> {
    let _ = (ex, x, idx);
    Err(pending("gather_rows"))
}

/// Appends `rows` to `cache`, growing its buffer by doubling.
pub(super) fn append_rows(ex: &mut GpuExecutor, cache: &mut GpuTensor, rows: &GpuTensor) -> Result<(), ExecError> {
    check(cache.cols == rows.cols, "append_rows", || format!("cache rows of {} vs rows of {}", cache.cols, rows.cols))?;
    let _ = ex;
    Err(pending("append_rows"))
}

/// Writes rows (positions `start..`) into ring slots `position mod ring rows`; only the last `ring rows` rows are written, so each slot is written once.
pub(super) fn ring_write(ex: &mut GpuExecutor, ring: &mut GpuTensor, rows: &GpuTensor, start: usize) -> Result<(), ExecError> {
    check(ring.cols == rows.cols && ring.rows > 0, "ring_write", || format!("ring [{}, {}] vs rows of {}", ring.rows, ring.cols, rows.cols))?;
    let _ = (ex, start);
    Err(pending("ring_write"))
}
