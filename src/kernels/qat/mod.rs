//! Activation QAT oracles (spec 2.9): fp8 window KV, fp4 compressed KV rows, fp4 indexer q/k; elementwise per block, no reduction order.
pub mod contract;

use crate::kernels::dispatch::{bad_shape, grid64, key};
use crate::kernels::ops::act_quant;
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::math::div;
use crate::numerics::{e2m1_from_f32, e2m1_to_f32, e4m3_from_f32, e4m3_to_f32, pow2};

/// Which quantize-dequantize round trip to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qat {
    /// e4m3 per 32 with a power-of-two scale `2^ceil(log2(max(amax, 1e-4) / 448))` (window KV).
    Fp8,
    /// e2m1 per 16 with an e4m3 scale `e4m3(max(amax, 6 * 2^-9) / 6)` (compressed KV rows).
    Fp4Rows,
    /// e2m1 per 32 with a power-of-two scale `2^ceil(log2(max(amax, 6 * 2^-126) / 6))` (indexer q and k).
    Fp4Index,
}

impl Qat {
    /// Elements per scale block.
    pub fn block(self) -> usize {
        match self {
            Qat::Fp8 | Qat::Fp4Index => 32,
            Qat::Fp4Rows => 16,
        }
    }
}

pub(crate) const QAT: [Shader; 3] = [
    Shader { lang: crate::gpu::Lang::Wgsl, kernel: "qat_fp8", variant: "ref", source: include_str!("../../../wgsl/qat/qat.wgsl") },
    Shader { lang: crate::gpu::Lang::Wgsl, kernel: "qat_fp4_rows", variant: "ref", source: include_str!("../../../wgsl/qat/qat.wgsl") },
    Shader { lang: crate::gpu::Lang::Wgsl, kernel: "qat_fp4_index", variant: "ref", source: include_str!("../../../wgsl/qat/qat.wgsl") },
];

/// Records the `kind` round trip of x [rows, n] into y [rows, n] (n a multiple of the block; bf16-exact values).
pub fn record_qat(rec: &mut Recorder, kind: Qat, x: &Buf, y: &Buf, rows: usize, n: usize, control: u32) -> Result<(), GpuError> {
    if !n.is_multiple_of(kind.block()) {
        return Err(bad_shape("qat", format!("{n} columns are not a multiple of the {kind:?} block")));
    }
    let g = grid64(rows * n / kind.block());
    let k = key(QAT[kind as usize], control, &[("KIND", kind as u32 as f64)]);
    rec.dispatch(&k, &[rows as u32, n as u32, g[0]], &[Arg::Whole(x), Arg::Whole(y)], g)
}

/// Applies `kind` to every block of `x` (its length a multiple of the block); every output is exact in bf16.
pub fn qat(kind: Qat, x: &[f32]) -> Vec<f32> {
    match kind {
        Qat::Fp8 => fp8(x),
        Qat::Fp4Rows => fp4_rows(x),
        Qat::Fp4Index => fp4_index(x),
    }
}

/// Largest magnitude of a block (order-free).
fn amax(blk: &[f32]) -> f32 {
    blk.iter().fold(0.0f32, |a, v| a.max(v.abs()))
}

/// e4m3 values times their act_quant scale.
fn fp8(x: &[f32]) -> Vec<f32> {
    let (q, s) = act_quant(x, 32);
    q.iter().enumerate().map(|(i, v)| v * s[i / 32]).collect()
}

/// e2m1 round trip of `v * inv` (clamped to +-6) times `s`.
fn e2m1_round(v: f32, s: f32) -> f32 {
    e2m1_to_f32(e2m1_from_f32(v.clamp(-6.0, 6.0))) * s
}

/// Blocks of 16 with a rounded e4m3 scale; the divisions follow the reference's `amax / 6` and `x / s`.
fn fp4_rows(x: &[f32]) -> Vec<f32> {
    let floor = 6.0 * pow2(-9);
    let mut out = Vec::with_capacity(x.len());
    for blk in x.chunks(16) {
        let s = e4m3_to_f32(e4m3_from_f32(div(amax(blk).max(floor), 6.0)));
        out.extend(blk.iter().map(|&v| e2m1_round(div(v, s), s)));
    }
    out
}

/// Exponent of `2^ceil(log2(a / 6))` for a normal `a`, exact: a = 2^E m gives E - 2 + (m > 1.5).
pub fn fp4_scale_exp(a: f32) -> i32 {
    let b = a.to_bits();
    ((b >> 23) & 0xff) as i32 - 127 - 2 + i32::from((b & 0x7f_ffff) > 0x40_0000)
}

/// Blocks of 32 with a power-of-two scale; the scaling products are exact.
fn fp4_index(x: &[f32]) -> Vec<f32> {
    let floor = 6.0 * pow2(-126);
    let mut out = Vec::with_capacity(x.len());
    for blk in x.chunks(32) {
        let e = fp4_scale_exp(amax(blk).max(floor)).clamp(-126, 126);
        let (s, inv) = (pow2(e), pow2(-e));
        out.extend(blk.iter().map(|&v| e2m1_round(v * inv, s)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp4_scale_exponent_equals_ceil_log2_of_the_f64_quotient() {
        let mut x = 1.0e-30f32;
        while x < 1.0e30 {
            for a in [x, f32::from_bits(x.to_bits() + 1), 1.5 * x, f32::from_bits((1.5 * x).to_bits() + 1)] {
                let want = (f64::from(a) / 6.0).log2().ceil() as i32;
                assert_eq!(fp4_scale_exp(a), want, "a = {a:e}");
            }
            x *= 3.7;
        }
    }

    #[test]
    fn qat_outputs_are_bf16_exact_and_close_to_the_input() {
        let x: Vec<f32> = (0..64).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.173).collect();
        for kind in [Qat::Fp8, Qat::Fp4Rows, Qat::Fp4Index] {
            let y = qat(kind, &x);
            assert!(y.iter().all(|&v| crate::numerics::round_bf16(v) == v), "{kind:?}");
            let tol = if kind == Qat::Fp8 { 0.07 } else { 0.5 };
            assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() <= tol * 2.0), "{kind:?}: {y:?}");
            assert_ne!(y, x, "{kind:?}");
        }
    }
}
