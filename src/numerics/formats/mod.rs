//! Storage formats (bf16, e4m3fn, e2m1, e8m0): conversions by bit manipulation only, mirrored in wgsl/lib/formats.wgsl.

/// Rounds `m / 2^shift` to the nearest integer, ties to even.
#[inline]
pub fn rne_shift(m: u32, shift: u32) -> u32 {
    if shift == 0 {
        return m;
    }
    if shift > 24 {
        return 0;
    }
    let q = m >> shift;
    let rem = m & ((1u32 << shift) - 1);
    let half = 1u32 << (shift - 1);
    q + u32::from(rem > half || (rem == half && (q & 1) == 1))
}

/// Magnitude code of |x| in a minifloat with `mbits` mantissa bits and minimum normal exponent `emin`,
/// rounded to nearest even and saturated at `max_code`.
#[inline]
pub fn minifloat_code(x: f32, mbits: u32, emin: i32, max_code: u32) -> u32 {
    let b = x.to_bits() & 0x7fff_ffff;
    if b >= 0x7f80_0000 {
        return max_code;
    }
    let exp_bits = (b >> 23) as i32;
    let (mant, e) = if exp_bits == 0 { (b & 0x7f_ffff, -126) } else { ((b & 0x7f_ffff) | 0x80_0000, exp_bits - 127) };
    let shift = (23 - mbits as i32 + (emin - e).max(0)) as u32;
    let code = rne_shift(mant, shift) + (((e - emin).max(0) as u32) << mbits);
    code.min(max_code)
}

/// f32 to bf16 bits, round to nearest even; NaN stays a quiet NaN.
#[inline]
pub fn bf16_from_f32(x: f32) -> u16 {
    let b = x.to_bits();
    if (b & 0x7fff_ffff) > 0x7f80_0000 {
        return ((b >> 16) | 0x40) as u16;
    }
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

/// bf16 bits to f32 (exact).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Rounds an f32 to the nearest bf16 value, returned as f32.
#[inline]
pub fn round_bf16(x: f32) -> f32 {
    bf16_to_f32(bf16_from_f32(x))
}

/// Largest finite e4m3fn value.
pub const E4M3_MAX: f32 = 448.0;

/// f32 to e4m3fn bits: round to nearest even, saturating at +-448; NaN maps to 0x7f.
#[inline]
pub fn e4m3_from_f32(x: f32) -> u8 {
    let sign = ((x.to_bits() >> 24) & 0x80) as u8;
    if x.is_nan() {
        return 0x7f;
    }
    sign | minifloat_code(x, 3, -6, 0x7e) as u8
}

/// e4m3fn bits to f32 (exact); 0x7f and 0xff are NaN.
#[inline]
pub fn e4m3_to_f32(c: u8) -> f32 {
    let e = u32::from((c >> 3) & 15);
    let m = u32::from(c & 7);
    let mag = if (c & 0x7f) == 0x7f {
        f32::NAN
    } else if e == 0 {
        m as f32 * (1.0 / 512.0)
    } else {
        f32::from_bits(((e + 120) << 23) | (m << 20))
    };
    if c & 0x80 != 0 {
        -mag
    } else {
        mag
    }
}

/// f32 to e2m1 nibble (sign bit 3): round to nearest even on the grid {0,.5,1,1.5,2,3,4,6}, saturating.
#[inline]
pub fn e2m1_from_f32(x: f32) -> u8 {
    let sign = ((x.to_bits() >> 28) & 0x8) as u8;
    if x.is_nan() {
        return 0x7;
    }
    sign | minifloat_code(x, 1, 0, 7) as u8
}

/// e2m1 nibble to f32 (exact); code 8 (-0) decodes to -0.0.
#[inline]
pub fn e2m1_to_f32(c: u8) -> f32 {
    let e = u32::from((c >> 1) & 3);
    let m = u32::from(c & 1);
    let mag = if e == 0 { m as f32 * 0.5 } else { f32::from_bits(((e + 126) << 23) | (m << 22)) };
    if c & 0x8 != 0 {
        -mag
    } else {
        mag
    }
}

/// e8m0 byte to its power of two, 2^(b-127); 255 is NaN.
#[inline]
pub fn e8m0_to_f32(b: u8) -> f32 {
    match b {
        255 => f32::NAN,
        0 => f32::from_bits(0x0040_0000),
        _ => f32::from_bits(u32::from(b) << 23),
    }
}

/// Exponent of 2^e as an e8m0 byte, for e in -127..=127.
#[inline]
pub fn e8m0_from_exp(e: i32) -> u8 {
    (e.clamp(-127, 127) + 127) as u8
}

/// `ceil(log2(t))` from the IEEE bits of a positive normal t: exponent - 127 + (mantissa != 0).
#[inline]
pub fn ceil_log2_bits(t: f32) -> i32 {
    let b = t.to_bits();
    ((b >> 23) & 0xff) as i32 - 127 + i32::from(b & 0x7f_ffff != 0)
}

/// 2^e as f32 for e in -126..=127 (exact).
#[inline]
pub fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Exponent of the act_quant scale of a block: `ceil(log2(max(amax, 1e-4) / 448))`, computed exactly.
#[inline]
pub fn act_scale_exp(amax: f32) -> i32 {
    let a = amax.max(1e-4);
    let b = a.to_bits();
    let e = ((b >> 23) & 0xff) as i32 - 127;
    e - 8 + i32::from((b & 0x7f_ffff) > 0x60_0000)
}

/// e4m3 code of `x * 2^-e` (the act_quant element step; the product is exact).
#[inline]
pub fn act_quant_elem(x: f32, e: i32) -> u8 {
    e4m3_from_f32((x * pow2(-e)).clamp(-E4M3_MAX, E4M3_MAX))
}

#[cfg(test)]
mod tests;
