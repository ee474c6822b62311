//! Indexer oracles (spec 2.5): scores of one query against the owner's index keys, level-one candidate blocks, and the top-k selection.
pub mod contract;
mod select_contract;

use crate::kernels::dispatch::{grid64, key, row_groups};
use crate::kernels::ops::topk;
use crate::kernels::qat::Qat;
use crate::kernels::state::Packing;
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::edge::{mul_term, relu};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

pub(crate) const INDEX_SCORES: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "index_scores", variant: "ref", source: include_str!("../../../wgsl/indexer/index_scores.wgsl") };
pub(crate) const INDEX_SCORES_PACKED: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "index_scores", variant: "packed", source: include_str!("../../../wgsl/indexer/index_scores.wgsl") };
pub(crate) const MASK_SCORES: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "mask_scores", variant: "ref", source: include_str!("../../../wgsl/indexer/mask_scores.wgsl") };
pub(crate) const INDEX_TOPK: Shader = Shader {
    lang: crate::gpu::Lang::Wgsl,
    kernel: "index_topk",
    variant: "ref",
    source: concat!(include_str!("../../../wgsl/indexer/index_radix.wgsl"), include_str!("../../../wgsl/indexer/index_topk.wgsl")),
};
pub(crate) const CANDIDATE_MASK: Shader = Shader {
    lang: crate::gpu::Lang::Wgsl,
    kernel: "candidate_mask",
    variant: "ref",
    source: concat!(include_str!("../../../wgsl/indexer/index_radix.wgsl"), include_str!("../../../wgsl/indexer/candidate_mask.wgsl")),
};

fn too_big(kernel: &str, message: String) -> GpuError {
    GpuError::Shader { kernel: format!("{kernel}/ref"), message }
}

/// Key values the scores kernel stages in workgroup memory per workgroup.
const SCORES_KEY_WORDS: usize = 2048;
/// Keys a scores thread takes at most (the shader's `IS_PER`).
const SCORES_PER: usize = 4;

/// Workgroups below which a scores dispatch gives each thread one key, so few rows over few keys still fill the device.
const SCORES_SPREAD: usize = 128;

/// (lanes, keys per lane) of a scores workgroup over `s` rows and `t` keys: lanes of `heads` threads, as many as 256 threads and the staged keys allow, each taking up to `SCORES_PER` keys (one when that leaves fewer than `SCORES_SPREAD` workgroups).
fn scores_layout(heads: usize, dim: usize, s: usize, t: usize) -> (usize, usize) {
    let lanes = (256 / heads).min(SCORES_KEY_WORDS / dim).max(1);
    let per = SCORES_PER.min(SCORES_KEY_WORDS / (lanes * dim)).min(256 / lanes).max(1);
    (lanes, if s * t.div_ceil(lanes * per) < SCORES_SPREAD { 1 } else { per })
}

/// Records indexer scores: q [s, heads*dim], w [s, heads], keys [t, dim] (f32 holding bf16 values, so products are exact; or rows packed as `packed` says), visible [s] u32 -> scores [s, t] f32 (-inf from visible on).
#[allow(clippy::too_many_arguments)]
pub fn record_index_scores(rec: &mut Recorder, q: &Buf, w: &Buf, keys: &Buf, visible: &Buf, scores: &Buf, s: usize, t: usize, heads: usize, dim: usize, packed: Option<Packing>, control: u32) -> Result<(), GpuError> {
    if heads == 0 || heads > 256 {
        return Err(too_big("index_scores", format!("{heads} heads (1..=256)")));
    }
    if packed.is_some_and(|p| p.kind != Qat::Fp4Index || p.cols != dim) {
        return Err(too_big("index_scores", format!("keys packed as {packed:?} for {dim} values a key (e2m1 with e8m0 scales only)")));
    }
    if dim == 0 || dim > SCORES_KEY_WORDS {
        return Err(too_big("index_scores", format!("{dim} values a key (1..={SCORES_KEY_WORDS})")));
    }
    let (lanes, per) = scores_layout(heads, dim, s, t);
    let chunk = lanes * per;
    if t.div_ceil(chunk) > 65535 || s > 65535 {
        return Err(too_big("index_scores", format!("{s} rows x {t} keys exceed one dispatch")));
    }
    let params = [s as u32, t as u32, heads as u32, dim as u32, lanes as u32, per as u32];
    let args = [Arg::Whole(q), Arg::Whole(w), Arg::Whole(keys), Arg::Whole(visible), Arg::Whole(scores), Arg::Whole(q)];
    let (shader, flag) = if packed.is_some() { (INDEX_SCORES_PACKED, 1.0) } else { (INDEX_SCORES, 0.0) };
    rec.dispatch(&key(shader, control, &[("PACKED", flag)]), &params, &args, [t.div_ceil(chunk).max(1) as u32, s as u32, 1])
}

/// Records level-one candidate blocks: scores [m, n] f32, visible [m] u32 -> mask [m, n] f32 (1.0 kept, 0.0 not).
#[allow(clippy::too_many_arguments)]
pub fn record_candidate_mask(rec: &mut Recorder, scores: &Buf, visible: &Buf, mask: &Buf, m: usize, n: usize, blocks: usize, block: usize, control: u32) -> Result<(), GpuError> {
    if block == 0 {
        return Err(too_big("candidate_mask", "block size 0".into()));
    }
    let params = [m as u32, n as u32, blocks as u32, block as u32];
    rec.dispatch(&key(CANDIDATE_MASK, control, &[]), &params, &[Arg::Whole(scores), Arg::Whole(visible), Arg::Whole(mask)], row_groups(m))
}

