//! Software transcendentals (rule N5) from unfused products, adds and bit manipulation; wgsl/lib/math.wgsl is a line-by-line copy.
// max/min chains and negated comparisons mirror WGSL's min, max and NaN-catching tests, which clamp would not.
#![allow(clippy::manual_clamp, clippy::neg_cmp_op_on_partial_ord)]
mod parts;
#[cfg(test)]
pub(crate) mod tests;

use parts::{
    div_core, exp_parts, exp_poly, fast_two_sum, head12, ldexp, log_parts, log_sum, recip_core, two_prod, two_sum, Dd,
    ExpParts, Recip, LOG2E, MIN_NORMAL, TWO_M30, TWO_M40, TWO_M60,
};

const INF: f32 = f32::INFINITY;
/// 2^-26 and 2^64 / 2^-64 for small-argument branches and exact rescaling.
const TWO_M26: f32 = f32::from_bits(0x32800000);
const TWO_P64: f32 = f32::from_bits(0x5f800000);
const TWO_M64: f32 = f32::from_bits(0x1f800000);
/// Below it e^x is under the smallest normal; at and above it e^x rounds to infinity.
const EXP_X_MIN: f32 = f32::from_bits(0xc2aeac4f);
const EXP_X_OVF: f32 = f32::from_bits(0x42b17218);
/// log(2) as a 12-bit head and rounded remainder.
const LN2_H12: f32 = f32::from_bits(0x3f317000);
const LN2_L12: f32 = f32::from_bits(0x3805fdf4);
/// log2(e) as a 12-bit head and rounded remainder.
const LOG2E_H12: f32 = f32::from_bits(0x3fb8b000);
const LOG2E_L12: f32 = f32::from_bits(0xb9389ad4);
/// erf(x)/x - 1 in z = x^2 on [0, 1]: ERF_S0 + ERF_S1 z + ... + ERF_S6 z^6.
const ERF_S0: f32 = f32::from_bits(0x3e0375d4);
const ERF_S1: f32 = f32::from_bits(0xbec093a0);
const ERF_S2: f32 = f32::from_bits(0x3de716a8);
const ERF_S3: f32 = f32::from_bits(0xbcdbff48);
const ERF_S4: f32 = f32::from_bits(0x3baa1708);
const ERF_S5: f32 = f32::from_bits(0xba528587);
const ERF_S6: f32 = f32::from_bits(0x38a61a27);
/// erfc(x) e^(x^2) in t = x - 1.5 on [1, 2]: ERF_A0 + ERF_A1 t + ... + ERF_A7 t^7.
const ERF_A0: f32 = f32::from_bits(0x3ea4a6d8);
const ERF_A1: f32 = f32::from_bits(0xbe278cbc);
const ERF_A2: f32 = f32::from_bits(0x3d9bf539);
const ERF_A3: f32 = f32::from_bits(0xbd06e7ae);
const ERF_A4: f32 = f32::from_bits(0x3c5affde);
const ERF_A5: f32 = f32::from_bits(0xbba7112e);
const ERF_A6: f32 = f32::from_bits(0x3b01c63f);
const ERF_A7: f32 = f32::from_bits(0xba5266cf);
/// erfc(x) e^(x^2) in t = x - 3 on [2, 3.93]: ERF_B0 + ERF_B1 t + ... + ERF_B7 t^7.
const ERF_B0: f32 = f32::from_bits(0x3e374c10);
const ERF_B1: f32 = f32::from_bits(0xbd5eb5d0);
const ERF_B2: f32 = f32::from_bits(0x3c822288);
const ERF_B3: f32 = f32::from_bits(0xbb9274b0);
const ERF_B4: f32 = f32::from_bits(0x3aa2552a);
const ERF_B5: f32 = f32::from_bits(0xb9adc3b4);
const ERF_B6: f32 = f32::from_bits(0x383fcb54);
const ERF_B7: f32 = f32::from_bits(0xb856e4ea);
/// From here on erf(x) rounds to 1.
const ERF_X_ONE: f32 = f32::from_bits(0x407ae148);

