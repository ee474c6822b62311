// Software transcendentals from unfused products, adds and bit manipulation; bit-identical to src/numerics/math/mod.rs and parts.rs, line by line.

// Kernels set LS_ZERO from a uniform holding 0, so no product below can be contracted into an fma.
var<private> LS_ZERO: u32;

// The IEEE product rounded on its own, at or below 2^-126 flushed to a signed zero.
fn mul_rn(a: f32, b: f32) -> f32 { return ls_flp(ls_mul_nf(a, b)); }

// The only float product here, kept from contraction; on its own for products known never to fall at or under 2^-126 unless zero.
fn ls_mul_nf(a: f32, b: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a * b) ^ LS_ZERO); }

// A product known to be exact, kept opaque like mul_rn so no compiler rewrites the error-free sums around it.
fn ls_mul_ex(a: f32, b: f32) -> f32 { return mul_rn(a, b); }

// The value itself, hidden from algebraic rewrites ((a + b) - a to b, x * (1 + y) to fma(x, y, x)) that change bits.
fn ls_keep(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) ^ LS_ZERO); }

// Runtime infinity and NaN (constant expressions may not hold them).
fn ls_inf() -> f32 { return bitcast<f32>(0x7f800000u ^ LS_ZERO); }
fn ls_nan() -> f32 { return bitcast<f32>(0x7fc00000u ^ LS_ZERO); }

// parts.rs constants.
const LS_LN2_HI: f32 = 0x1.62e4p-1f;
const LS_LN2_LO: f32 = 0x1.7f7d1cp-20f;
const LS_LOG2E: f32 = 0x1.715476p+0f;
const LS_MIN_NORMAL: f32 = 0x1p-126f;
const LS_TWO_M60: f32 = 0x1p-60f;
const LS_TWO_M40: f32 = 0x1p-40f;
const LS_TWO_M30: f32 = 0x1p-30f;
const LS_RECIP_P0: f32 = 0x1.42284ap+0f;
const LS_RECIP_P1: f32 = -0x1.702dfep-2f;
const LS_EXP_P2: f32 = 0x1p-1f;
const LS_EXP_P3: f32 = 0x1.55549p-3f;
const LS_EXP_P4: f32 = 0x1.5554bep-5f;
const LS_EXP_P5: f32 = 0x1.123bp-7f;
const LS_EXP_P6: f32 = 0x1.6d7cap-10f;
const LS_LOG_P0: f32 = 0x1.55557cp-1f;
const LS_LOG_P1: f32 = 0x1.995cc2p-2f;
const LS_LOG_P2: f32 = 0x1.321c16p-2f;

// math.rs constants.
const LS_TWO_M26: f32 = 0x1p-26f;
const LS_TWO_P64: f32 = 0x1p+64f;
const LS_TWO_M64: f32 = 0x1p-64f;
const LS_EXP_X_MIN: f32 = -0x1.5d589ep+6f;
const LS_EXP_X_OVF: f32 = 0x1.62e43p+6f;
const LS_LN2_H12: f32 = 0x1.62ep-1f;
const LS_LN2_L12: f32 = 0x1.0bfbe8p-15f;
const LS_LOG2E_H12: f32 = 0x1.716p+0f;
const LS_LOG2E_L12: f32 = -0x1.7135a8p-13f;
const LS_ERF_S0: f32 = 0x1.06eba8p-3f;
const LS_ERF_S1: f32 = -0x1.81274p-2f;
const LS_ERF_S2: f32 = 0x1.ce2d5p-4f;
const LS_ERF_S3: f32 = -0x1.b7fe9p-6f;
const LS_ERF_S4: f32 = 0x1.542e1p-8f;
const LS_ERF_S5: f32 = -0x1.a50b0ep-11f;
const LS_ERF_S6: f32 = 0x1.4c344ep-14f;
const LS_ERF_A0: f32 = 0x1.494dbp-2f;
const LS_ERF_A1: f32 = -0x1.4f1978p-3f;
const LS_ERF_A2: f32 = 0x1.37ea72p-4f;
const LS_ERF_A3: f32 = -0x1.0dcf5cp-5f;
const LS_ERF_A4: f32 = 0x1.b5ffbcp-7f;
const LS_ERF_A5: f32 = -0x1.4e225cp-8f;
const LS_ERF_A6: f32 = 0x1.038c7ep-9f;
const LS_ERF_A7: f32 = -0x1.a4cd9ep-11f;
const LS_ERF_B0: f32 = 0x1.6e982p-3f;
const LS_ERF_B1: f32 = -0x1.bd6bap-5f;
const LS_ERF_B2: f32 = 0x1.04451p-6f;
const LS_ERF_B3: f32 = -0x1.24e96p-8f;
const LS_ERF_B4: f32 = 0x1.44aa54p-10f;
const LS_ERF_B5: f32 = -0x1.5b8768p-12f;
const LS_ERF_B6: f32 = 0x1.7f96a8p-15f;
const LS_ERF_B7: f32 = -0x1.adc9d4p-15f;
const LS_ERF_X_ONE: f32 = 0x1.f5c29p+1f;

