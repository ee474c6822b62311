//! Engram gate oracle (spec 2.3, reference `Engram.forward`): per stream a normalized, signed-sqrt, sigmoid gate of h against its key, then h + gate * value.
use crate::numerics::math::{mul_rn, rsqrt, sigmoid, sqrt};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// Engram gate constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngramGate {
    /// Streams (`hc_mult`).
    pub hc: usize,
    /// Hidden size D.
    pub d: usize,
    /// `rms_norm_eps`.
    pub eps: f32,
}

/// One row: `h` [hc*d] (bf16 values), `kv` [(hc+1)*d] (keys stream-major, then the shared value), `w` = q_weight * k_weight [hc*d]. Canonical order, per stream c: ms_h = canonical_sum(h^2) * (1/d), ms_k likewise; rho = rsqrt(ms_h + eps) * rsqrt(ms_k + eps); dot = canonical_sum(mul_rn(h * w, key)) (h * w exact) * rho * d^-1/2; g = sigmoid(+-sqrt(max(|dot|, 1e-6))), 0 when not `live`; out = bf16(h + mul_rn(g, value)).
pub fn gate_row(h: &[f32], kv: &[f32], w: &[f32], p: &EngramGate, live: bool) -> Vec<f32> {
    let d = p.d;
    let inv_d = (1.0 / d as f64) as f32;
    let inv_sqrt_d = (1.0 / (d as f64).sqrt()) as f32;
    let value = &kv[p.hc * d..(p.hc + 1) * d];
    let mut out = Vec::with_capacity(p.hc * d);
    for c in 0..p.hc {
        let hc = &h[c * d..(c + 1) * d];
        let key = &kv[c * d..(c + 1) * d];
        let wc = &w[c * d..(c + 1) * d];
        let ms_h = canonical_sum(d, |i| hc[i] * hc[i], |_| 1.0) * inv_d;
        let ms_k = canonical_sum(d, |i| key[i] * key[i], |_| 1.0) * inv_d;
        let rho = rsqrt(ms_h + p.eps) * rsqrt(ms_k + p.eps);
        let dot = canonical_sum(d, |i| mul_rn(hc[i] * wc[i], key[i]), |_| 1.0) * rho * inv_sqrt_d;
        let root = sqrt(dot.abs().max(1e-6));
        let g = if live { sigmoid(if dot < 0.0 { -root } else { root }) } else { 0.0 };
        out.extend((0..d).map(|i| round_bf16(hc[i] + mul_rn(g, value[i]))));
    }
    out
}
