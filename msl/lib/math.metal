#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Software transcendentals from unfused products, adds and bit manipulation; identical to wgsl/lib/math.wgsl and src/numerics/math, line by line.
using namespace metal;
// The IEEE product rounded on its own, at or below 2^-126 flushed to a signed zero.
inline float mul_rn(float a, float b) { return ls_flp(as_type<float>(as_type<uint>(a * b) ^ LS_ZERO)); }

// A product known to be exact, kept opaque like mul_rn so no compiler rewrites the error-free sums around it.
inline float ls_mul_ex(float a, float b) { return mul_rn(a, b); }

// The value itself, hidden from algebraic rewrites ((a + b) - a to b, x * (1 + y) to fma(x, y, x)) that change bits.
inline float ls_keep(float x) { return as_type<float>(as_type<uint>(x) ^ LS_ZERO); }

// Runtime infinity and NaN (constant expressions may not hold them).
inline float ls_inf() { return as_type<float>(0x7f800000u ^ LS_ZERO); }
inline float ls_nan() { return as_type<float>(0x7fc00000u ^ LS_ZERO); }

// parts.rs constants.
constant float LS_LN2_HI = 0x1.62e4p-1f;
constant float LS_LN2_LO = 0x1.7f7d1cp-20f;
constant float LS_LOG2E = 0x1.715476p+0f;
constant float LS_MIN_NORMAL = 0x1p-126f;
constant float LS_TWO_M60 = 0x1p-60f;
constant float LS_TWO_M40 = 0x1p-40f;
constant float LS_TWO_M30 = 0x1p-30f;
constant float LS_RECIP_P0 = 0x1.42284ap+0f;
constant float LS_RECIP_P1 = -0x1.702dfep-2f;
constant float LS_EXP_P2 = 0x1p-1f;
constant float LS_EXP_P3 = 0x1.55549p-3f;
constant float LS_EXP_P4 = 0x1.5554bep-5f;
constant float LS_EXP_P5 = 0x1.123bp-7f;
constant float LS_EXP_P6 = 0x1.6d7cap-10f;
constant float LS_LOG_P0 = 0x1.55557cp-1f;
constant float LS_LOG_P1 = 0x1.995cc2p-2f;
constant float LS_LOG_P2 = 0x1.321c16p-2f;

// math.rs constants.
constant float LS_TWO_M26 = 0x1p-26f;
constant float LS_TWO_P64 = 0x1p+64f;
constant float LS_TWO_M64 = 0x1p-64f;
constant float LS_EXP_X_MIN = -0x1.5d589ep+6f;
constant float LS_EXP_X_OVF = 0x1.62e43p+6f;
constant float LS_LN2_H12 = 0x1.62ep-1f;
constant float LS_LN2_L12 = 0x1.0bfbe8p-15f;
constant float LS_LOG2E_H12 = 0x1.716p+0f;
constant float LS_LOG2E_L12 = -0x1.7135a8p-13f;
constant float LS_ERF_S0 = 0x1.06eba8p-3f;
constant float LS_ERF_S1 = -0x1.81274p-2f;
constant float LS_ERF_S2 = 0x1.ce2d5p-4f;
constant float LS_ERF_S3 = -0x1.b7fe9p-6f;
constant float LS_ERF_S4 = 0x1.542e1p-8f;
constant float LS_ERF_S5 = -0x1.a50b0ep-11f;
constant float LS_ERF_S6 = 0x1.4c344ep-14f;
constant float LS_ERF_A0 = 0x1.494dbp-2f;
constant float LS_ERF_A1 = -0x1.4f1978p-3f;
constant float LS_ERF_A2 = 0x1.37ea72p-4f;
constant float LS_ERF_A3 = -0x1.0dcf5cp-5f;
constant float LS_ERF_A4 = 0x1.b5ffbcp-7f;
constant float LS_ERF_A5 = -0x1.4e225cp-8f;
constant float LS_ERF_A6 = 0x1.038c7ep-9f;
constant float LS_ERF_A7 = -0x1.a4cd9ep-11f;
constant float LS_ERF_B0 = 0x1.6e982p-3f;
constant float LS_ERF_B1 = -0x1.bd6bap-5f;
constant float LS_ERF_B2 = 0x1.04451p-6f;
constant float LS_ERF_B3 = -0x1.24e96p-8f;
constant float LS_ERF_B4 = 0x1.44aa54p-10f;
constant float LS_ERF_B5 = -0x1.5b8768p-12f;
constant float LS_ERF_B6 = 0x1.7f96a8p-15f;
constant float LS_ERF_B7 = -0x1.adc9d4p-15f;
constant float LS_ERF_X_ONE = 0x1.f5c29p+1f;

