//! Vision tower ops, oracles and dispatchers (spec 4): the bias add and the erf GELU, the aligner's channel-major cell unfold, and bidirectional attention over one image's patches.
pub mod attention_contract;
pub mod contract;

use crate::gpu::{Arg, Buf, GpuError, Lang, PipelineKey, Recorder, Shader};
use crate::kernels::dispatch::{bad_shape, grid64, key};
use crate::numerics::edge::{add, max, mul_term, sub};
use crate::numerics::math::{div, erf, exp, mul_rn};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// The bias add (OP 0) and the GELU (OP 1), one shader.
pub(crate) const ROW_OPS: [Shader; 2] = [
    Shader { lang: crate::gpu::Lang::Wgsl, kernel: "bias_add", variant: "ref", source: include_str!("../../../wgsl/vision/row_ops.wgsl") },
    Shader { lang: crate::gpu::Lang::Wgsl, kernel: "gelu", variant: "ref", source: include_str!("../../../wgsl/vision/row_ops.wgsl") },
];
/// The aligner's cell unfold.
pub(crate) const UNFOLD: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "unfold_cells", variant: "ref", source: include_str!("../../../wgsl/vision/unfold.wgsl") };
/// Bidirectional attention over one image (a workgroup per row and head).
pub(crate) const VIT_ATTENTION: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "vit_attention", variant: "ref", source: include_str!("../../../wgsl/vision/vit_attention.wgsl") };
/// The MSL fast path for Apple GPUs: scores by simdgroups, the same bits.
pub(crate) const VIT_ATTENTION_MSL: Shader = Shader { lang: Lang::Msl, kernel: "vit_attention", variant: "msl_simd", source: crate::gpu::msl_lib!("msl/attention/score.metal", "msl/attention/vit_simd.metal") };

/// `1/sqrt(2)` rounded once from f64.
pub const INV_SQRT2: f32 = std::f64::consts::FRAC_1_SQRT_2 as f32;
/// Largest head dim the attention kernel takes.
pub const MAX_HEAD_DIM: usize = 256;

/// The elementwise row ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// `x + b[col]`, the sum flushed.
    BiasAdd = 0,
    /// `mul_rn(mul_rn(x, 0.5), 1 + erf(mul_rn(x, 1/sqrt 2)))`, the sum flushed.
    Gelu = 1,
}

/// Records a row op over x [m, d] (b: the bias [d] for `BiasAdd`, ignored by `Gelu`) into y, rounded to bf16 when `bf16_out`.
#[allow(clippy::too_many_arguments)]
pub fn record_row_op(rec: &mut Recorder, op: RowOp, x: &Buf, b: &Buf, y: &Buf, m: usize, d: usize, bf16_out: bool, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * d);
    let k = key(ROW_OPS[op as usize], control, &[("OP", op as u32 as f64)]);
    rec.dispatch(&k, &[m as u32, d as u32, u32::from(bf16_out), g[0]], &[Arg::Whole(x), Arg::Whole(b), Arg::Whole(y)], g)
}

/// One GELU value: 0.5 x (1 + erf(x / sqrt 2)) in the canonical order.
pub fn gelu1(x: f32) -> f32 {
    mul_rn(mul_rn(x, 0.5), add(1.0, erf(mul_rn(x, INV_SQRT2))))
}

/// The row op on the CPU.
pub fn row_op(op: RowOp, x: &[f32], b: &[f32], d: usize, bf16_out: bool) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let y = match op {
                RowOp::BiasAdd => add(v, b[i % d]),
                RowOp::Gelu => gelu1(v),
            };
            if bf16_out {
                round_bf16(y)
            } else {
                y
            }
        })
        .collect()
}

/// Sizes of one cell unfold: a grid of `grid_h x grid_w` rows of `channels`, cells of `cell x cell`.
#[derive(Clone, Copy, Debug)]
pub struct Unfold {
    pub grid_h: usize,
    pub grid_w: usize,
    pub channels: usize,
    pub cell: usize,
}

impl Unfold {
    /// Cells down and across (the grid zero-padded to multiples of the cell).
    pub fn cells(&self) -> (usize, usize) {
        (self.grid_h.div_ceil(self.cell), self.grid_w.div_ceil(self.cell))
    }
    /// Output columns: channels times cell area.
    pub fn width(&self) -> usize {
        self.channels * self.cell * self.cell
    }
}

