//! Compressor pooling oracle (spec 2.5, ratio > 1): per channel, a softmax over the group's gate values weights the group's k values.
use crate::numerics::math::{exp, mul_rn, recip};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// One complete group: `k[t]`, `g[t]` for the `ratio` members in position order, each [hd] f32. Canonical order, per channel c: M = max_t g_t[c]; e_t = exp(g_t[c] - M); p_t = e_t * recip(sum_t e_t), t ascending from +0.0; latent[c] = bf16(sum_t mul_rn(p_t, k_t[c])), t ascending from +0.0.
pub fn pool_group(k: &[&[f32]], g: &[&[f32]]) -> Vec<f32> {
    let r = k.len();
    let hd = k.first().map_or(0, |v| v.len());
    (0..hd)
        .map(|c| {
            let mx = g.iter().fold(f32::NEG_INFINITY, |a, gt| a.max(gt[c]));
            let e: Vec<f32> = g.iter().map(|gt| exp(gt[c] - mx)).collect();
            let inv = recip(canonical_sum(r, |t| e[t], |_| 1.0));
            round_bf16(canonical_sum(r, |t| mul_rn(e[t] * inv, k[t][c]), |_| 1.0))
        })
        .collect()
}