/// Records level-two masking: scores [m, n] f32, mask [m, n] f32 -> y [m, n] f32 (-inf where the mask is 0).
pub fn record_mask_scores(rec: &mut Recorder, scores: &Buf, mask: &Buf, y: &Buf, m: usize, n: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * n);
    rec.dispatch(&key(MASK_SCORES, control, &[]), &[m as u32, n as u32, g[0]], &[Arg::Whole(scores), Arg::Whole(mask), Arg::Whole(y)], g)
}

/// Records the indexer top-k: scores [m, n] f32, visible [m] u32 -> out [m, k] f32 (selected indices ascending, then -1).
#[allow(clippy::too_many_arguments)]
pub fn record_index_topk(rec: &mut Recorder, scores: &Buf, visible: &Buf, out: &Buf, m: usize, n: usize, k: usize, control: u32) -> Result<(), GpuError> {
    if n >= 1 << 24 {
        return Err(too_big("index_topk", format!("{n} scores per row exceed exact f32 indices")));
    }
    rec.dispatch(&key(INDEX_TOPK, control, &[]), &[m as u32, n as u32, k as u32], &[Arg::Whole(scores), Arg::Whole(visible), Arg::Whole(out)], row_groups(m))
}

/// Scores of one query: `q` [heads*dim] and `w` [heads] (bf16 values) against `keys` [t*dim]; keys at `visible` and beyond score -inf. Canonical order, per key t and head h: dot = bf16(canonical_sum(mul_term(q_h, k_t))); term = bf16(mul_term(relu(dot), w_h)); score = bf16(canonical_sum over h ascending of term) (the reference's bf16 einsum, product and head sum).
pub fn scores_row(q: &[f32], w: &[f32], keys: &[f32], dim: usize, visible: usize) -> Vec<f32> {
    let heads = w.len();
    let t_len = keys.len() / dim.max(1);
    (0..t_len)
        .map(|t| {
            if t >= visible {
                return f32::NEG_INFINITY;
            }
            let k = &keys[t * dim..(t + 1) * dim];
            let terms: Vec<f32> = (0..heads)
                .map(|h| {
                    let qh = &q[h * dim..(h + 1) * dim];
                    let dot = round_bf16(canonical_sum(dim, |i| mul_term(qh[i], k[i]), |_| 1.0));
                    round_bf16(mul_term(relu(dot), w[h]))
                })
                .collect();
            round_bf16(canonical_sum(heads, |h| terms[h], |_| 1.0))
        })
        .collect()
}

/// Level-one candidate mask of one query (1.0 kept, 0.0 not): block score = max of its `block` positions (-inf padded); the block holding position `visible - 1` is pinned to +inf; the top `min(blocks, n_blocks)` blocks by (score desc, index asc) with a score above -inf are kept.
pub fn candidate_mask_row(scores: &[f32], visible: usize, blocks: usize, block: usize) -> Vec<f32> {
    let n = scores.len();
    let visible = visible.min(n);
    let nb = n.div_ceil(block.max(1));
    let mut bs: Vec<f32> = (0..nb)
        .map(|b| scores[b * block..((b + 1) * block).min(n)].iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)))
        .collect();
    if visible > 0 && nb > 0 {
        bs[(visible - 1) / block] = f32::INFINITY;
    }
    let (idx, val) = topk(&bs, nb, blocks.min(nb));
    let mut keep = vec![false; nb];
    for (i, v) in idx.iter().zip(&val) {
        if *v > f32::NEG_INFINITY {
            keep[*i as usize] = true;
        }
    }
    (0..n).map(|t| if keep[t / block] { 1.0 } else { 0.0 }).collect()
}

/// Scores outside the mask become -inf.
pub fn mask_row(scores: &[f32], mask: &[f32]) -> Vec<f32> {
    scores.iter().zip(mask).map(|(&s, &m)| if m != 0.0 { s } else { f32::NEG_INFINITY }).collect()
}

/// The top `min(k, visible)` of one query's first `visible` scores by (score desc, index asc), -inf picks kept (ties by lower index, as the official model attends to them), re-sorted ascending, padded with -1 to `k`.
pub fn select_row(scores: &[f32], visible: usize, k: usize) -> Vec<f32> {
    let vis = visible.min(scores.len());
    let mut kept = if vis == 0 { Vec::new() } else { topk(&scores[..vis], vis, k.min(vis)).0 };
    kept.sort_unstable();
    let mut out: Vec<f32> = kept.iter().map(|&i| i as f32).collect();
    out.resize(k, -1.0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_mask_pins_the_newest_block_and_keeps_the_best_others() {
        let s = [5.0, 1.0, 9.0, 0.0, 2.0, 3.0, 0.5, f32::NEG_INFINITY];
        let m = candidate_mask_row(&s, 7, 2, 2);
        assert_eq!(m, vec![0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0]);
        assert_eq!(candidate_mask_row(&[f32::NEG_INFINITY; 4], 0, 2, 2), vec![0.0; 4]);
    }

    #[test]
    fn select_keeps_visible_minus_infinity_by_lower_index_and_sorts_ascending() {
        let ninf = f32::NEG_INFINITY;
        let s = [1.0, ninf, 3.0, ninf, 3.0, ninf, ninf];
        assert_eq!(select_row(&s, 5, 4), vec![0.0, 1.0, 2.0, 4.0]);
        assert_eq!(select_row(&s, 5, 2), vec![2.0, 4.0]);
        assert_eq!(select_row(&s, 3, 4), vec![0.0, 1.0, 2.0, -1.0]);
        assert_eq!(select_row(&s, 0, 2), vec![-1.0, -1.0]);
        assert_eq!(select_row(&[ninf; 6], 6, 3), vec![0.0, 1.0, 2.0]);
    }
}