/// The IEEE product rounded on its own (Rust never contracts), at or below 2^-126 flushed to a signed zero (rule N7).
#[inline(always)]
pub fn mul_rn(a: f32, b: f32) -> f32 {
    #[cfg(test)]
    tests::watch(a, b);
    crate::numerics::edge::flush_product(a * b)
}

/// A product known to be exact; WGSL keeps it opaque too, so no compiler rewrites the error-free sums around it.
#[inline(always)]
fn mul_ex(a: f32, b: f32) -> f32 {
    #[cfg(test)]
    tests::watch(a, b);
    a * b
}

/// The value itself; WGSL hides it from algebraic rewrites (`(a + b) - a` to `b`, `x * (1 + y)` to `fma(x, y, x)`).
#[inline(always)]
fn keep(x: f32) -> f32 {
    x
}

/// WGSL's select: `t` when `c`, else `f`.
#[inline(always)]
fn select<T>(f: T, t: T, c: bool) -> T {
    if c {
        t
    } else {
        f
    }
}

/// 2^x; 0 for x < -126 (subnormal results are not produced), +inf for x >= 128.
pub fn exp2(x: f32) -> f32 {
    let xc = select(x.max(-130.0).min(130.0), 0.0, x.abs() < TWO_M40);
    let kf = (xc + 0.5).floor();
    let f = xc - kf;
    let fh = head12(f);
    let fl = f - fh;
    let a = mul_ex(fh, LN2_H12);
    let b = mul_ex(fl, LN2_H12) + mul_rn(f, LN2_L12);
    let r = fast_two_sum(a, b);
    let d = exp_poly(r.hi, r.lo);
    let v = ldexp(d.hi + d.lo, kf as i32);
    select(select(v, 0.0, x < -126.0), INF, x >= 128.0)
}

/// e^x; 0 where e^x is below the smallest normal (x < -87.33654), +inf from x = 88.72284.
pub fn exp(x: f32) -> f32 {
    let e = exp_parts(x);
    let v = ldexp(e.hi + e.lo, e.n);
    select(select(v.max(MIN_NORMAL), 0.0, x < EXP_X_MIN), INF, x >= EXP_X_OVF)
}

/// Replaces inputs outside the positive normal range by 1 so the log kernels stay in range.
#[inline(always)]
fn log_arg(x: f32) -> f32 {
    select(x, 1.0, !(x >= MIN_NORMAL) || x == INF)
}

/// Natural log for positive normal x; -inf below the smallest normal (zero and negatives included), +inf at +inf.
pub fn log(x: f32) -> f32 {
    let v = log_sum(log_parts(log_arg(x), 0.0));
    select(select(v, -INF, !(x >= MIN_NORMAL)), INF, x == INF)
}

/// Base-2 log for positive normal x; -inf below the smallest normal (zero and negatives included), +inf at +inf.
pub fn log2(x: f32) -> f32 {
    let lp = log_parts(log_arg(x), 0.0);
    let hh = head12(lp.hi);
    let hl = lp.hi - hh;
    let p = mul_ex(hh, LOG2E_H12);
    let pe = mul_ex(hl, LOG2E_H12) + (mul_rn(lp.hi, LOG2E_L12) + mul_rn(lp.lo, LOG2E));
    let s = fast_two_sum(lp.k, p);
    let v = s.hi + (s.lo + pe);
    select(select(v, -INF, !(x >= MIN_NORMAL)), INF, x == INF)
}

/// log(1 + x) for x > -1; -inf for x <= -1, +inf at +inf, subnormal x gives a signed zero.
pub fn log1p(x: f32) -> f32 {
    let xs = select(x, 0.0, x <= -1.0 || x == INF);
    let u = two_sum(1.0, xs);
    let v = log_sum(log_parts(u.hi, u.lo));
    let w = select(v, ldexp(x, 0), x.abs() < TWO_M26);
    select(select(w, -INF, x <= -1.0), INF, x == INF)
}

/// x = m * 4^k with m in [1, 4).
#[derive(Clone, Copy, Debug)]
struct Quarter {
    m: f32,
    k: i32,
}