struct LsDd { hi: f32, lo: f32 }
struct LsRecip { y: f32, c: f32 }
struct LsExpParts { n: i32, hi: f32, lo: f32 }
struct LsLogParts { k: f32, hi: f32, lo: f32 }
struct LsQuarter { m: f32, k: i32 }

fn ls_two_sum(a: f32, b: f32) -> LsDd {
    let s = ls_keep(a + b);
    let bb = ls_keep(s - a);
    return LsDd(s, (a - (s - bb)) + (b - bb));
}

fn ls_fast_two_sum(a: f32, b: f32) -> LsDd {
    let s = ls_keep(a + b);
    return LsDd(s, b - (s - a));
}

fn ls_head12(x: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(x) + 0x800u) & 0xfffff000u);
}

fn ls_two_prod(a: f32, b: f32) -> LsDd {
    let p = mul_rn(a, b);
    let ah = ls_head12(a);
    let al = a - ah;
    let bh = ls_head12(b);
    let bl = b - bh;
    return LsDd(p, (((ls_mul_ex(ah, bh) - p) + ls_mul_ex(ah, bl)) + ls_mul_ex(al, bh)) + ls_mul_ex(al, bl));
}

fn ls_ldexp(v: f32, n: i32) -> f32 {
    let b = bitcast<u32>(v);
    let e = i32((b >> 23u) & 0xffu);
    let en = e + n;
    let sign = b & 0x80000000u;
    let scaled = bitcast<f32>((b & 0x807fffffu) | (u32(clamp(en, 1, 254)) << 23u));
    let r = select(scaled, bitcast<f32>(sign | 0x7f800000u), en > 254);
    return select(r, bitcast<f32>(sign), e == 0 || en < 1);
}

// Called with m in [1, 2.5] only, where no product below is at or under 2^-126 unless zero, so mul_rn's flushes are skipped.
fn ls_recip_core(m: f32) -> LsRecip {
    let y0 = LS_RECIP_P0 + ls_mul_nf(LS_RECIP_P1, m);
    let y1 = y0 + ls_mul_nf(y0, ls_keep(1.0 - ls_mul_nf(m, y0)));
    let y = ls_head12(y1);
    let mh = ls_head12(m);
    let ml = m - mh;
    let r = (1.0 - ls_mul_nf(mh, y)) - ls_mul_nf(ml, y);
    let c = ls_mul_nf(r, ls_keep(1.0 + ls_mul_nf(r, ls_keep(1.0 + ls_mul_nf(r, ls_keep(1.0 + r))))));
    return LsRecip(y, c);
}

// ls_div_core for mantissas nh, dh in [1, 2) and nl = dl = 0 (its v is +0, so w + v = w and v + x = x here), no product at or under 2^-126 unless zero (no flushes).
fn ls_div_mant(nh: f32, dh: f32) -> LsDd {
    let rc = ls_recip_core(dh);
    let nhh = ls_head12(nh);
    let u = ls_mul_nf(nhh, rc.y);
    let ue = ls_mul_nf(nh - nhh, rc.y);
    return ls_fast_two_sum(u, ue + ls_mul_nf(u + ue, rc.c));
}

fn ls_div_core(nh: f32, nl: f32, dh: f32, dl: f32) -> LsDd {
    let rc = ls_recip_core(dh);
    let nhh = ls_head12(nh);
    let nhl = nh - nhh;
    let u = ls_mul_ex(nhh, rc.y);
    let ue = ls_mul_ex(nhl, rc.y);
    let w = u + ue;
    let v = mul_rn(nl - mul_rn(w, dl), rc.y);
    return ls_fast_two_sum(u, ue + (v + mul_rn(w + v, rc.c)));
}

