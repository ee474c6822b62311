//! Compressed branch in f64 (spec 2.5): the compressor (ratio 1 and 2), index keys, compressed rows, the indexer, candidate blocks and top-k.
use super::mhc::rope;
use super::mhc::rms_norm;
use super::quant::{bf16, fp4_index_qat, fp4_row_qat};
use super::weights::Linear;

/// A KV source's compressor and index-key projection.
#[derive(Debug, Clone)]
pub struct Compressor {
    /// `compressor.wkv` `[hd, D]` (bf16).
    pub wkv: Linear,
    /// `compressor.wgate` `[hd, D]` (ratio > 1).
    pub wgate: Option<Linear>,
    /// `compressor.norm` weight.
    pub norm: Vec<f64>,
    /// `indexer.wk` `[index_head_dim, hd]` (bf16).
    pub wk: Linear,
    /// `indexer.k_norm` weight.
    pub k_norm: Vec<f64>,
}

/// An index source's query side.
#[derive(Debug, Clone)]
pub struct Indexer {
    /// `indexer.wq_b` `[index_n_heads index_head_dim, q_lora_rank]`.
    pub wq_b: Linear,
    /// `indexer.weights_proj` `[index_n_heads, D]` (bf16).
    pub weights_proj: Linear,
}

/// A value after RoPE and QAT, with its QAT input.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantized {
    /// QAT input (bf16, after RoPE).
    pub raw: Vec<f64>,
    /// QAT output.
    pub value: Vec<f64>,
}

impl Compressor {
    /// Ratio-2 group member: raw `(k, g) = (wkv x, wgate x)` in full precision.
    pub fn project(&self, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let g = self.wgate.as_ref().map(|w| w.apply(x)).unwrap_or_default();
        (self.wkv.apply(x), g)
    }

    /// Softmax-gated pooling of a complete group, per channel, before the bf16 rounding and the norm.
    pub fn pool_raw(members: &[(Vec<f64>, Vec<f64>)]) -> Vec<f64> {
        let width = members[0].0.len();
        (0..width)
            .map(|c| {
                let m = members.iter().fold(f64::NEG_INFINITY, |a, (_, g)| a.max(g[c]));
                let e: Vec<f64> = members.iter().map(|(_, g)| (g[c] - m).exp()).collect();
                let s: f64 = e.iter().sum();
                members.iter().zip(&e).map(|((k, _), w)| w / s * k[c]).sum()
            })
            .collect()
    }

    /// Latent of a complete ratio-2 group: `norm(bf16(pool))`.
    pub fn latent_pooled(&self, members: &[(Vec<f64>, Vec<f64>)], eps: f64) -> Vec<f64> {
        let pooled: Vec<f64> = Compressor::pool_raw(members).into_iter().map(bf16).collect();
        rms_norm(&pooled, &self.norm, eps)
    }

    /// Latent of a ratio-1 token: `norm(bf16(wkv x))`.
    pub fn latent_single(&self, x: &[f64], eps: f64) -> Vec<f64> {
        let k: Vec<f64> = self.wkv.apply(x).into_iter().map(bf16).collect();
        rms_norm(&k, &self.norm, eps)
    }

    /// Index key of a latent at its group position: `k_norm(wk latent)`, RoPE, fp4 QAT (32, power-of-two scale).
    pub fn index_key(&self, latent: &[f64], pos: usize, inv_freq: &[f64], eps: f64) -> Quantized {
        let k: Vec<f64> = self.wk.apply(latent).into_iter().map(bf16).collect();
        let mut raw = rms_norm(&k, &self.k_norm, eps);
        rope_bf16(&mut raw, pos, inv_freq);
        let value = fp4_index_qat(&raw);
        Quantized { raw, value }
    }
}

/// RoPE on the tail, rounding the rotated values to bf16.
fn rope_bf16(v: &mut [f64], pos: usize, inv_freq: &[f64]) {
    rope(v, pos, inv_freq, false);
    let n = v.len();
    v[n - 2 * inv_freq.len()..].iter_mut().for_each(|x| *x = bf16(*x));
}

/// Compressed KV row of a latent at its group position: RoPE, fp4 QAT (16, e4m3 scale).
pub fn comp_row(latent: &[f64], pos: usize, inv_freq: &[f64]) -> Quantized {
    let mut raw = latent.to_vec();
    rope_bf16(&mut raw, pos, inv_freq);
    let value = fp4_row_qat(&raw);
    Quantized { raw, value }
}

/// Index query of one token: `wq_b qr` per head, RoPE at `pos`, fp4 QAT.
pub fn index_query(ix: &Indexer, qr: &[f64], pos: usize, heads: usize, inv_freq: &[f64]) -> Vec<f64> {
    let mut q: Vec<f64> = ix.wq_b.apply(qr).into_iter().map(bf16).collect();
    let d = q.len() / heads;
    let mut out = Vec::with_capacity(q.len());
    for head in q.chunks_exact_mut(d) {
        rope_bf16(head, pos, inv_freq);
        out.extend(fp4_index_qat(head));
    }
    out
}

/// Indexer scores of one token over `keys`: `bf16(sum_h bf16(relu(bf16(q_h . k_t)) * w_h))`, with `w = bf16(bf16(weights_proj x) / sqrt(index_head_dim * heads))`; keys at or beyond `visible` are -inf.
pub fn index_scores(ix: &Indexer, q: &[f64], x: &[f64], keys: &[Vec<f64>], visible: usize, heads: usize) -> Vec<f64> {
    let d = q.len() / heads;
    let c = (d as f64).powf(-0.5) * (heads as f64).powf(-0.5);
    let w: Vec<f64> = ix.weights_proj.apply(x).into_iter().map(|v| bf16(bf16(v) * c)).collect();
    keys.iter()
        .enumerate()
        .map(|(t, k)| {
            if t >= visible {
                return f64::NEG_INFINITY;
            }
            let s: f64 = (0..heads)
                .map(|h| bf16(bf16(q[h * d..(h + 1) * d].iter().zip(k).map(|(a, b)| a * b).sum::<f64>()).max(0.0) * w[h]))
                .sum();
            bf16(s)
        })
        .collect()
}

/// Level one: per-position mask of the best `topk_blocks` blocks (block score = max, -inf padded), the block of position `visible - 1` pinned, unreachable blocks dropped.
pub fn candidate_blocks(scores: &[f64], visible: usize, topk_blocks: usize, block: usize) -> Vec<bool> {
    let n_blocks = scores.len().div_ceil(block);
    let mut bs: Vec<f64> = (0..n_blocks)
        .map(|b| scores[b * block..((b + 1) * block).min(scores.len())].iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v)))
        .collect();
    if visible > 0 {
        bs[(visible - 1) / block] = f64::INFINITY;
    }
    let mut keep = vec![false; n_blocks];
    for b in super::moe::top_k_desc(&bs, topk_blocks.min(n_blocks)) {
        keep[b] = bs[b] > f64::NEG_INFINITY;
    }
    (0..scores.len()).map(|t| keep[t / block]).collect()
}

/// Top-k of one query's scores: the best `min(k, visible)` of the first `visible` by score (ties, -inf among them: lower index), returned ascending.
pub fn select_topk(scores: &[f64], visible: usize, k: usize) -> Vec<usize> {
    let vis = visible.min(scores.len());
    let mut picks = super::moe::top_k_desc(&scores[..vis], k.min(vis));
    picks.sort_unstable();
    picks
}
