//! Engram gate oracle (spec 2.3, reference `Engram.forward`): per stream a normalized, signed-sqrt, sigmoid gate of h against its key, then h + gate * value.
pub mod contract;

use crate::kernels::dispatch::{bad_shape, key};
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::edge::add;
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

pub(crate) const ENGRAM_GATE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "engram_gate", variant: "ref", source: include_str!("../../../wgsl/engram/engram_gate.wgsl") };

/// Records the gate: h [rows, hc*d], kv [rows, (hc+1)*d] (keys stream-major, then the value), q_weight and k_weight [hc*d], live [rows] u32 (0 = pass through) into y [rows, hc*d] (bf16 values).
#[allow(clippy::too_many_arguments)]
pub fn record_engram_gate(rec: &mut Recorder, h: &Buf, kv: &Buf, q_weight: &Buf, k_weight: &Buf, live: &Buf, y: &Buf, rows: usize, p: &EngramGate, control: u32) -> Result<(), GpuError> {
    if rows > 65535 || p.hc == 0 || p.d == 0 {
        return Err(bad_shape("engram_gate", format!("{rows} rows (at most 65535) of {} streams of {}", p.hc, p.d)));
    }
    let inv_d = (1.0 / p.d as f64) as f32;
    let inv_sqrt_d = (1.0 / (p.d as f64).sqrt()) as f32;
    let params = [rows as u32, p.hc as u32, p.d as u32, inv_d.to_bits(), inv_sqrt_d.to_bits(), p.eps.to_bits()];
    let args = [Arg::Whole(h), Arg::Whole(kv), Arg::Whole(q_weight), Arg::Whole(k_weight), Arg::Whole(live), Arg::Whole(y)];
    rec.dispatch(&key(ENGRAM_GATE, control, &[]), &params, &args, [p.hc as u32, rows as u32, 1])
}

/// The gate's per-channel weight `mul_rn(q_weight, k_weight)` [hc*d].
pub fn gate_weight(q: &[f32], k: &[f32]) -> Vec<f32> {
    q.iter().zip(k).map(|(&a, &b)| mul_rn(a, b)).collect()
}

/// One row: `h` [hc*d] (bf16 values), `kv` [(hc+1)*d] (keys stream-major, then the shared value), `w` = gate_weight(q_weight, k_weight) [hc*d]. Canonical order, per stream c: ms_h = canonical_sum(h^2) * (1/d), ms_k likewise; rho = rsqrt(ms_h + eps) * rsqrt(ms_k + eps); dot = canonical_sum(mul_rn(mul_rn(h, w), key)) * rho * d^-1/2; g = sigmoid(+-sqrt(max(|dot|, 1e-6))), 0 when not `live`; out = bf16(add(h, mul_rn(g, value))).
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
        let ms_h = mul_rn(canonical_sum(d, |i| mul_rn(hc[i], hc[i]), |_| 1.0), inv_d);
        let ms_k = mul_rn(canonical_sum(d, |i| mul_rn(key[i], key[i]), |_| 1.0), inv_d);
        let rho = mul_rn(rsqrt(ms_h + p.eps), rsqrt(ms_k + p.eps));
        let dot = mul_rn(mul_rn(canonical_sum(d, |i| mul_rn(mul_rn(hc[i], wc[i]), key[i]), |_| 1.0), rho), inv_sqrt_d);
        let root = sqrt(dot.abs().max(1e-6));
        let g = if live { sigmoid(if dot < 0.0 { -root } else { root }) } else { 0.0 };
        out.extend((0..d).map(|i| round_bf16(add(hc[i], mul_rn(g, value[i])))));
    }
    out
}
