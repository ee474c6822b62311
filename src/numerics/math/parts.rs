//! Building blocks of the software transcendentals: error-free sums and products, exact power-of-two scaling, and the reduced reciprocal, division, exp and log kernels.
use super::{keep, mul_ex, mul_rn, select};

/// log(2) head with 15 significant bits, so `k * LN2_HI` is exact for |k| < 512.
pub(super) const LN2_HI: f32 = f32::from_bits(0x3f317200);
/// log(2) - LN2_HI rounded.
pub(super) const LN2_LO: f32 = f32::from_bits(0x35bfbe8e);
/// log2(e) rounded.
pub(super) const LOG2E: f32 = f32::from_bits(0x3fb8aa3b);
/// Smallest positive normal f32.
pub(super) const MIN_NORMAL: f32 = f32::from_bits(0x00800000);
/// 2^-60: tails below it are dropped so that no product underflows.
pub(super) const TWO_M60: f32 = f32::from_bits(0x21800000);
/// 2^-40: exp arguments below it are treated as zero (the result rounds to 1).
pub(super) const TWO_M40: f32 = f32::from_bits(0x2b800000);
/// 2^-30: s^3 terms of log below it are dropped.
pub(super) const TWO_M30: f32 = f32::from_bits(0x30800000);
/// Linear minimax start for 1/m on [1, 2.5]: RECIP_P0 + RECIP_P1 * m.
const RECIP_P0: f32 = f32::from_bits(0x3fa11425);
const RECIP_P1: f32 = f32::from_bits(0xbeb816ff);
/// (e^r - 1 - r) / r^2 on [-0.348, 0.348]: EXP_P2 + EXP_P3 r + EXP_P4 r^2 + EXP_P5 r^3 + EXP_P6 r^4.
const EXP_P2: f32 = f32::from_bits(0x3f000000);
const EXP_P3: f32 = f32::from_bits(0x3e2aaa48);
const EXP_P4: f32 = f32::from_bits(0x3d2aaa5f);
const EXP_P5: f32 = f32::from_bits(0x3c091d80);
const EXP_P6: f32 = f32::from_bits(0x3ab6be50);
/// (2 atanh(s) - 2s) / s^3 in z = s^2 on [0, 0.0297]: LOG_P0 + LOG_P1 z + LOG_P2 z^2.
const LOG_P0: f32 = f32::from_bits(0x3f2aaabe);
const LOG_P1: f32 = f32::from_bits(0x3eccae61);
const LOG_P2: f32 = f32::from_bits(0x3e990e0b);

/// An unevaluated sum hi + lo with |lo| at most half an ulp of hi.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dd {
    pub hi: f32,
    pub lo: f32,
}

/// 1/m as y * (1 + c), y with 12 significant bits.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recip {
    pub y: f32,
    pub c: f32,
}

/// e^x as 2^n * (hi + lo).
#[derive(Clone, Copy, Debug)]
pub(super) struct ExpParts {
    pub n: i32,
    pub hi: f32,
    pub lo: f32,
}

/// log(u) as k * log(2) + (hi + lo).
#[derive(Clone, Copy, Debug)]
pub(super) struct LogParts {
    pub k: f32,
    pub hi: f32,
    pub lo: f32,
}

/// a + b exactly as a rounded sum and its error (Knuth).
#[inline(always)]
pub(super) fn two_sum(a: f32, b: f32) -> Dd {
    let s = keep(a + b);
    let bb = keep(s - a);
    Dd { hi: s, lo: (a - (s - bb)) + (b - bb) }
}

/// a + b exactly, given |a| >= |b| or a == 0 (Dekker).
#[inline(always)]
pub(super) fn fast_two_sum(a: f32, b: f32) -> Dd {
    let s = keep(a + b);
    Dd { hi: s, lo: b - (s - a) }
}

/// x rounded to 12 significant bits; x - head12(x) is exact and fits in 12 bits.
#[inline(always)]
pub(super) fn head12(x: f32) -> f32 {
    f32::from_bits(x.to_bits().wrapping_add(0x800) & 0xffff_f000)
}

/// a * b exactly as a rounded product and its error (Dekker); products of halves are exact.
#[inline(always)]
pub(super) fn two_prod(a: f32, b: f32) -> Dd {
    let p = mul_rn(a, b);
    let ah = head12(a);
    let al = a - ah;
    let bh = head12(b);
    let bl = b - bh;
    Dd { hi: p, lo: (((mul_ex(ah, bh) - p) + mul_ex(ah, bl)) + mul_ex(al, bh)) + mul_ex(al, bl) }
}

