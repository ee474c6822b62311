//! Edge arithmetic (rule N7): the canonical flushes, zero signs and the NaN test, by bit manipulation; wgsl/lib/edge.wgsl mirrors the flushes and zero signs kernels use.

/// Sign bit.
const SIGN: u32 = 0x8000_0000;
/// Exponent field.
const EXP: u32 = 0x7f80_0000;
/// 2^-126, the smallest normal, as bits.
const MIN_NORMAL_BITS: u32 = 0x0080_0000;
/// 2^-103 as bits: a term at or above it is a multiple of 2^-126.
const TERM_MIN_BITS: u32 = 0x0c00_0000;

/// A subnormal or zero sum becomes +0 (compilers that assume no signed zeros fold `0.0 + x` to `x`, so a zero sum's sign is the device's); everything else is kept.
#[inline(always)]
pub fn flush(x: f32) -> f32 {
    if x.to_bits() & EXP == 0 {
        0.0
    } else {
        x
    }
}

/// A rounded product at or below 2^-126 in magnitude becomes the zero of its sign: a flushing device may give 0 where IEEE rounds up to 2^-126.
#[inline(always)]
pub fn flush_product(x: f32) -> f32 {
    let b = x.to_bits();
    if b & !SIGN <= MIN_NORMAL_BITS {
        f32::from_bits(b & SIGN)
    } else {
        x
    }
}

/// A term of a sum below 2^-103 becomes +0, so every term and partial sum stays a multiple of 2^-126 and no sum can be subnormal.
#[inline(always)]
pub fn term(x: f32) -> f32 {
    if x.to_bits() & !SIGN < TERM_MIN_BITS {
        0.0
    } else {
        x
    }
}

/// The product `a * b` as a term of a sum: below 2^-103 it is +0, whatever a device's product gave there (exact or rounded).
#[inline(always)]
pub fn mul_term(a: f32, b: f32) -> f32 {
    term(a * b)
}

/// The sum `a + b`, flushed.
#[inline(always)]
pub fn add(a: f32, b: f32) -> f32 {
    flush(a + b)
}

/// The difference `a - b`, flushed.
#[inline(always)]
pub fn sub(a: f32, b: f32) -> f32 {
    flush(a - b)
}

/// A zero of either sign becomes +0 (devices disagree on which zero `max` and `min` return).
#[inline(always)]
pub fn pos_zero(x: f32) -> f32 {
    if x.to_bits() & !SIGN == 0 {
        0.0
    } else {
        x
    }
}

/// The larger of `a` and `b`, `a` on ties; a zero result is +0. Neither may be NaN.
#[inline(always)]
pub fn max(a: f32, b: f32) -> f32 {
    pos_zero(if b > a { b } else { a })
}

/// `max(x, 0)` with +0 for every zero and negative input, from the bits.
#[inline(always)]
pub fn relu(x: f32) -> f32 {
    let b = x.to_bits();
    if b & SIGN != 0 {
        0.0
    } else {
        x
    }
}

/// NaN by its bits: exponent all ones, mantissa non-zero.
#[inline(always)]
pub fn is_nan(x: f32) -> bool {
    x.to_bits() & !SIGN > EXP
}


#[cfg(test)]
mod tests {
    use super::*;

    fn p(e: i32) -> f32 {
        f32::from_bits(((127 + e) as u32) << 23)
    }

    #[test]
    fn flush_keeps_normals_and_makes_subnormal_and_zero_sums_plus_zero() {
        assert_eq!(flush(f32::from_bits(1)).to_bits(), 0);
        assert_eq!(flush(-f32::from_bits(0x7f_ffff)).to_bits(), 0);
        assert_eq!(flush(f32::MIN_POSITIVE), f32::MIN_POSITIVE);
        assert_eq!(flush(-0.0).to_bits(), 0);
        assert!(flush(f32::NAN).is_nan());
        assert_eq!(flush(f32::NEG_INFINITY), f32::NEG_INFINITY);
    }

    #[test]
    fn flush_product_zeroes_the_smallest_normal_too() {
        assert_eq!(flush_product(f32::MIN_POSITIVE).to_bits(), 0);
        assert_eq!(flush_product(-f32::MIN_POSITIVE).to_bits(), SIGN);
        let next = f32::from_bits(MIN_NORMAL_BITS + 1);
        assert_eq!(flush_product(next), next);
        // (2^-63)(1 - 2^-24) 2^-63 rounds to 2^-126 under IEEE; a flushing device gives 0; both flush to 0.
        assert_eq!(flush_product(p(-63) * f32::from_bits(0x1fff_ffff)).to_bits(), 0);
    }

    #[test]
    fn term_drops_below_two_to_minus_103_only() {
        assert_eq!(term(p(-104)).to_bits(), 0);
        assert_eq!(term(-p(-104)).to_bits(), 0);
        assert_eq!(term(p(-103)), p(-103));
        assert_eq!(term(-p(-103)), -p(-103));
        assert_eq!(term(-0.0).to_bits(), 0);
    }

    #[test]
    fn terms_on_the_grid_never_sum_to_a_subnormal() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (s >> 32) as u32 & 0x8fff_ffff
        };
        for _ in 0..100_000 {
            let a = term(f32::from_bits(next()));
            let b = term(f32::from_bits(next()));
            let sum = a + b;
            assert!(sum.to_bits() & EXP != 0 || sum.to_bits() & !SIGN == 0, "{a:e} + {b:e} = {sum:e}");
        }
    }

    #[test]
    fn zero_signs_and_nan_by_bits() {
        assert_eq!(max(-0.0, 0.0).to_bits(), 0);
        assert_eq!(max(0.0, -0.0).to_bits(), 0);
        assert_eq!(max(-1.0, -0.0).to_bits(), 0);
        assert_eq!(max(2.0, 3.0), 3.0);
        assert_eq!(relu(-0.0).to_bits(), 0);
        assert_eq!(relu(-3.0).to_bits(), 0);
        assert_eq!(relu(3.0), 3.0);
        assert!(is_nan(f32::NAN) && is_nan(f32::from_bits(0xffff_ffff)) && !is_nan(f32::INFINITY));
    }
}