/// Mantissa m in [1, 4) and k with x = m * 4^k, for positive normal x.
#[inline(always)]
fn sqrt_reduce(x: f32) -> Quarter {
    let b = x.to_bits();
    let eb = ((b >> 23) & 0xff) as i32;
    let k = (eb - 127) >> 1;
    Quarter { m: f32::from_bits((b & 0x007f_ffff) | (((eb - k - k) as u32) << 23)), k }
}

/// 1/sqrt(m) for m in [1, 4) as y * (1 + c), y with 12 significant bits.
#[inline(always)]
fn rsqrt_core(m: f32) -> Recip {
    let y0 = f32::from_bits(0x5f37_59df - (m.to_bits() >> 1));
    let y1 = mul_rn(y0, keep(1.5 - mul_rn(mul_rn(mul_ex(0.5, m), y0), y0)));
    let y = head12(y1);
    let p = two_prod(m, mul_ex(y, y));
    let r = (1.0 - p.hi) - p.lo;
    Recip { y, c: mul_rn(r, keep(0.5 + mul_rn(r, 0.375 + mul_rn(r, 0.3125)))) }
}

/// 1/sqrt(x) for positive normal x; +inf for zero and subnormal x of either sign, 0 at +inf, NaN for negative normal x.
pub fn rsqrt(x: f32) -> f32 {
    let q = sqrt_reduce(log_arg(x));
    let rc = rsqrt_core(q.m);
    let v = ldexp(rc.y + mul_rn(rc.y, rc.c), -q.k);
    let w = select(select(v, INF, x < MIN_NORMAL), 0.0, x == INF);
    select(w, f32::NAN, x <= -MIN_NORMAL)
}

/// sqrt(x) for x >= 0; +0 for zero and subnormal x of either sign, +inf at +inf, NaN for negative normal x.
pub fn sqrt(x: f32) -> f32 {
    let q = sqrt_reduce(log_arg(x));
    let rc = rsqrt_core(q.m);
    let mh = head12(q.m);
    let ml = q.m - mh;
    let u = mul_ex(mh, rc.y);
    let ue = mul_ex(ml, rc.y);
    let s = u + (ue + mul_rn(u + ue, rc.c));
    let v = ldexp(s, q.k);
    let w = select(select(v, 0.0, x < MIN_NORMAL), INF, x == INF);
    select(w, f32::NAN, x <= -MIN_NORMAL)
}

/// Mantissa of a normal |x| in [1, 2).
#[inline(always)]
fn mant(x: f32) -> f32 {
    f32::from_bits((x.to_bits() & 0x007f_ffff) | 0x3f80_0000)
}

/// Biased exponent field of x.
#[inline(always)]
fn expo(x: f32) -> i32 {
    ((x.to_bits() >> 23) & 0xff) as i32
}

/// Copies the sign of s onto the non-negative v.
#[inline(always)]
fn with_sign(v: f32, s: u32) -> f32 {
    f32::from_bits(v.to_bits() | (s & 0x8000_0000))
}

/// 1/x for normal x; signed 0 where |1/x| is below the smallest normal or x is infinite, signed inf for zero or subnormal x.
pub fn recip(x: f32) -> f32 {
    let rc = recip_core(mant(x));
    let v = ldexp(rc.y + mul_rn(rc.y, rc.c), 127 - expo(x));
    let w = select(select(v, INF, x.abs() < MIN_NORMAL), 0.0, x.abs() == INF);
    with_sign(w, x.to_bits())
}

/// a / b for normal a and b; a signed 0 where the quotient is below the smallest normal, a signed inf on overflow or zero b.
pub fn div(a: f32, b: f32) -> f32 {
    let q = div_core(mant(a), 0.0, mant(b), 0.0);
    let v = ldexp(q.hi, expo(a) - expo(b));
    let w = select(select(v, INF, b.abs() < MIN_NORMAL || a.abs() == INF), 0.0, a.abs() < MIN_NORMAL || b.abs() == INF);
    with_sign(w, a.to_bits() ^ b.to_bits())
}

/// 2^n * (hi + lo) as a head and tail, both zero below 2^-60 where they no longer move 1 + e.
#[inline(always)]
fn exp_small_scaled(e: ExpParts) -> Dd {
    let far = e.n < -60;
    Dd { hi: select(ldexp(e.hi, e.n), 0.0, far), lo: select(ldexp(e.lo, e.n), 0.0, far) }
}