struct LsDd { float hi; float lo; };
struct LsRecip { float y; float c; };
struct LsExpParts { int n; float hi; float lo; };
struct LsLogParts { float k; float hi; float lo; };
struct LsQuarter { float m; int k; };

inline LsDd ls_two_sum(float a, float b) {
    const auto s = ls_keep(a + b);
    const auto bb = ls_keep(s - a);
    return LsDd{s, (a - (s - bb)) + (b - bb)};
}

inline LsDd ls_fast_two_sum(float a, float b) {
    const auto s = ls_keep(a + b);
    return LsDd{s, b - (s - a)};
}

inline float ls_head12(float x) {
    return as_type<float>((as_type<uint>(x) + 0x800u) & 0xfffff000u);
}

inline LsDd ls_two_prod(float a, float b) {
    const auto p = mul_rn(a, b);
    const auto ah = ls_head12(a);
    const auto al = a - ah;
    const auto bh = ls_head12(b);
    const auto bl = b - bh;
    return LsDd{p, (((ls_mul_ex(ah, bh) - p) + ls_mul_ex(ah, bl)) + ls_mul_ex(al, bh)) + ls_mul_ex(al, bl)};
}

inline float ls_ldexp(float v, int n) {
    const auto b = as_type<uint>(v);
    const auto e = int((b >> 23u) & 0xffu);
    const auto en = e + n;
    const auto sign = b & 0x80000000u;
    const auto scaled = as_type<float>((b & 0x807fffffu) | (uint(clamp(en, 1, 254)) << 23u));
    const auto r = select(scaled, as_type<float>(sign | 0x7f800000u), en > 254);
    return select(r, as_type<float>(sign), e == 0 || en < 1);
}

inline LsRecip ls_recip_core(float m) {
    const auto y0 = LS_RECIP_P0 + mul_rn(LS_RECIP_P1, m);
    const auto y1 = y0 + mul_rn(y0, ls_keep(1.0f - mul_rn(m, y0)));
    const auto y = ls_head12(y1);
    const auto mh = ls_head12(m);
    const auto ml = m - mh;
    const auto r = (1.0f - ls_mul_ex(mh, y)) - ls_mul_ex(ml, y);
    const auto c = mul_rn(r, ls_keep(1.0f + mul_rn(r, ls_keep(1.0f + mul_rn(r, ls_keep(1.0f + r))))));
    return LsRecip{y, c};
}

inline LsDd ls_div_core(float nh, float nl, float dh, float dl) {
    const auto rc = ls_recip_core(dh);
    const auto nhh = ls_head12(nh);
    const auto nhl = nh - nhh;
    const auto u = ls_mul_ex(nhh, rc.y);
    const auto ue = ls_mul_ex(nhl, rc.y);
    const auto w = u + ue;
    const auto v = mul_rn(nl - mul_rn(w, dl), rc.y);
    return ls_fast_two_sum(u, ue + (v + mul_rn(w + v, rc.c)));
}

inline LsDd ls_exp_poly(float rh, float rl) {
    const auto z = mul_rn(rh, rh);
    const auto p = LS_EXP_P2 + mul_rn(rh, LS_EXP_P3 + mul_rn(rh, LS_EXP_P4 + mul_rn(rh, LS_EXP_P5 + mul_rn(rh, LS_EXP_P6))));
    const auto q = mul_rn(z, ls_keep(p));
    const auto s = rl + (q + mul_rn(rl, rh));
    const auto ph = ls_keep(rh + s);
    const auto pl = (rh - ph) + s;
    const auto eh = ls_keep(1.0f + ph);
    return LsDd{eh, ((1.0f - eh) + ph) + pl};
}

inline LsExpParts ls_exp_parts(float x) {
    const auto xc = select(min(max(x, -104.0f), 100.0f), 0.0f, metal::abs(x) < LS_TWO_M40);
    const auto kf = metal::floor(mul_rn(xc, LS_LOG2E) + 0.5f);
    const auto t = xc - ls_mul_ex(kf, LS_LN2_HI);
    const auto r = ls_two_sum(t, -mul_rn(kf, LS_LN2_LO));
    const auto d = ls_exp_poly(r.hi, r.lo);
    return LsExpParts{int(kf), d.hi, d.lo};
}