fn ls_exp_poly(rh: f32, rl: f32) -> LsDd {
    let z = mul_rn(rh, rh);
    let p = LS_EXP_P2 + mul_rn(rh, LS_EXP_P3 + mul_rn(rh, LS_EXP_P4 + mul_rn(rh, LS_EXP_P5 + mul_rn(rh, LS_EXP_P6))));
    let q = mul_rn(z, ls_keep(p));
    let s = rl + (q + mul_rn(rl, rh));
    let ph = ls_keep(rh + s);
    let pl = (rh - ph) + s;
    let eh = ls_keep(1.0 + ph);
    return LsDd(eh, ((1.0 - eh) + ph) + pl);
}

fn ls_exp_parts(x: f32) -> LsExpParts {
    let xc = select(min(max(x, -104.0), 100.0), 0.0, abs(x) < LS_TWO_M40);
    let kf = floor(mul_rn(xc, LS_LOG2E) + 0.5);
    let t = xc - ls_mul_ex(kf, LS_LN2_HI);
    let r = ls_two_sum(t, -mul_rn(kf, LS_LN2_LO));
    let d = ls_exp_poly(r.hi, r.lo);
    return LsExpParts(i32(kf), d.hi, d.lo);
}

fn ls_log_parts(uh: f32, ul: f32) -> LsLogParts {
    let ix = bitcast<i32>(uh) - 0x3f3504f3;
    let k = ix >> 23u;
    let m = bitcast<f32>((ix & 0x007fffff) + 0x3f3504f3);
    let f = m - 1.0;
    let fs = ls_ldexp(ul, -k);
    let fl = select(fs, 0.0, abs(fs) < LS_TWO_M60);
    let n = ls_two_sum(f, fl);
    let dh = ls_keep(2.0 + n.hi);
    let dl = (n.hi - (dh - 2.0)) + n.lo;
    let s = ls_div_core(n.hi, n.lo, dh, dl);
    let sz = select(s.hi, 0.0, abs(s.hi) < LS_TWO_M30);
    let z = mul_rn(sz, sz);
    let t = mul_rn(mul_rn(s.hi, z), LS_LOG_P0 + mul_rn(z, LS_LOG_P1 + mul_rn(z, LS_LOG_P2)));
    let d = ls_fast_two_sum(ls_mul_ex(2.0, s.hi), ls_mul_ex(2.0, s.lo) + t);
    return LsLogParts(f32(k), d.hi, d.lo);
}

fn ls_log_sum(lp: LsLogParts) -> f32 {
    let s = ls_fast_two_sum(ls_mul_ex(lp.k, LS_LN2_HI), lp.hi);
    return s.hi + (s.lo + (lp.lo + mul_rn(lp.k, LS_LN2_LO)));
}

fn ls_exp2(x: f32) -> f32 {
    let xc = select(min(max(x, -130.0), 130.0), 0.0, abs(x) < LS_TWO_M40);
    let kf = floor(xc + 0.5);
    let f = xc - kf;
    let fh = ls_head12(f);
    let fl = f - fh;
    let a = ls_mul_ex(fh, LS_LN2_H12);
    let b = ls_mul_ex(fl, LS_LN2_H12) + mul_rn(f, LS_LN2_L12);
    let r = ls_fast_two_sum(a, b);
    let d = ls_exp_poly(r.hi, r.lo);
    let v = ls_ldexp(d.hi + d.lo, i32(kf));
    return select(select(v, 0.0, x < -126.0), ls_inf(), x >= 128.0);
}

fn ls_exp(x: f32) -> f32 {
    let e = ls_exp_parts(x);
    let v = ls_ldexp(e.hi + e.lo, e.n);
    return select(select(max(v, LS_MIN_NORMAL), 0.0, x < LS_EXP_X_MIN), ls_inf(), x >= LS_EXP_X_OVF);
}

fn ls_log_arg(x: f32) -> f32 {
    return select(x, 1.0, !(x >= LS_MIN_NORMAL) || x == ls_inf());
}

fn ls_log(x: f32) -> f32 {
    let v = ls_log_sum(ls_log_parts(ls_log_arg(x), 0.0));
    return select(select(v, -ls_inf(), !(x >= LS_MIN_NORMAL)), ls_inf(), x == ls_inf());
}