/// 1 / (1 + e^-x); 0 where the result is below the smallest normal (x < -87.33654).
pub fn sigmoid(x: f32) -> f32 {
    let e = exp_parts(-x.abs());
    let es = exp_small_scaled(e);
    let d = fast_two_sum(1.0, es.hi);
    let neg = x < 0.0;
    let q = div_core(select(1.0, e.hi, neg), select(0.0, e.lo, neg), d.hi, d.lo + es.lo);
    ldexp(q.hi, select(0, e.n, neg))
}

/// x * sigmoid(x) = x / (1 + e^-x); a signed 0 where the result is below the smallest normal.
pub fn silu(x: f32) -> f32 {
    let xc = select(x.max(-104.0).min(32.0), 0.0, x.abs() < TWO_M60);
    let e = exp_parts(-xc.abs());
    let es = exp_small_scaled(e);
    let d = fast_two_sum(1.0, es.hi);
    let neg = xc < 0.0;
    let p = two_prod(xc, e.hi);
    let nh = select(xc, p.hi, neg);
    let nl = select(0.0, p.lo + mul_rn(xc, e.lo), neg);
    let q = div_core(nh, nl, d.hi, d.lo + es.lo);
    let v = ldexp(q.hi, select(0, e.n, neg));
    select(select(v, x, x > 32.0), ldexp(x, -1), x.abs() < TWO_M60)
}

/// log(1 + e^x); 0 where the result is below the smallest normal (x < -87.33654).
pub fn softplus(x: f32) -> f32 {
    let e = exp_parts(-x.abs());
    let es = exp_small_scaled(e);
    let u = fast_two_sum(1.0, es.hi);
    let l = log_sum(log_parts(u.hi, u.lo + es.lo));
    let far = ldexp(e.hi + e.lo, e.n);
    let far = select(far.max(MIN_NORMAL), 0.0, x < EXP_X_MIN);
    select(x.max(0.0) + l, far, x < -20.0)
}

/// erf(x); a signed 0 for subnormal x, exactly +-1 from |x| = 3.92.
pub fn erf(x: f32) -> f32 {
    let ax = select(x.abs(), 0.0, x.abs() < MIN_NORMAL);
    let a1 = ax.min(1.0);
    let tiny = a1 < TWO_M60;
    let xs = select(a1, mul_ex(a1, TWO_P64), tiny);
    let az = select(a1, 0.0, a1 < TWO_M30);
    let z = mul_rn(az, az);
    let g = ERF_S0
        + mul_rn(
            z,
            ERF_S1 + mul_rn(z, ERF_S2 + mul_rn(z, ERF_S3 + mul_rn(z, ERF_S4 + mul_rn(z, ERF_S5 + mul_rn(z, ERF_S6))))),
        );
    let ps = xs + mul_rn(xs, g);
    let small = select(ps, mul_ex(ps, TWO_M64), tiny);
    let at = ax.max(1.0).min(ERF_X_ONE);
    let hi = at >= 2.0;
    let t = at - select(1.5, 3.0, hi);
    let mut r = select(ERF_A7, ERF_B7, hi);
    r = select(ERF_A6, ERF_B6, hi) + mul_rn(t, r);
    r = select(ERF_A5, ERF_B5, hi) + mul_rn(t, r);
    r = select(ERF_A4, ERF_B4, hi) + mul_rn(t, r);
    r = select(ERF_A3, ERF_B3, hi) + mul_rn(t, r);
    r = select(ERF_A2, ERF_B2, hi) + mul_rn(t, r);
    r = select(ERF_A1, ERF_B1, hi) + mul_rn(t, r);
    r = select(ERF_A0, ERF_B0, hi) + mul_rn(t, r);
    let zz = two_prod(at, at);
    let e = exp_parts(-zz.hi);
    let ec = e.lo - mul_rn(e.hi, zz.lo);
    let c = ldexp(mul_rn(e.hi, r) + mul_rn(ec, r), e.n);
    let v = select(select(small, 1.0 - c, ax >= 1.0), 1.0, ax >= ERF_X_ONE);
    with_sign(select(v, 0.0, ax == 0.0), x.to_bits())
}
