#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// GEMM operand access in MSL for e2m1 expert weights [N,K/2] (low nibble = even column) with one e8m0 scale per 32 along K, as wgsl/gemm/fmt_e2m1.wgsl.
using namespace metal;

inline float4 ls_e2m1x4(uint word) {
    return float4(e2m1_value(word & 15u), e2m1_value((word >> 4u) & 15u), e2m1_value((word >> 8u) & 15u), e2m1_value((word >> 12u) & 15u));
}

// Block b of weight row n.
inline LsW32 ls_wblock(const device uint4* w, uint n, uint b, uint k) {
    const uint4 v = w[(n * k + b * 32u) >> 5u];
    LsW32 r;
    r.v[0] = ls_e2m1x4(v.x);
    r.v[1] = ls_e2m1x4(v.x >> 16u);
    r.v[2] = ls_e2m1x4(v.y);
    r.v[3] = ls_e2m1x4(v.y >> 16u);
    r.v[4] = ls_e2m1x4(v.z);
    r.v[5] = ls_e2m1x4(v.z >> 16u);
    r.v[6] = ls_e2m1x4(v.w);
    r.v[7] = ls_e2m1x4(v.w >> 16u);
    return r;
}

// Eight consecutive weights of row n starting at column b*32 + q*8.
inline LsW8 ls_wvals8(const device uint4* w, uint n, uint b, uint q, uint k) {
    const uint word = w[(n * k + b * 32u) >> 5u][q];
    return LsW8{ls_e2m1x4(word), ls_e2m1x4(word >> 16u)};
}

inline float ls_wscale(const device uint* ws, uint n, uint b, uint k) {
    const uint idx = n * (k >> 5u) + b;
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

// acc + a w: the products of e4m3 activations and the format's weights are exact and never tiny, so the fused form has the unfused bits (N2).
inline float4 ls_gmac4(float4 acc, float a, float4 w) { return fma(float4(a), w, acc); }
