//! mHC oracles (spec 2.4): the mix product with its rsqrt, the pre/post/comb split with Sinkhorn, collapse and expand, all in f32.
use crate::numerics::edge::{add, pos_zero, sub};
use crate::numerics::math::{div, exp, mul_rn, recip, rsqrt, sigmoid};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

pub(crate) mod dispatch;
pub mod contract;
mod mixes_contract;
pub(crate) mod stream_contract;
pub use dispatch::{hc_mixes_scratch_words, record_hc_collapse, record_hc_expand, record_hc_mixes, MAX_HC};

/// mHC constants of a site.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HcParams {
    /// Streams (`hc_mult`).
    pub hc: usize,
    /// Sinkhorn iterations (`hc_sinkhorn_iters`).
    pub iters: usize,
    /// RMS epsilon of the mix normalization (`rms_norm_eps`).
    pub norm_eps: f32,
    /// `hc_eps`.
    pub hc_eps: f32,
}

impl HcParams {
    /// Mix width `(2 + hc) * hc`: pre, post, comb.
    pub fn mix_dim(&self) -> usize {
        (2 + self.hc) * self.hc
    }
}

/// The raw mixes of one row: `mu_m = mul_rn(canonical_sum_t(mul_rn(x_t, fn[m][t])), rsqrt(mul_rn(canonical_sum_t(mul_rn(x_t, x_t)), 1/n) + eps))`.
pub fn mix_product(x: &[f32], hc_fn: &[f32], p: &HcParams) -> Vec<f32> {
    let n = x.len();
    let inv_n = (1.0 / n as f64) as f32;
    let r = rsqrt(mul_rn(canonical_sum(n, |t| mul_rn(x[t], x[t]), |_| 1.0), inv_n) + p.norm_eps);
    (0..p.mix_dim())
        .map(|m| {
            let w = &hc_fn[m * n..(m + 1) * n];
            mul_rn(canonical_sum(n, |t| mul_rn(x[t], w[t]), |_| 1.0), r)
        })
        .collect()
}

/// Sum of `n` terms in ascending order from +0.0 (the canonical order for n <= 32).
fn small_sum(n: usize, term: impl Fn(usize) -> f32) -> f32 {
    canonical_sum(n, term, |_| 1.0)
}

/// Splits raw mixes into `[pre (hc), post (hc), comb (hc x hc, row-major [i][j])]`. Canonical order (sums and differences flushed): pre = sigmoid(mul_rn(mu, scale0) + base) + eps; post = 2 sigmoid(..); comb = row softmax (exp(c - max) * recip(ascending row sum), a zero max +0) + eps, then a column pass, then iters-1 (row, column) passes, each entry divided by (its ascending row or column sum + eps).
pub fn split_sinkhorn(mu: &[f32], scale: &[f32], base: &[f32], p: &HcParams) -> Vec<f32> {
    let hc = p.hc;
    let mut out = Vec::with_capacity(p.mix_dim());
    out.extend((0..hc).map(|i| sigmoid(add(mul_rn(mu[i], scale[0]), base[i])) + p.hc_eps));
    out.extend((hc..2 * hc).map(|i| 2.0 * sigmoid(add(mul_rn(mu[i], scale[1]), base[i]))));
    let mut c: Vec<f32> = (2 * hc..p.mix_dim()).map(|i| add(mul_rn(mu[i], scale[2]), base[i])).collect();
    for i in 0..hc {
        let row = &mut c[i * hc..(i + 1) * hc];
        let mx = pos_zero(row.iter().fold(f32::NEG_INFINITY, |a, &v| a.max(v)));
        let e: Vec<f32> = row.iter().map(|&v| exp(sub(v, mx))).collect();
        let r = recip(small_sum(hc, |j| e[j]));
        for j in 0..hc {
            row[j] = mul_rn(e[j], r) + p.hc_eps;
        }
    }
    let cols = |c: &mut Vec<f32>| {
        for j in 0..hc {
            let s = small_sum(hc, |i| c[i * hc + j]) + p.hc_eps;
            (0..hc).for_each(|i| c[i * hc + j] = div(c[i * hc + j], s));
        }
    };
    let rows = |c: &mut Vec<f32>| {
        for i in 0..hc {
            let s = small_sum(hc, |j| c[i * hc + j]) + p.hc_eps;
            (0..hc).for_each(|j| c[i * hc + j] = div(c[i * hc + j], s));
        }
    };
    cols(&mut c);
    for _ in 1..p.iters {
        rows(&mut c);
        cols(&mut c);
    }
    out.extend(c);
    out
}

/// The full mix of one row: `split_sinkhorn(mix_product(..))`.
pub fn mixes(x: &[f32], hc_fn: &[f32], scale: &[f32], base: &[f32], p: &HcParams) -> Vec<f32> {
    split_sinkhorn(&mix_product(x, hc_fn, p), scale, base, p)
}

/// Collapse of one row of `hc` streams of `d`: `y[k] = bf16(sum_i mul_rn(pre_i, h_i[k]))` (sums flushed), i ascending from +0.0.
pub fn collapse(h: &[f32], pre: &[f32], hc: usize, d: usize) -> Vec<f32> {
    (0..d).map(|k| round_bf16(small_sum(hc, |i| mul_rn(pre[i], h[i * d + k])))).collect()
}

/// Expand of one row: `h'_j[k] = bf16(add(mul_rn(post_j, out[k]), sum_i mul_rn(comb[i][j], h_i[k])))`, i ascending from +0.0.
pub fn expand(out: &[f32], h: &[f32], post: &[f32], comb: &[f32], hc: usize, d: usize) -> Vec<f32> {
    let mut y = Vec::with_capacity(hc * d);
    for j in 0..hc {
        y.extend((0..d).map(|k| round_bf16(add(mul_rn(post[j], out[k]), small_sum(hc, |i| mul_rn(comb[i * hc + j], h[i * d + k]))))));
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinkhorn_comb_is_nearly_doubly_stochastic_and_pre_post_are_in_range() {
        let p = HcParams { hc: 4, iters: 20, norm_eps: 1e-20, hc_eps: 1e-6 };
        let mu: Vec<f32> = (0..24).map(|i| ((i * 13 % 7) as f32 - 3.0) * 0.4).collect();
        let scale = [0.5, 0.7, 0.9];
        let base: Vec<f32> = (0..24).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
        let m = split_sinkhorn(&mu, &scale, &base, &p);
        assert!(m[..4].iter().all(|&v| v > 0.0 && v < 1.0 + 1e-5));
        assert!(m[4..8].iter().all(|&v| v > 0.0 && v < 2.0));
        let c = &m[8..];
        for k in 0..4 {
            let row: f32 = (0..4).map(|j| c[k * 4 + j]).sum();
            let col: f32 = (0..4).map(|i| c[i * 4 + k]).sum();
            assert!((row - 1.0).abs() < 1e-3 && (col - 1.0).abs() < 1e-4, "row {row} col {col}");
        }
    }
}