inline LsLogParts ls_log_parts(float uh, float ul) {
    const auto ix = as_type<int>(uh) - 0x3f3504f3;
    const auto k = ix >> 23u;
    const auto m = as_type<float>((ix & 0x007fffff) + 0x3f3504f3);
    const auto f = m - 1.0f;
    const auto fs = ls_ldexp(ul, -k);
    const auto fl = select(fs, 0.0f, metal::abs(fs) < LS_TWO_M60);
    const auto n = ls_two_sum(f, fl);
    const auto dh = ls_keep(2.0f + n.hi);
    const auto dl = (n.hi - (dh - 2.0f)) + n.lo;
    const auto s = ls_div_core(n.hi, n.lo, dh, dl);
    const auto sz = select(s.hi, 0.0f, metal::abs(s.hi) < LS_TWO_M30);
    const auto z = mul_rn(sz, sz);
    const auto t = mul_rn(mul_rn(s.hi, z), LS_LOG_P0 + mul_rn(z, LS_LOG_P1 + mul_rn(z, LS_LOG_P2)));
    const auto d = ls_fast_two_sum(ls_mul_ex(2.0f, s.hi), ls_mul_ex(2.0f, s.lo) + t);
    return LsLogParts{float(k), d.hi, d.lo};
}

inline float ls_log_sum(LsLogParts lp) {
    const auto s = ls_fast_two_sum(ls_mul_ex(lp.k, LS_LN2_HI), lp.hi);
    return s.hi + (s.lo + (lp.lo + mul_rn(lp.k, LS_LN2_LO)));
}

inline float ls_exp2(float x) {
    const auto xc = select(min(max(x, -130.0f), 130.0f), 0.0f, metal::abs(x) < LS_TWO_M40);
    const auto kf = metal::floor(xc + 0.5f);
    const auto f = xc - kf;
    const auto fh = ls_head12(f);
    const auto fl = f - fh;
    const auto a = ls_mul_ex(fh, LS_LN2_H12);
    const auto b = ls_mul_ex(fl, LS_LN2_H12) + mul_rn(f, LS_LN2_L12);
    const auto r = ls_fast_two_sum(a, b);
    const auto d = ls_exp_poly(r.hi, r.lo);
    const auto v = ls_ldexp(d.hi + d.lo, int(kf));
    return select(select(v, 0.0f, x < -126.0f), ls_inf(), x >= 128.0f);
}

inline float ls_exp(float x) {
    const auto e = ls_exp_parts(x);
    const auto v = ls_ldexp(e.hi + e.lo, e.n);
    return select(select(max(v, LS_MIN_NORMAL), 0.0f, x < LS_EXP_X_MIN), ls_inf(), x >= LS_EXP_X_OVF);
}

inline float ls_log_arg(float x) {
    return select(x, 1.0f, !(x >= LS_MIN_NORMAL) || x == ls_inf());
}

inline float ls_log(float x) {
    const auto v = ls_log_sum(ls_log_parts(ls_log_arg(x), 0.0f));
    return select(select(v, -ls_inf(), !(x >= LS_MIN_NORMAL)), ls_inf(), x == ls_inf());
}

inline float ls_log2(float x) {
    const auto lp = ls_log_parts(ls_log_arg(x), 0.0f);
    const auto hh = ls_head12(lp.hi);
    const auto hl = lp.hi - hh;
    const auto p = ls_mul_ex(hh, LS_LOG2E_H12);
    const auto pe = ls_mul_ex(hl, LS_LOG2E_H12) + (mul_rn(lp.hi, LS_LOG2E_L12) + mul_rn(lp.lo, LS_LOG2E));
    const auto s = ls_fast_two_sum(lp.k, p);
    const auto v = s.hi + (s.lo + pe);
    return select(select(v, -ls_inf(), !(x >= LS_MIN_NORMAL)), ls_inf(), x == ls_inf());
}

