//! mHC in f64 (spec 2.4): the mixes with Sinkhorn, collapse and expand; plus RMSNorm, RoPE and the scalar functions the blocks share.
use super::quant::bf16;

/// `1 / (1 + e^-x)`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `x * sigmoid(x)`.
pub fn silu(x: f64) -> f64 {
    x * sigmoid(x)
}

/// `ln(1 + e^x)`, stable for large |x|.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `1 / sqrt(mean(x^2) + eps)`.
pub fn rms_factor(x: &[f64], eps: f64) -> f64 {
    1.0 / (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + eps).sqrt()
}

/// RMSNorm before its bf16 output rounding: `w * x / sqrt(mean(x^2) + eps)`.
pub fn rms_norm_raw(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let r = rms_factor(x, eps);
    x.iter().zip(w).map(|(v, g)| g * (v * r)).collect()
}

/// RMSNorm with the official bf16 output.
pub fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    rms_norm_raw(x, w, eps).into_iter().map(bf16).collect()
}

/// One site's mHC parameters: `hc_{site}_fn` `[(2+HC)*HC, HC*D]`, `hc_{site}_base`, `hc_{site}_scale` `[3]`.
#[derive(Debug, Clone)]
pub struct HcSite {
    /// Projection of the flattened streams, row-major.
    pub r#fn: Vec<f64>,
    /// Bias per mix.
    pub base: Vec<f64>,
    /// Scales of the pre, post and comb groups.
    pub scale: [f64; 3],
}

/// The three coefficient sets one site derives from the streams of one token.
#[derive(Debug, Clone, PartialEq)]
pub struct Mixes {
    /// Collapse weights for the next site: `sigmoid(.) + hc_eps`.
    pub pre: Vec<f64>,
    /// Expand weights of this site's output: `2 sigmoid(.)`.
    pub post: Vec<f64>,
    /// Doubly stochastic residual mix `comb[i][j]`, row-major `[HC, HC]`.
    pub comb: Vec<f64>,
}

/// The 24 raw mixes `mu = (fn . flat) * rsqrt(mean(flat^2) + eps)` of one token's flattened streams.
pub fn raw_mixes(site: &HcSite, flat: &[f64], norm_eps: f64) -> Vec<f64> {
    let r = rms_factor(flat, norm_eps);
    site.r#fn.chunks_exact(flat.len()).map(|row| row.iter().zip(flat).map(|(a, b)| a * b).sum::<f64>() * r).collect()
}

/// Splits raw mixes into pre, post and the Sinkhorn-normalized comb (softmax rows + eps, one column pass, then `iters - 1` row/column passes).
pub fn split_sinkhorn(mu: &[f64], site: &HcSite, hc: usize, iters: usize, hc_eps: f64) -> Mixes {
    let pre = (0..hc).map(|i| sigmoid(mu[i] * site.scale[0] + site.base[i]) + hc_eps).collect();
    let post = (0..hc).map(|i| 2.0 * sigmoid(mu[hc + i] * site.scale[1] + site.base[hc + i])).collect();
    let mut comb: Vec<f64> = (0..hc * hc).map(|k| mu[2 * hc + k] * site.scale[2] + site.base[2 * hc + k]).collect();
    for row in comb.chunks_exact_mut(hc) {
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        row.iter_mut().for_each(|v| *v = (*v - m).exp());
        let s: f64 = row.iter().sum();
        row.iter_mut().for_each(|v| *v = *v / s + hc_eps);
    }
    normalize_columns(&mut comb, hc, hc_eps);
    for _ in 1..iters {
        for row in comb.chunks_exact_mut(hc) {
            let s: f64 = row.iter().sum();
            row.iter_mut().for_each(|v| *v /= s + hc_eps);
        }
        normalize_columns(&mut comb, hc, hc_eps);
    }
    Mixes { pre, post, comb }
}

/// Divides each column of `[hc, hc]` by its sum plus eps.
fn normalize_columns(comb: &mut [f64], hc: usize, eps: f64) {
    for j in 0..hc {
        let s: f64 = (0..hc).map(|i| comb[i * hc + j]).sum();
        (0..hc).for_each(|i| comb[i * hc + j] /= s + eps);
    }
}

/// The mixes of one token's streams `[HC * D]` at one site.
pub fn mixes(site: &HcSite, flat: &[f64], hc: usize, iters: usize, hc_eps: f64, norm_eps: f64) -> Mixes {
    split_sinkhorn(&raw_mixes(site, flat, norm_eps), site, hc, iters, hc_eps)
}

/// Collapse before its bf16 rounding: `sum_i m_i h_i` over the streams of one token.
pub fn collapse_raw(flat: &[f64], m: &[f64]) -> Vec<f64> {
    let d = flat.len() / m.len();
    (0..d).map(|k| m.iter().enumerate().map(|(i, mi)| mi * flat[i * d + k]).sum()).collect()
}

/// Collapse with the official bf16 output.
pub fn collapse(flat: &[f64], m: &[f64]) -> Vec<f64> {
    collapse_raw(flat, m).into_iter().map(bf16).collect()
}

/// Expand before its bf16 rounding: `h'_j = post_j out + sum_i comb[i][j] h_i`.
pub fn expand_raw(out: &[f64], flat: &[f64], mix: &Mixes) -> Vec<f64> {
    let (hc, d) = (mix.post.len(), out.len());
    let mut y = vec![0.0; hc * d];
    for j in 0..hc {
        for k in 0..d {
            let resid: f64 = (0..hc).map(|i| mix.comb[i * hc + j] * flat[i * d + k]).sum();
            y[j * d + k] = mix.post[j] * out[k] + resid;
        }
    }
    y
}

/// Expand with the official bf16 output.
pub fn expand(out: &[f64], flat: &[f64], mix: &Mixes) -> Vec<f64> {
    expand_raw(out, flat, mix).into_iter().map(bf16).collect()
}

/// Rotates the last `2 * inv_freq.len()` values of `v` as interleaved pairs by `pos * inv_freq` (conjugate when `inverse`).
pub fn rope(v: &mut [f64], pos: usize, inv_freq: &[f64], inverse: bool) {
    let start = v.len() - 2 * inv_freq.len();
    for (i, f) in inv_freq.iter().enumerate() {
        let angle = pos as f64 * f;
        let (s, c) = angle.sin_cos();
        let s = if inverse { -s } else { s };
        let (a, b) = (v[start + 2 * i], v[start + 2 * i + 1]);
        v[start + 2 * i] = a * c - b * s;
        v[start + 2 * i + 1] = a * s + b * c;
    }
}
