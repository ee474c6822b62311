//! Sparse attention with sink, oracle (spec 2.5): one query row over its window rows then its selected compressed rows.
use crate::gpu::{Arg, Buf, GpuError, Lang, PipelineKey, Recorder, Shader};

pub mod contract;
pub mod split;
use crate::numerics::edge::{max, mul_term, sub};
use crate::numerics::math::{div, exp, mul_rn};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// The sparse attention kernel (a workgroup per row and head).
pub(crate) const SPARSE_ATTENTION: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "sparse_attention", variant: "ref", source: include_str!("../../../wgsl/attention/attention.wgsl") };

/// The MSL fast path for Apple GPUs: scores by simdgroups, the same bits.
pub(crate) const SPARSE_ATTENTION_MSL: Shader = Shader { lang: Lang::Msl, kernel: "sparse_attention", variant: "msl_simd", source: crate::gpu::msl_lib!("msl/attention/score.metal", "msl/attention/sparse_simd.metal") };

/// Most keys one query row may attend to (window plus selection width): the kernel's workgroup key list.
pub const MAX_KEYS: usize = 1024;

/// Sizes of one sparse attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnDims {
    /// Query rows of the call, at consecutive positions from `start`.
    pub rows: usize,
    /// Query heads (one sink each).
    pub heads: usize,
    /// Head dim: the length of every q head, kv row and output head.
    pub dim: usize,
    /// Absolute position of row 0.
    pub start: usize,
    /// Window length: rows of the ring.
    pub window: usize,
    /// Selection entries per row (0: no compressed rows).
    pub topk: usize,
    /// `head_dim^-1/2` rounded once from f64.
    pub scale: f32,
    /// Block kv rows (0: causal window): with a block every row attends to the ring's positions from `start - window` and to all block rows.
    pub block: usize,
}

/// Records sparse attention with sink in `lang` (the reference WGSL or the MSL fast path): q [rows, heads*dim], kv [rows, dim] (this call's window rows, row i at position start+i; with a block, [block, dim] keys at positions start..), ring [window, dim] (slot = position mod window, before this call), comp [N, dim] compressed rows and sel [rows, topk] f32 indices into comp (ascending, -1 none; both ignored when topk = 0, any buffers may be passed), sink [heads], out o [rows, heads*dim] (bf16 values as f32).
#[allow(clippy::too_many_arguments)]
pub fn record_sparse_attention(rec: &mut Recorder, q: &Buf, kv: &Buf, ring: &Buf, comp: &Buf, sel: &Buf, sink: &Buf, o: &Buf, d: &AttnDims, lang: Lang, control: u32) -> Result<(), GpuError> {
    let shader = if lang == Lang::Msl { SPARSE_ATTENTION_MSL } else { SPARSE_ATTENTION };
    let ok = d.window > 0 && d.window + d.topk.max(d.block) <= MAX_KEYS && (d.block == 0 || d.topk == 0) && d.dim > 0 && d.dim <= 8192 && d.heads > 0 && d.heads <= 65535 && d.start + d.rows < (1 << 30);
    if !ok {
        let message = format!("{d:?}: needs 0 < window, window + topk (or block) <= {MAX_KEYS}, no selection with a block, 0 < dim <= 8192, 0 < heads <= 65535");
        return Err(GpuError::Shader { kernel: format!("sparse_attention/{}", shader.variant), message });
    }
    let key = PipelineKey::new(shader, &[("CONTROL", f64::from(control))]);
    let args = [Arg::Whole(q), Arg::Whole(kv), Arg::Whole(ring), Arg::Whole(comp), Arg::Whole(sel), Arg::Whole(sink), Arg::Whole(o)];
    for row0 in (0..d.rows).step_by(65535) {
        let n = (d.rows - row0).min(65535);
        let params = [row0 as u32, d.rows as u32, d.heads as u32, d.dim as u32, d.start as u32, d.window as u32, d.topk as u32, d.scale.to_bits(), d.block as u32];
        rec.dispatch(&key, &params, &args, [d.heads as u32, n as u32, 1])?;
    }
    Ok(())
}

/// The keys of query row `i` of a call, as exec::cpu gathers them: window positions ascending (kv from `start`, ring slot pos mod window before), then `sel_row`'s entries >= 0 in order; with `block`, the ring's positions from `start - window` then every kv row, for every row.
#[allow(clippy::too_many_arguments)]
pub fn call_keys<'a>(kv: &'a [f32], ring: &'a [f32], comp: &'a [f32], sel_row: &[f32], dim: usize, start: usize, window: usize, i: usize, block: bool) -> Vec<&'a [f32]> {
    let row = |t: &'a [f32], r: usize| &t[r * dim..(r + 1) * dim];
    let (lo, hi) = if block { (start.saturating_sub(window), start + kv.len() / dim) } else { ((start + i + 1).saturating_sub(window), start + i + 1) };
    let mut keys: Vec<&[f32]> = (lo..hi).map(|pos| if pos >= start { row(kv, pos - start) } else { row(ring, pos % window) }).collect();
    keys.extend(sel_row.iter().filter(|&&v| v >= 0.0).map(|&v| row(comp, v as usize)));
    keys
}

/// One query row `q` [heads*dim] over `keys` (each [dim], K = V): the window rows by ascending position, then the selected compressed rows by ascending index. Canonical order, per head h: s_k = mul_rn(canonical_sum(mul_term(q_h, kv_k)), scale); M = max(max_k s_k, -1e30), a zero +0; p_k = exp(sub(s_k, M)); denom = canonical_sum_k(p_k) + exp(sink_h - M); o_h[i] = bf16(div(canonical_sum_k(mul_term(p_k, kv_k[i])), denom)), every sum over keys in key order.
pub fn attend_row(q: &[f32], keys: &[&[f32]], sink: &[f32], dim: usize, scale: f32) -> Vec<f32> {
    let heads = sink.len();
    let n = keys.len();
    let mut out = Vec::with_capacity(heads * dim);
    for (h, &sink_h) in sink.iter().enumerate() {
        let qh = &q[h * dim..(h + 1) * dim];
        let s: Vec<f32> = keys.iter().map(|k| mul_rn(canonical_sum(dim, |i| mul_term(qh[i], k[i]), |_| 1.0), scale)).collect();
        let m = s.iter().fold(-1e30f32, |a, &v| max(a, v));
        let p: Vec<f32> = s.iter().map(|&v| exp(sub(v, m))).collect();
        let denom = canonical_sum(n, |k| p[k], |_| 1.0) + exp(sub(sink_h, m));
        out.extend((0..dim).map(|i| round_bf16(div(canonical_sum(n, |k| mul_term(p[k], keys[k][i]), |_| 1.0), denom))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_with_a_very_negative_sink_returns_the_key() {
        let k = [0.5f32, -1.0, 2.0, 0.25];
        let q = [1.0f32, 0.0, 0.0, 1.0];
        let o = attend_row(&q, &[&k], &[-200.0], 4, 0.5);
        assert_eq!(o, k.to_vec());
    }
}