inline float ls_log1p(float x) {
    const auto xs = select(x, 0.0f, x <= -1.0f || x == ls_inf());
    const auto u = ls_two_sum(1.0f, xs);
    const auto v = ls_log_sum(ls_log_parts(u.hi, u.lo));
    const auto w = select(v, ls_ldexp(x, 0), metal::abs(x) < LS_TWO_M26);
    return select(select(w, -ls_inf(), x <= -1.0f), ls_inf(), x == ls_inf());
}

inline LsQuarter ls_sqrt_reduce(float x) {
    const auto b = as_type<uint>(x);
    const auto eb = int((b >> 23u) & 0xffu);
    const auto k = (eb - 127) >> 1u;
    return LsQuarter{as_type<float>((b & 0x007fffffu) | (uint(eb - k - k) << 23u)), k};
}

inline LsRecip ls_rsqrt_core(float m) {
    const auto y0 = as_type<float>(0x5f3759dfu - (as_type<uint>(m) >> 1u));
    const auto y1 = mul_rn(y0, ls_keep(1.5f - mul_rn(mul_rn(ls_mul_ex(0.5f, m), y0), y0)));
    const auto y = ls_head12(y1);
    const auto p = ls_two_prod(m, ls_mul_ex(y, y));
    const auto r = (1.0f - p.hi) - p.lo;
    return LsRecip{y, mul_rn(r, ls_keep(0.5f + mul_rn(r, 0.375f + mul_rn(r, 0.3125f))))};
}

inline float ls_rsqrt(float x) {
    const auto q = ls_sqrt_reduce(ls_log_arg(x));
    const auto rc = ls_rsqrt_core(q.m);
    const auto v = ls_ldexp(rc.y + mul_rn(rc.y, rc.c), -q.k);
    const auto w = select(select(v, ls_inf(), x < LS_MIN_NORMAL), 0.0f, x == ls_inf());
    return select(w, ls_nan(), x <= -LS_MIN_NORMAL);
}

inline float ls_sqrt(float x) {
    const auto q = ls_sqrt_reduce(ls_log_arg(x));
    const auto rc = ls_rsqrt_core(q.m);
    const auto mh = ls_head12(q.m);
    const auto ml = q.m - mh;
    const auto u = ls_mul_ex(mh, rc.y);
    const auto ue = ls_mul_ex(ml, rc.y);
    const auto s = u + (ue + mul_rn(u + ue, rc.c));
    const auto v = ls_ldexp(s, q.k);
    const auto w = select(select(v, 0.0f, x < LS_MIN_NORMAL), ls_inf(), x == ls_inf());
    return select(w, ls_nan(), x <= -LS_MIN_NORMAL);
}

inline float ls_mant(float x) {
    return as_type<float>((as_type<uint>(x) & 0x007fffffu) | 0x3f800000u);
}

inline int ls_expo(float x) {
    return int((as_type<uint>(x) >> 23u) & 0xffu);
}

inline float ls_with_sign(float v, uint s) {
    return as_type<float>(as_type<uint>(v) | (s & 0x80000000u));
}

inline float ls_recip(float x) {
    const auto rc = ls_recip_core(ls_mant(x));
    const auto v = ls_ldexp(rc.y + mul_rn(rc.y, rc.c), 127 - ls_expo(x));
    const auto w = select(select(v, ls_inf(), metal::abs(x) < LS_MIN_NORMAL), 0.0f, metal::abs(x) == ls_inf());
    return ls_with_sign(w, as_type<uint>(x));
}

inline float ls_div(float a, float b) {
    const auto q = ls_div_core(ls_mant(a), 0.0f, ls_mant(b), 0.0f);
    const auto v = ls_ldexp(q.hi, ls_expo(a) - ls_expo(b));
    const auto w = select(select(v, ls_inf(), metal::abs(b) < LS_MIN_NORMAL || metal::abs(a) == ls_inf()), 0.0f, metal::abs(a) < LS_MIN_NORMAL || metal::abs(b) == ls_inf());
    return ls_with_sign(w, as_type<uint>(a) ^ as_type<uint>(b));
}

inline LsDd ls_exp_small_scaled(LsExpParts e) {
    const auto far = e.n < -60;
    return LsDd{select(ls_ldexp(e.hi, e.n), 0.0f, far), select(ls_ldexp(e.lo, e.n), 0.0f, far)};
}

