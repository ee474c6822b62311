//! Sparse attention with sink, oracle (spec 2.5): one query row over its window rows then its selected compressed rows.
use crate::numerics::math::{div, exp, mul_rn};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// One query row `q` [heads*dim] over `keys` (each [dim], K = V): the window rows by ascending position, then the selected compressed rows by ascending index. Canonical order, per head h: s_k = mul_rn(canonical_sum(q_h * kv_k), scale) (exact products); M = max(max_k s_k, -1e30); p_k = exp(s_k - M); denom = canonical_sum_k(p_k) + exp(sink_h - M); o_h[i] = bf16(div(canonical_sum_k(mul_rn(p_k, kv_k[i])), denom)), every sum over keys in key order.
pub fn attend_row(q: &[f32], keys: &[&[f32]], sink: &[f32], dim: usize, scale: f32) -> Vec<f32> {
    let heads = sink.len();
    let n = keys.len();
    let mut out = Vec::with_capacity(heads * dim);
    for (h, &sink_h) in sink.iter().enumerate() {
        let qh = &q[h * dim..(h + 1) * dim];
        let s: Vec<f32> = keys.iter().map(|k| mul_rn(canonical_sum(dim, |i| qh[i] * k[i], |_| 1.0), scale)).collect();
        let m = s.iter().fold(-1e30f32, |a, &v| a.max(v));
        let p: Vec<f32> = s.iter().map(|&v| exp(v - m)).collect();
        let denom = canonical_sum(n, |k| p[k], |_| 1.0) + exp(sink_h - m);
        out.extend((0..dim).map(|i| round_bf16(div(canonical_sum(n, |k| mul_rn(p[k], keys[k][i]), |_| 1.0), denom))));
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
