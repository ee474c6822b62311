//! Weight quantization to the release storage formats (spec 2.9) and back: fp8 32x32 blocks, fp4 rows, engram fp8 rows.
use crate::numerics::{ceil_log2_bits, e2m1_from_f32, e2m1_to_f32, e4m3_from_f32, e4m3_to_f32, e8m0_from_exp, e8m0_to_f32, pow2, E4M3_MAX};

/// The weight block side.
pub const BLOCK: usize = 32;

/// Largest e2m1 magnitude.
const E2M1_MAX: f32 = 6.0;

/// Scale exponent `ceil(log2(amax / max))` of a block; an all-zero block gets the smallest scale.
fn block_exp(amax: f32, max: f32) -> i32 {
    let t = amax / max;
    if t.is_nan() || t < f32::MIN_POSITIVE {
        return -126;
    }
    ceil_log2_bits(t).clamp(-126, 127)
}

/// Quantizes `[rows, cols]` f32 to e4m3 with one e8m0 scale per `br x bc` block (`[ceil(rows/br), ceil(cols/bc)]`).
fn quantize_fp8(values: &[f32], rows: usize, cols: usize, br: usize, bc: usize) -> (Vec<u8>, Vec<u8>) {
    let (nbr, nbc) = (rows.div_ceil(br), cols.div_ceil(bc));
    let mut codes = vec![0u8; rows * cols];
    let mut scales = vec![0u8; nbr * nbc];
    for bi in 0..nbr {
        for bj in 0..nbc {
            let (r0, r1, c0, c1) = (bi * br, ((bi + 1) * br).min(rows), bj * bc, ((bj + 1) * bc).min(cols));
            let amax = (r0..r1).flat_map(|r| values[r * cols + c0..r * cols + c1].iter()).fold(0.0f32, |a, &x| a.max(x.abs()));
            let e = block_exp(amax, E4M3_MAX);
            scales[bi * nbc + bj] = e8m0_from_exp(e);
            let inv = pow2(-e);
            for r in r0..r1 {
                for c in c0..c1 {
                    codes[r * cols + c] = e4m3_from_f32((values[r * cols + c] * inv).clamp(-E4M3_MAX, E4M3_MAX));
                }
            }
        }
    }
    (codes, scales)
}

/// fp8 dense weight `[out, in]`: e4m3 codes and e8m0 scales `[ceil(out/32), ceil(in/32)]`, scale `2^ceil(log2(amax/448))`.
pub fn quantize_fp8_blocks(values: &[f32], out: usize, inp: usize) -> (Vec<u8>, Vec<u8>) {
    quantize_fp8(values, out, inp, BLOCK, BLOCK)
}

/// Engram table `[rows, width]`: e4m3 codes and e8m0 scales `[rows, ceil(width/32)]` (1x32 blocks).
pub fn quantize_fp8_rows(values: &[f32], rows: usize, width: usize) -> (Vec<u8>, Vec<u8>) {
    quantize_fp8(values, rows, width, 1, BLOCK)
}

/// e2m1 code of `y`: for |y| <= 6 by comparison with the grid midpoints (ties to the even code), else by the general rounding.
#[inline]
fn e2m1_code(y: f32) -> u8 {
    let a = y.abs();
    if a.is_nan() || a > E2M1_MAX {
        return e2m1_from_f32(y);
    }
    let c = u8::from(a > 0.25) + u8::from(a >= 0.75) + u8::from(a > 1.25) + u8::from(a >= 1.75) + u8::from(a > 2.5) + u8::from(a >= 3.5) + u8::from(a > 5.0);
    c | ((y.to_bits() >> 28) & 8) as u8
}

/// fp4 expert weight `[out, in]`: bytes `[out, in/2]` (low nibble = even column) and e8m0 scales `[out, in/32]`, scale `2^ceil(log2(amax/6))`.
pub fn quantize_fp4(values: &[f32], out: usize, inp: usize) -> (Vec<u8>, Vec<u8>) {
    let (nb, half) = (inp.div_ceil(BLOCK), inp.div_ceil(2));
    let mut packed = vec![0u8; out * half];
    let mut scales = vec![0u8; out * nb];
    for r in 0..out {
        let row = &values[r * inp..(r + 1) * inp];
        let prow = &mut packed[r * half..(r + 1) * half];
        for b in 0..nb {
            let blk = &row[b * BLOCK..((b + 1) * BLOCK).min(inp)];
            let e = block_exp(blk.iter().fold(0.0f32, |a, &x| a.max(x.abs())), E2M1_MAX);
            scales[r * nb + b] = e8m0_from_exp(e);
            let inv = pow2(-e);
            let bytes = &mut prow[b * BLOCK / 2..];
            for (byte, pair) in bytes.iter_mut().zip(blk.chunks(2)) {
                let hi = pair.get(1).map_or(0, |&x| e2m1_code(x * inv) << 4);
                *byte = e2m1_code(pair[0] * inv) | hi;
            }
        }
    }
    (packed, scales)
}