/// v * 2^n by exponent arithmetic: a zero or subnormal result gives a signed zero, overflow a signed infinity.
#[inline(always)]
pub(super) fn ldexp(v: f32, n: i32) -> f32 {
    let b = v.to_bits();
    let e = ((b >> 23) & 0xff) as i32;
    let en = e + n;
    let sign = b & 0x8000_0000;
    let scaled = f32::from_bits((b & 0x807f_ffff) | ((en.clamp(1, 254) as u32) << 23));
    let r = select(scaled, f32::from_bits(sign | 0x7f80_0000), en > 254);
    select(r, f32::from_bits(sign), e == 0 || en < 1)
}

/// 1/m for m in [1, 2.5]: one Newton step, a 12-bit head, then the exact residual's series.
#[inline(always)]
pub(super) fn recip_core(m: f32) -> Recip {
    let y0 = RECIP_P0 + mul_rn(RECIP_P1, m);
    let y1 = y0 + mul_rn(y0, keep(1.0 - mul_rn(m, y0)));
    let y = head12(y1);
    let mh = head12(m);
    let ml = m - mh;
    let r = (1.0 - mul_ex(mh, y)) - mul_ex(ml, y);
    let c = mul_rn(r, keep(1.0 + mul_rn(r, keep(1.0 + mul_rn(r, keep(1.0 + r))))));
    Recip { y, c }
}

/// (nh + nl) / (dh + dl) for dh in [1, 2.5] and tails nl, dl below half an ulp of their heads, as a head and its exact remainder.
#[inline(always)]
pub(super) fn div_core(nh: f32, nl: f32, dh: f32, dl: f32) -> Dd {
    let rc = recip_core(dh);
    let nhh = head12(nh);
    let nhl = nh - nhh;
    let u = mul_ex(nhh, rc.y);
    let ue = mul_ex(nhl, rc.y);
    let w = u + ue;
    let v = mul_rn(nl - mul_rn(w, dl), rc.y);
    fast_two_sum(u, ue + (v + mul_rn(w + v, rc.c)))
}

/// e^(rh + rl) for |rh| <= 0.348 as hi + lo with hi = 1 + (r + r^2 P(r)) rounded.
#[inline(always)]
pub(super) fn exp_poly(rh: f32, rl: f32) -> Dd {
    let z = mul_rn(rh, rh);
    let p = EXP_P2 + mul_rn(rh, EXP_P3 + mul_rn(rh, EXP_P4 + mul_rn(rh, EXP_P5 + mul_rn(rh, EXP_P6))));
    let q = mul_rn(z, keep(p));
    let s = rl + (q + mul_rn(rl, rh));
    let ph = keep(rh + s);
    let pl = (rh - ph) + s;
    let eh = keep(1.0 + ph);
    Dd { hi: eh, lo: ((1.0 - eh) + ph) + pl }
}

/// e^x as 2^n * (hi + lo) by Cody-Waite reduction; x is clamped to [-104, 100] and |x| < 2^-40 counts as 0.
#[inline(always)]
pub(super) fn exp_parts(x: f32) -> ExpParts {
    let xc = select(x.max(-104.0).min(100.0), 0.0, x.abs() < TWO_M40);
    let kf = (mul_rn(xc, LOG2E) + 0.5).floor();
    let t = xc - mul_ex(kf, LN2_HI);
    let r = two_sum(t, -mul_rn(kf, LN2_LO));
    let d = exp_poly(r.hi, r.lo);
    ExpParts { n: kf as i32, hi: d.hi, lo: d.lo }
}

/// log(uh + ul) for positive normal uh and a tail ul, via s = f / (2 + f) and 2 atanh(s).
#[inline(always)]
pub(super) fn log_parts(uh: f32, ul: f32) -> LogParts {
    let ix = (uh.to_bits() as i32) - 0x3f35_04f3;
    let k = ix >> 23;
    let m = f32::from_bits(((ix & 0x007f_ffff) + 0x3f35_04f3) as u32);
    let f = m - 1.0;
    let fs = ldexp(ul, -k);
    let fl = select(fs, 0.0, fs.abs() < TWO_M60);
    let n = two_sum(f, fl);
    let dh = keep(2.0 + n.hi);
    let dl = (n.hi - (dh - 2.0)) + n.lo;
    let s = div_core(n.hi, n.lo, dh, dl);
    let sz = select(s.hi, 0.0, s.hi.abs() < TWO_M30);
    let z = mul_rn(sz, sz);
    let t = mul_rn(mul_rn(s.hi, z), LOG_P0 + mul_rn(z, LOG_P1 + mul_rn(z, LOG_P2)));
    let d = fast_two_sum(mul_ex(2.0, s.hi), mul_ex(2.0, s.lo) + t);
    LogParts { k: k as f32, hi: d.hi, lo: d.lo }
}

/// k * log(2) + (hi + lo) rounded once.
#[inline(always)]
pub(super) fn log_sum(lp: LogParts) -> f32 {
    let s = fast_two_sum(mul_ex(lp.k, LN2_HI), lp.hi);
    s.hi + (s.lo + (lp.lo + mul_rn(lp.k, LN2_LO)))
}