fn ls_log2(x: f32) -> f32 {
    let lp = ls_log_parts(ls_log_arg(x), 0.0);
    let hh = ls_head12(lp.hi);
    let hl = lp.hi - hh;
    let p = ls_mul_ex(hh, LS_LOG2E_H12);
    let pe = ls_mul_ex(hl, LS_LOG2E_H12) + (mul_rn(lp.hi, LS_LOG2E_L12) + mul_rn(lp.lo, LS_LOG2E));
    let s = ls_fast_two_sum(lp.k, p);
    let v = s.hi + (s.lo + pe);
    return select(select(v, -ls_inf(), !(x >= LS_MIN_NORMAL)), ls_inf(), x == ls_inf());
}

fn ls_log1p(x: f32) -> f32 {
    let xs = select(x, 0.0, x <= -1.0 || x == ls_inf());
    let u = ls_two_sum(1.0, xs);
    let v = ls_log_sum(ls_log_parts(u.hi, u.lo));
    let w = select(v, ls_ldexp(x, 0), abs(x) < LS_TWO_M26);
    return select(select(w, -ls_inf(), x <= -1.0), ls_inf(), x == ls_inf());
}

fn ls_sqrt_reduce(x: f32) -> LsQuarter {
    let b = bitcast<u32>(x);
    let eb = i32((b >> 23u) & 0xffu);
    let k = (eb - 127) >> 1u;
    return LsQuarter(bitcast<f32>((b & 0x007fffffu) | (u32(eb - k - k) << 23u)), k);
}

fn ls_rsqrt_core(m: f32) -> LsRecip {
    let y0 = bitcast<f32>(0x5f3759dfu - (bitcast<u32>(m) >> 1u));
    let y1 = mul_rn(y0, ls_keep(1.5 - mul_rn(mul_rn(ls_mul_ex(0.5, m), y0), y0)));
    let y = ls_head12(y1);
    let p = ls_two_prod(m, ls_mul_ex(y, y));
    let r = (1.0 - p.hi) - p.lo;
    return LsRecip(y, mul_rn(r, ls_keep(0.5 + mul_rn(r, 0.375 + mul_rn(r, 0.3125)))));
}

fn ls_rsqrt(x: f32) -> f32 {
    let q = ls_sqrt_reduce(ls_log_arg(x));
    let rc = ls_rsqrt_core(q.m);
    let v = ls_ldexp(rc.y + mul_rn(rc.y, rc.c), -q.k);
    let w = select(select(v, ls_inf(), x < LS_MIN_NORMAL), 0.0, x == ls_inf());
    return select(w, ls_nan(), x <= -LS_MIN_NORMAL);
}

fn ls_sqrt(x: f32) -> f32 {
    let q = ls_sqrt_reduce(ls_log_arg(x));
    let rc = ls_rsqrt_core(q.m);
    let mh = ls_head12(q.m);
    let ml = q.m - mh;
    let u = ls_mul_ex(mh, rc.y);
    let ue = ls_mul_ex(ml, rc.y);
    let s = u + (ue + mul_rn(u + ue, rc.c));
    let v = ls_ldexp(s, q.k);
    let w = select(select(v, 0.0, x < LS_MIN_NORMAL), ls_inf(), x == ls_inf());
    return select(w, ls_nan(), x <= -LS_MIN_NORMAL);
}

fn ls_mant(x: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(x) & 0x007fffffu) | 0x3f800000u);
}

fn ls_expo(x: f32) -> i32 {
    return i32((bitcast<u32>(x) >> 23u) & 0xffu);
}

fn ls_with_sign(v: f32, s: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) | (s & 0x80000000u));
}

fn ls_recip(x: f32) -> f32 {
    let rc = ls_recip_core(ls_mant(x));
    let v = ls_ldexp(rc.y + mul_rn(rc.y, rc.c), 127 - ls_expo(x));
    let w = select(select(v, ls_inf(), abs(x) < LS_MIN_NORMAL), 0.0, abs(x) == ls_inf());
    return ls_with_sign(w, bitcast<u32>(x));
}

fn ls_div(a: f32, b: f32) -> f32 {
    let q = ls_div_mant(ls_mant(a), ls_mant(b));
    let v = ls_ldexp(q.hi, ls_expo(a) - ls_expo(b));
    let w = select(select(v, ls_inf(), abs(b) < LS_MIN_NORMAL || abs(a) == ls_inf()), 0.0, abs(a) < LS_MIN_NORMAL || abs(b) == ls_inf());
    return ls_with_sign(w, bitcast<u32>(a) ^ bitcast<u32>(b));
}

