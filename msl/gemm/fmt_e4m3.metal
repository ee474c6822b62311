#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// GEMM operand access in MSL for e4m3 weights [N,K] with e8m0 32x32 block scales, as wgsl/gemm/fmt_e4m3.wgsl.
using namespace metal;

inline float4 ls_e4m3x4(uint word) {
    return float4(e4m3_value(word & 0xffu), e4m3_value((word >> 8u) & 0xffu), e4m3_value((word >> 16u) & 0xffu), e4m3_value(word >> 24u));
}

// Block b of weight row n.
inline LsW32 ls_wblock(const device uint4* w, uint n, uint b, uint k) {
    const uint base = (n * k + b * 32u) >> 4u;
    const uint4 v0 = w[base];
    const uint4 v1 = w[base + 1u];
    LsW32 r;
    r.v[0] = ls_e4m3x4(v0.x);
    r.v[1] = ls_e4m3x4(v0.y);
    r.v[2] = ls_e4m3x4(v0.z);
    r.v[3] = ls_e4m3x4(v0.w);
    r.v[4] = ls_e4m3x4(v1.x);
    r.v[5] = ls_e4m3x4(v1.y);
    r.v[6] = ls_e4m3x4(v1.z);
    r.v[7] = ls_e4m3x4(v1.w);
    return r;
}

// Eight consecutive weights of row n starting at column b*32 + q*8.
inline LsW8 ls_wvals8(const device uint4* w, uint n, uint b, uint q, uint k) {
    const uint4 v = w[(n * k + b * 32u + q * 8u) >> 4u];
    const bool h = (q & 1u) == 1u;
    return LsW8{ls_e4m3x4(h ? v.z : v.x), ls_e4m3x4(h ? v.w : v.y)};
}

inline float ls_wscale(const device uint* ws, uint n, uint b, uint k) {
    const uint idx = (n >> 5u) * (k >> 5u) + b;
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

// acc + a w: the products of e4m3 activations and the format's weights are exact and never tiny, so the fused form has the unfused bits (N2).
inline float4 ls_gmac4(float4 acc, float a, float4 w) { return fma(float4(a), w, acc); }