inline float ls_sigmoid(float x) {
    const auto e = ls_exp_parts(-metal::abs(x));
    const auto es = ls_exp_small_scaled(e);
    const auto d = ls_fast_two_sum(1.0f, es.hi);
    const auto neg = x < 0.0f;
    const auto q = ls_div_core(select(1.0f, e.hi, neg), select(0.0f, e.lo, neg), d.hi, d.lo + es.lo);
    return ls_ldexp(q.hi, select(0, e.n, neg));
}

inline float ls_silu(float x) {
    const auto xc = select(min(max(x, -104.0f), 32.0f), 0.0f, metal::abs(x) < LS_TWO_M60);
    const auto e = ls_exp_parts(-metal::abs(xc));
    const auto es = ls_exp_small_scaled(e);
    const auto d = ls_fast_two_sum(1.0f, es.hi);
    const auto neg = xc < 0.0f;
    const auto p = ls_two_prod(xc, e.hi);
    const auto nh = select(xc, p.hi, neg);
    const auto nl = select(0.0f, p.lo + mul_rn(xc, e.lo), neg);
    const auto q = ls_div_core(nh, nl, d.hi, d.lo + es.lo);
    const auto v = ls_ldexp(q.hi, select(0, e.n, neg));
    return select(select(v, x, x > 32.0f), ls_ldexp(x, -1), metal::abs(x) < LS_TWO_M60);
}

inline float ls_softplus(float x) {
    const auto e = ls_exp_parts(-metal::abs(x));
    const auto es = ls_exp_small_scaled(e);
    const auto u = ls_fast_two_sum(1.0f, es.hi);
    const auto l = ls_log_sum(ls_log_parts(u.hi, u.lo + es.lo));
    const auto far0 = ls_ldexp(e.hi + e.lo, e.n);
    const auto far = select(max(far0, LS_MIN_NORMAL), 0.0f, x < LS_EXP_X_MIN);
    return select(max(x, 0.0f) + l, far, x < -20.0f);
}

inline float ls_erf(float x) {
    const auto ax = select(metal::abs(x), 0.0f, metal::abs(x) < LS_MIN_NORMAL);
    const auto a1 = min(ax, 1.0f);
    const auto tiny = a1 < LS_TWO_M60;
    const auto xs = select(a1, ls_mul_ex(a1, LS_TWO_P64), tiny);
    const auto az = select(a1, 0.0f, a1 < LS_TWO_M30);
    const auto z = mul_rn(az, az);
    const auto g = LS_ERF_S0 + mul_rn(z, LS_ERF_S1 + mul_rn(z, LS_ERF_S2 + mul_rn(z, LS_ERF_S3 + mul_rn(z, LS_ERF_S4 + mul_rn(z, LS_ERF_S5 + mul_rn(z, LS_ERF_S6))))));
    const auto ps = xs + mul_rn(xs, g);
    const auto small = select(ps, ls_mul_ex(ps, LS_TWO_M64), tiny);
    const auto at = min(max(ax, 1.0f), LS_ERF_X_ONE);
    const auto hi = at >= 2.0f;
    const auto t = at - select(1.5f, 3.0f, hi);
    auto r = select(LS_ERF_A7, LS_ERF_B7, hi);
    r = select(LS_ERF_A6, LS_ERF_B6, hi) + mul_rn(t, r);
    r = select(LS_ERF_A5, LS_ERF_B5, hi) + mul_rn(t, r);
    r = select(LS_ERF_A4, LS_ERF_B4, hi) + mul_rn(t, r);
    r = select(LS_ERF_A3, LS_ERF_B3, hi) + mul_rn(t, r);
    r = select(LS_ERF_A2, LS_ERF_B2, hi) + mul_rn(t, r);
    r = select(LS_ERF_A1, LS_ERF_B1, hi) + mul_rn(t, r);
    r = select(LS_ERF_A0, LS_ERF_B0, hi) + mul_rn(t, r);
    const auto zz = ls_two_prod(at, at);
    const auto e = ls_exp_parts(-zz.hi);
    const auto ec = e.lo - mul_rn(e.hi, zz.lo);
    const auto c = ls_ldexp(mul_rn(e.hi, r) + mul_rn(ec, r), e.n);
    const auto v = select(select(small, 1.0f - c, ax >= 1.0f), 1.0f, ax >= LS_ERF_X_ONE);
    return ls_with_sign(select(v, 0.0f, ax == 0.0f), as_type<uint>(x));
}
