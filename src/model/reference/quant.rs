//! Exact quantization operators on f64 values: bf16, e4m3 and e2m1 rounding, GEMM-input act_quant and the KV and indexer QAT (spec 2.9).

/// Largest finite e4m3fn magnitude.
pub const E4M3_MAX: f64 = 448.0;
/// Largest e2m1 magnitude.
pub const E2M1_MAX: f64 = 6.0;
/// Block of the GEMM-input act_quant, the window-KV QAT and the indexer QAT.
pub const BLOCK32: usize = 32;
/// Block of the compressed-row QAT.
pub const BLOCK16: usize = 16;

/// 2^e as f64 (exact for e in -1022..=1023).
pub fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// floor(log2 |x|) of a finite non-zero normal f64, from its bits.
fn exponent(x: f64) -> i32 {
    ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// ceil(log2 t) of a positive normal f64, from its bits: exponent + (mantissa != 0).
pub fn ceil_log2(t: f64) -> i32 {
    exponent(t) + i32::from(t.to_bits() & ((1u64 << 52) - 1) != 0)
}

/// Rounds `x` to the nearest value with `mant` fraction bits and minimum normal exponent `emin` (subnormals below), ties to even; no saturation.
pub fn round_to_format(x: f64, mant: i32, emin: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let quantum = pow2(exponent(x).max(emin) - mant);
    (x / quantum).round_ties_even() * quantum
}

/// Nearest bf16 value, ties to even.
pub fn bf16(x: f64) -> f64 {
    round_to_format(x, 7, -126)
}

/// Rounds every element to bf16 in place.
pub fn bf16_all(xs: &mut [f64]) {
    xs.iter_mut().for_each(|x| *x = bf16(*x));
}

/// Nearest e4m3fn value of `x` clamped to +-448, ties to even.
pub fn e4m3(x: f64) -> f64 {
    round_to_format(x.clamp(-E4M3_MAX, E4M3_MAX), 3, -6)
}

/// Nearest e2m1 value of `x` clamped to +-6, ties to even (0.25 to 0, 0.75 to 1, 2.5 to 2, 5 to 4).
pub fn e2m1(x: f64) -> f64 {
    round_to_format(x.clamp(-E2M1_MAX, E2M1_MAX), 1, 0)
}

/// Largest magnitude of a block.
fn amax(block: &[f64]) -> f64 {
    block.iter().fold(0.0f64, |a, &x| a.max(x.abs()))
}

/// Scale exponent of one act_quant block: `ceil(log2(max(amax, 1e-4) / 448))`.
pub fn act_scale_exp(block: &[f64]) -> i32 {
    ceil_log2(amax(block).max(1e-4) / E4M3_MAX)
}

/// fp8 act_quant with dequantization: e4m3 per 32 with scale `2^ceil(log2(max(amax,1e-4)/448))` (GEMM inputs of fp8/fp4 weights, window-KV QAT).
pub fn act_quant(x: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for block in x.chunks(BLOCK32) {
        let s = pow2(act_scale_exp(block));
        out.extend(block.iter().map(|&v| e4m3(v / s) * s));
    }
    out
}

/// The e4m3 scale of one compressed-row block: `e4m3(max(amax, 6*2^-9) / 6)`.
pub fn fp4_row_scale(block: &[f64]) -> f64 {
    e4m3(amax(block).max(6.0 * pow2(-9)) / E2M1_MAX)
}

/// fp4 QAT of a compressed KV row: e2m1 per 16 with an e4m3 scale.
pub fn fp4_row_qat(x: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for block in x.chunks(BLOCK16) {
        let s = fp4_row_scale(block);
        out.extend(block.iter().map(|&v| e2m1(v / s) * s));
    }
    out
}

/// The power-of-two scale exponent of one indexer block: `ceil(log2(max(amax, 6*2^-126) / 6))`.
pub fn fp4_index_scale_exp(block: &[f64]) -> i32 {
    ceil_log2(amax(block).max(6.0 * pow2(-126)) / E2M1_MAX)
}

/// fp4 QAT of indexer q and keys: e2m1 per 32 with a power-of-two scale.
pub fn fp4_index_qat(x: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for block in x.chunks(BLOCK32) {
        let s = pow2(fp4_index_scale_exp(block));
        out.extend(block.iter().map(|&v| e2m1(v / s) * s));
    }
    out
}

/// Whether `x` is a value of the format with `mant` fraction bits and minimum exponent `emin`.
pub fn on_grid(x: f64, mant: i32, emin: i32) -> bool {
    round_to_format(x, mant, emin) == x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::{bf16_to_f32, e2m1_to_f32, e4m3_to_f32};

    #[test]
    fn bf16_rounding_matches_the_bit_exact_f32_conversion_on_every_bf16_midpoint() {
        for h in 0u16..0x7f80 {
            let lo = f64::from(bf16_to_f32(h));
            let hi = f64::from(bf16_to_f32(h + 1));
            let mid = (lo + hi) / 2.0;
            let even = if h % 2 == 0 { lo } else { hi };
            assert_eq!(bf16(mid), even, "midpoint above {h:#x}");
            assert_eq!(bf16(lo), lo);
        }
    }

    #[test]
    fn e4m3_and_e2m1_round_onto_their_decoded_grids() {
        for c in 0u8..0x7f {
            let v = f64::from(e4m3_to_f32(c));
            assert_eq!(e4m3(v), v, "e4m3 code {c:#x}");
        }
        for c in 0u8..8 {
            let v = f64::from(e2m1_to_f32(c));
            assert_eq!(e2m1(v), v);
        }
        let ties = [(0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0), (7.0, 6.0)];
        for (x, want) in ties {
            assert_eq!(e2m1(x), want, "e2m1({x})");
            assert_eq!(e2m1(-x), -want);
        }
        assert_eq!(e4m3(500.0), 448.0);
        assert_eq!(e4m3(pow2(-10)), 0.0);
    }
}