/// Records the unfold of x [grid_h*grid_w, channels] into y [cells, channels*cell^2], entry `c*cell^2 + ky*cell + kx` of a cell (zero past the grid).
pub fn record_unfold(rec: &mut Recorder, x: &Buf, y: &Buf, u: &Unfold, control: u32) -> Result<(), GpuError> {
    if u.cell == 0 || u.channels == 0 || u.grid_h == 0 || u.grid_w == 0 {
        return Err(bad_shape("unfold_cells", format!("{u:?}")));
    }
    let (ch, cw) = u.cells();
    let g = grid64(ch * cw * u.width());
    let params = [u.grid_h as u32, u.grid_w as u32, u.channels as u32, u.cell as u32, g[0]];
    rec.dispatch(&key(UNFOLD, control, &[]), &params, &[Arg::Whole(x), Arg::Whole(y)], g)
}

/// The unfold on the CPU (the order of torch's `F.unfold`, exact copies).
pub fn unfold(x: &[f32], u: &Unfold) -> Vec<f32> {
    let (ch, cw) = u.cells();
    let a = u.cell * u.cell;
    let mut y = vec![0.0f32; ch * cw * u.width()];
    for cy in 0..ch {
        for cx in 0..cw {
            let out = &mut y[(cy * cw + cx) * u.width()..(cy * cw + cx + 1) * u.width()];
            for ky in 0..u.cell {
                for kx in 0..u.cell {
                    let (r, c) = (cy * u.cell + ky, cx * u.cell + kx);
                    if r < u.grid_h && c < u.grid_w {
                        for ch_i in 0..u.channels {
                            out[ch_i * a + ky * u.cell + kx] = x[(r * u.grid_w + c) * u.channels + ch_i];
                        }
                    }
                }
            }
        }
    }
    y
}

/// Sizes of one image's attention: `rows` queries over `keys` keys, `heads` of `dim`.
#[derive(Clone, Copy, Debug)]
pub struct VitDims {
    pub rows: usize,
    pub keys: usize,
    pub heads: usize,
    pub dim: usize,
    /// `dim^-1/2` rounded once from f64.
    pub scale: f32,
}

/// Records attention of q [rows, heads*dim] over k, v [keys, heads*dim] into o [rows, heads*dim] (bf16 values), every query seeing every key, in `lang` (the reference WGSL or the MSL fast path).
#[allow(clippy::too_many_arguments)]
pub fn record_vit_attention(rec: &mut Recorder, q: &Buf, k: &Buf, v: &Buf, o: &Buf, d: &VitDims, lang: Lang, control: u32) -> Result<(), GpuError> {
    if d.dim == 0 || d.dim > MAX_HEAD_DIM || d.heads == 0 || d.heads > 65535 || d.keys == 0 {
        return Err(bad_shape("vit_attention", format!("{d:?}: needs 0 < dim <= {MAX_HEAD_DIM}, 0 < heads <= 65535, keys > 0")));
    }
    let key = PipelineKey::new(if lang == Lang::Msl { VIT_ATTENTION_MSL } else { VIT_ATTENTION }, &[("CONTROL", f64::from(control))]);
    let args = [Arg::Whole(q), Arg::Whole(k), Arg::Whole(v), Arg::Whole(o)];
    for row0 in (0..d.rows).step_by(65535) {
        let n = (d.rows - row0).min(65535);
        let params = [row0 as u32, d.keys as u32, d.heads as u32, d.dim as u32, d.scale.to_bits()];
        rec.dispatch(&key, &params, &args, [d.heads as u32, n as u32, 1])?;
    }
    Ok(())
}

/// One query row over every key, per head h: s_j = mul_rn(canonical_sum(mul_term(q_h, k_j)), scale); M = max(-1e30, s) with +0 for a zero; p_j = exp(s_j - M); o_h[i] = bf16(div(canonical_sum_j(mul_term(p_j, v_j[i])), canonical_sum_j(p_j))), keys in row order.
pub fn attend_all(q: &[f32], k: &[f32], v: &[f32], heads: usize, dim: usize, scale: f32) -> Vec<f32> {
    let width = heads * dim;
    let n = k.len() / width;
    let mut out = Vec::with_capacity(width);
    for h in 0..heads {
        let qh = &q[h * dim..(h + 1) * dim];
        let kh = |j: usize| &k[j * width + h * dim..j * width + (h + 1) * dim];
        let s: Vec<f32> = (0..n).map(|j| mul_rn(canonical_sum(dim, |i| mul_term(qh[i], kh(j)[i]), |_| 1.0), scale)).collect();
        let m = crate::numerics::edge::pos_zero(s.iter().fold(-1e30f32, |a, &x| max(a, x)));
        let p: Vec<f32> = s.iter().map(|&x| exp(sub(x, m))).collect();
        let denom = canonical_sum(n, |j| p[j], |_| 1.0);
        out.extend((0..dim).map(|i| round_bf16(div(canonical_sum(n, |j| mul_term(p[j], v[j * width + h * dim + i]), |_| 1.0), denom))));
    }
    out
}
