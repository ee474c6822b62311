//! Typed dispatchers of the mHC kernels, and the pipeline-key and grid helpers the family's dispatchers share.
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::kernels::dispatch::{bad_shape, grid64, key};
use crate::kernels::hc::HcParams;

pub(crate) const HC_MIXES: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "hc_mixes", variant: "ref", source: include_str!("../../../wgsl/hc/hc_mixes.wgsl") };
pub(crate) const HC_COLLAPSE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "hc_collapse", variant: "ref", source: include_str!("../../../wgsl/hc/hc_collapse.wgsl") };
pub(crate) const HC_EXPAND: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "hc_expand", variant: "ref", source: include_str!("../../../wgsl/hc/hc_expand.wgsl") };

/// Largest stream count the mHC kernels take (mix width 24).
pub const MAX_HC: usize = 4;

/// Words of the segment scratch `record_hc_mixes` needs for `rows` rows of `n` = hc*d values and `nsum` sums.
pub fn hc_mixes_scratch_words(rows: usize, n: usize, nsum: usize) -> usize {
    rows * nsum * n.div_ceil(32).div_ceil(8)
}

/// Records mHC mixes: h [rows, hc*d], hc_fn [(2+hc)*hc, hc*d], scale [3], base [(2+hc)*hc] into mix [rows, (2+hc)*hc] = pre, post, comb row-major; seg (`hc_mixes_scratch_words`) holds the segment sums between the two passes.
#[allow(clippy::too_many_arguments)]
pub fn record_hc_mixes(rec: &mut Recorder, h: &Buf, hc_fn: &Buf, scale: &Buf, base: &Buf, mix: &Buf, seg: &Buf, rows: usize, d: usize, p: &HcParams, control: u32) -> Result<(), GpuError> {
    if p.hc == 0 || p.hc > MAX_HC || p.iters == 0 || rows > 65535 {
        return Err(bad_shape("hc_mixes", format!("{rows} rows (at most 65535), hc {} (1..={MAX_HC}), {} Sinkhorn iterations", p.hc, p.iters)));
    }
    let n = p.hc * d;
    let nsum = p.mix_dim() + 1;
    if seg.bytes < 4 * hc_mixes_scratch_words(rows, n, nsum) as u64 {
        return Err(bad_shape("hc_mixes", format!("segment scratch of {} bytes for {rows} rows of {n}", seg.bytes)));
    }
    let inv_n = (1.0 / n as f64) as f32;
    let params = [rows as u32, n as u32, p.hc as u32, p.iters as u32, inv_n.to_bits(), p.norm_eps.to_bits(), p.hc_eps.to_bits()];
    let args = [Arg::Whole(h), Arg::Whole(hc_fn), Arg::Whole(scale), Arg::Whole(base), Arg::Whole(mix), Arg::Whole(seg), Arg::Whole(h), Arg::Whole(hc_fn)];
    let chunks = n.div_ceil(32).div_ceil(128).max(1) as u32;
    rec.dispatch(&key(HC_MIXES, control, &[("PHASE", 1.0)]), &params, &args, [chunks, nsum as u32, rows as u32])?;
    rec.dispatch(&key(HC_MIXES, control, &[("PHASE", 2.0)]), &params, &args, [rows as u32, 1, 1])
}

/// Records mHC collapse: h [rows, hc*d], mix [rows, mix_cols] (pre = its first hc columns) into y [rows, d] (bf16 values).
#[allow(clippy::too_many_arguments)]
pub fn record_hc_collapse(rec: &mut Recorder, h: &Buf, mix: &Buf, y: &Buf, rows: usize, hc: usize, d: usize, mix_cols: usize, control: u32) -> Result<(), GpuError> {
    if hc == 0 || mix_cols < hc {
        return Err(bad_shape("hc_collapse", format!("hc {hc} with {mix_cols} mix columns")));
    }
    let g = grid64(rows * d);
    let params = [rows as u32, hc as u32, d as u32, mix_cols as u32, g[0]];
    rec.dispatch(&key(HC_COLLAPSE, control, &[]), &params, &[Arg::Whole(h), Arg::Whole(mix), Arg::Whole(y)], g)
}

/// Records mHC expand: out [rows, d], h [rows, hc*d], mix [rows, (2+hc)*hc] (post, comb) into y [rows, hc*d] (bf16 values).
#[allow(clippy::too_many_arguments)]
pub fn record_hc_expand(rec: &mut Recorder, out: &Buf, h: &Buf, mix: &Buf, y: &Buf, rows: usize, hc: usize, d: usize, control: u32) -> Result<(), GpuError> {
    if hc == 0 {
        return Err(bad_shape("hc_expand", "hc 0".to_string()));
    }
    let g = grid64(rows * hc * d);
    let params = [rows as u32, hc as u32, d as u32, g[0]];
    rec.dispatch(&key(HC_EXPAND, control, &[]), &params, &[Arg::Whole(out), Arg::Whole(h), Arg::Whole(mix), Arg::Whole(y)], g)
}