fn ls_exp_small_scaled(e: LsExpParts) -> LsDd {
    let far = e.n < -60;
    return LsDd(select(ls_ldexp(e.hi, e.n), 0.0, far), select(ls_ldexp(e.lo, e.n), 0.0, far));
}

fn ls_sigmoid(x: f32) -> f32 {
    let e = ls_exp_parts(-abs(x));
    let es = ls_exp_small_scaled(e);
    let d = ls_fast_two_sum(1.0, es.hi);
    let neg = x < 0.0;
    let q = ls_div_core(select(1.0, e.hi, neg), select(0.0, e.lo, neg), d.hi, d.lo + es.lo);
    return ls_ldexp(q.hi, select(0, e.n, neg));
}

fn ls_silu(x: f32) -> f32 {
    let xc = select(min(max(x, -104.0), 32.0), 0.0, abs(x) < LS_TWO_M60);
    let e = ls_exp_parts(-abs(xc));
    let es = ls_exp_small_scaled(e);
    let d = ls_fast_two_sum(1.0, es.hi);
    let neg = xc < 0.0;
    let p = ls_two_prod(xc, e.hi);
    let nh = select(xc, p.hi, neg);
    let nl = select(0.0, p.lo + mul_rn(xc, e.lo), neg);
    let q = ls_div_core(nh, nl, d.hi, d.lo + es.lo);
    let v = ls_ldexp(q.hi, select(0, e.n, neg));
    return select(select(v, x, x > 32.0), ls_ldexp(x, -1), abs(x) < LS_TWO_M60);
}

fn ls_softplus(x: f32) -> f32 {
    let e = ls_exp_parts(-abs(x));
    let es = ls_exp_small_scaled(e);
    let u = ls_fast_two_sum(1.0, es.hi);
    let l = ls_log_sum(ls_log_parts(u.hi, u.lo + es.lo));
    let far0 = ls_ldexp(e.hi + e.lo, e.n);
    let far = select(max(far0, LS_MIN_NORMAL), 0.0, x < LS_EXP_X_MIN);
    return select(max(x, 0.0) + l, far, x < -20.0);
}

fn ls_erf(x: f32) -> f32 {
    let ax = select(abs(x), 0.0, abs(x) < LS_MIN_NORMAL);
    let a1 = min(ax, 1.0);
    let tiny = a1 < LS_TWO_M60;
    let xs = select(a1, ls_mul_ex(a1, LS_TWO_P64), tiny);
    let az = select(a1, 0.0, a1 < LS_TWO_M30);
    let z = mul_rn(az, az);
    let g = LS_ERF_S0 + mul_rn(z, LS_ERF_S1 + mul_rn(z, LS_ERF_S2 + mul_rn(z, LS_ERF_S3 + mul_rn(z, LS_ERF_S4 + mul_rn(z, LS_ERF_S5 + mul_rn(z, LS_ERF_S6))))));
    let ps = xs + mul_rn(xs, g);
    let small = select(ps, ls_mul_ex(ps, LS_TWO_M64), tiny);
    let at = min(max(ax, 1.0), LS_ERF_X_ONE);
    let hi = at >= 2.0;
    let t = at - select(1.5, 3.0, hi);
    var r = select(LS_ERF_A7, LS_ERF_B7, hi);
    r = select(LS_ERF_A6, LS_ERF_B6, hi) + mul_rn(t, r);
    r = select(LS_ERF_A5, LS_ERF_B5, hi) + mul_rn(t, r);
    r = select(LS_ERF_A4, LS_ERF_B4, hi) + mul_rn(t, r);
    r = select(LS_ERF_A3, LS_ERF_B3, hi) + mul_rn(t, r);
    r = select(LS_ERF_A2, LS_ERF_B2, hi) + mul_rn(t, r);
    r = select(LS_ERF_A1, LS_ERF_B1, hi) + mul_rn(t, r);
    r = select(LS_ERF_A0, LS_ERF_B0, hi) + mul_rn(t, r);
    let zz = ls_two_prod(at, at);
    let e = ls_exp_parts(-zz.hi);
    let ec = e.lo - mul_rn(e.hi, zz.lo);
    let c = ls_ldexp(mul_rn(e.hi, r) + mul_rn(ec, r), e.n);
    let v = select(select(small, 1.0 - c, ax >= 1.0), 1.0, ax >= LS_ERF_X_ONE);
    return ls_with_sign(select(v, 0.0, ax == 0.0), bitcast<u32>(x));
}
