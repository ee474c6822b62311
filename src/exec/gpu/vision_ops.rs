//! The GPU executor's ops on the vision kernel family: the bias add, the GELU, the cell unfold and the tower's attention.
use crate::exec::gpu::ops::values;
use crate::exec::gpu::{GpuExecutor, GpuTensor};
use crate::exec::{shapes, ExecError, Out};
use crate::gpu::Lang;
use crate::kernels::vision::{self, RowOp, Unfold, VitDims};

/// `x + module.bias` on every row.
pub(super) fn bias_add(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("bias_add", "bias_add")?;
    let (b, len) = values(ex, &format!("{module}.bias"))?;
    shapes::bias_add(module, len, (x.rows, x.cols))?;
    let y = ex.out(x.rows, x.cols)?;
    vision::record_row_op(&mut ex.rec, RowOp::BiasAdd, &x.buf, &b, &y.buf, x.rows, x.cols, out == Out::Bf16, 0)?;
    Ok(y)
}

/// The erf GELU of every element.
pub(super) fn gelu(ex: &mut GpuExecutor, x: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("gelu", "gelu")?;
    let y = ex.out(x.rows, x.cols)?;
    vision::record_row_op(&mut ex.rec, RowOp::Gelu, &x.buf, &x.buf, &y.buf, x.rows, x.cols, out == Out::Bf16, 0)?;
    Ok(y)
}

/// The aligner's cell unfold.
pub(super) fn unfold_cells(ex: &mut GpuExecutor, x: &GpuTensor, grid_h: usize, grid_w: usize, cell: usize) -> Result<GpuTensor, ExecError> {
    ex.need("unfold_cells", "unfold_cells")?;
    shapes::unfold_cells((x.rows, x.cols), grid_h, grid_w, cell)?;
    let u = Unfold { grid_h, grid_w, channels: x.cols, cell };
    let (ch, cw) = u.cells();
    let y = ex.out(ch * cw, u.width())?;
    vision::record_unfold(&mut ex.rec, &x.buf, &y.buf, &u, 0)?;
    Ok(y)
}

/// Bidirectional attention over one image's rows.
pub(super) fn vit_attention(ex: &mut GpuExecutor, q: &GpuTensor, k: &GpuTensor, v: &GpuTensor, heads: usize) -> Result<GpuTensor, ExecError> {
    ex.need("vit_attention", "vit_attention")?;
    shapes::vit_attention((q.rows, q.cols), (k.rows, k.cols), (v.rows, v.cols), heads)?;
    let dim = q.cols / heads;
    let d = VitDims { rows: q.rows, keys: k.rows, heads, dim, scale: (1.0 / (dim as f64).sqrt()) as f32 };
    let y = ex.out(q.rows, q.cols)?;
    let lang = if ex.gpu.native_msl() { Lang::Msl } else { Lang::Wgsl };
    vision::record_vit_attention(&mut ex.rec, &q.buf, &k.buf, &v.buf, &y.buf, &d, lang, 0)?;
    Ok(y)
}