/// Dequantizes e4m3 codes with `br x bc` e8m0 blocks back to f32 (exact).
fn dequantize_fp8(codes: &[u8], scales: &[u8], rows: usize, cols: usize, br: usize, bc: usize) -> Vec<f32> {
    let nbc = cols.div_ceil(bc);
    (0..rows * cols).map(|i| e4m3_to_f32(codes[i]) * e8m0_to_f32(scales[(i / cols / br) * nbc + (i % cols) / bc])).collect()
}

/// Inverse of [`quantize_fp8_blocks`] (exact).
pub fn dequantize_fp8_blocks(codes: &[u8], scales: &[u8], out: usize, inp: usize) -> Vec<f32> {
    dequantize_fp8(codes, scales, out, inp, BLOCK, BLOCK)
}

/// Inverse of [`quantize_fp8_rows`] (exact).
pub fn dequantize_fp8_rows(codes: &[u8], scales: &[u8], rows: usize, width: usize) -> Vec<f32> {
    dequantize_fp8(codes, scales, rows, width, 1, BLOCK)
}

/// Inverse of [`quantize_fp4`] (exact); nibble code 8 (-0) gives 0.
pub fn dequantize_fp4(packed: &[u8], scales: &[u8], out: usize, inp: usize) -> Vec<f32> {
    let (half, nb) = (inp.div_ceil(2), inp.div_ceil(BLOCK));
    (0..out * inp)
        .map(|i| {
            let (r, c) = (i / inp, i % inp);
            let byte = packed[r * half + c / 2];
            let nib = if c % 2 == 0 { byte & 15 } else { byte >> 4 };
            (e2m1_to_f32(nib) + 0.0) * e8m0_to_f32(scales[r * nb + c / BLOCK])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pseudo-random values spanning several magnitudes, with exact zeros and a zero block.
    fn sample(n: usize) -> Vec<f32> {
        let mut s = 0x1234_5678_9abc_def0u64;
        (0..n)
            .map(|i| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
                if i % 17 == 0 || (64..96).contains(&i) { 0.0 } else { u * [0.01f32, 1.0, 300.0][i % 3] }
            })
            .collect()
    }

    #[test]
    fn fp8_blocks_round_trip_within_half_an_e4m3_step_of_each_block_scale() {
        let (out, inp) = (70, 96);
        let v = sample(out * inp);
        let (codes, scales) = quantize_fp8_blocks(&v, out, inp);
        assert_eq!(scales.len(), 3 * 3);
        let back = dequantize_fp8_blocks(&codes, &scales, out, inp);
        for i in 0..v.len() {
            let s = e8m0_to_f32(scales[(i / inp / 32) * 3 + (i % inp) / 32]);
            assert!((back[i] - v[i]).abs() <= s * 16.0, "i {i}: {} vs {}", back[i], v[i]);
            assert!(back[i].abs() <= s * 448.0);
        }
    }

    #[test]
    fn fp4_packs_even_columns_in_the_low_nibble_and_round_trips_exact_grid_values() {
        let inp = 64;
        let v: Vec<f32> = (0..inp).map(|c| [0.0f32, 0.5, -1.0, 1.5, 2.0, -3.0, 4.0, 6.0][c % 8] * 0.25).collect();
        let (packed, scales) = quantize_fp4(&v, 1, inp);
        assert_eq!((packed.len(), scales.len()), (32, 2));
        assert_eq!(scales[0], e8m0_from_exp(-2));
        assert_eq!(packed[1] & 15, e2m1_from_f32(-1.0));
        assert_eq!(packed[1] >> 4, e2m1_from_f32(1.5));
        assert_eq!(dequantize_fp4(&packed, &scales, 1, inp), v);
    }

    #[test]
    fn fast_e2m1_code_equals_the_general_rounding_on_ties_specials_and_random_values() {
        let mut v = vec![0.0f32, -0.0, 6.0, -6.0, 6.5, -7.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, -1e-40];
        for t in [0.25f32, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0] {
            v.extend([t, -t, t.next_up(), t.next_down(), -t.next_up(), -t.next_down()]);
        }
        v.extend(sample(100_000).iter().map(|x| x * 0.05));
        for x in v {
            assert_eq!(e2m1_code(x), e2m1_from_f32(x), "x {x:e}");
        }
    }

    #[test]
    fn engram_rows_get_one_scale_per_32_columns_of_each_row() {
        let (rows, w) = (5, 64);
        let v = sample(rows * w);
        let (codes, scales) = quantize_fp8_rows(&v, rows, w);
        assert_eq!(scales.len(), rows * 2);
        let back = dequantize_fp8_rows(&codes, &scales, rows, w);
        for i in 0..v.len() {
            let s = e8m0_to_f32(scales[(i / w) * 2 + (i % w) / 32]);
            assert!((back[i] - v[i]).abs() <= s * 16.0 && back[i].abs() <= s * 448.0, "i {i}");
        }
    }
}
