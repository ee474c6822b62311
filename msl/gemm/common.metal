#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// GEMM shared pieces in MSL: parameters, controls, the exact block dot and scale (the same order as wgsl/gemm/common.wgsl: 32 products ascending from +0.0).
using namespace metal;

struct LsGemmParams { uint zero; uint m; uint n; uint k; uint n_base; uint ldo; uint groups_x; };

// A decoded block of 32 weights, columns ascending.
struct LsW32 { float4 v[8]; };

// Eight decoded weights, columns ascending.
struct LsW8 { float4 a; float4 b; };

// The x row block b reads: the neighbouring row in the last block under control 3.
inline uint ls_x_row(LsGemmParams P, uint m, uint b) {
    return (CONTROL == 3u && b + 1u == (P.k >> 5u)) ? metal::min(m + 1u, P.m - 1u) : m;
}

inline void ls_store_out(LsGemmParams P, device float* out, uint m, uint n, float v) {
    if (CONTROL == 4u && m == 0u && n == 0u) { return; }
    out[m * P.ldo + P.n_base + n] = v;
}

// s + a.x c.x + a.y c.y + a.z c.z + a.w c.w, one rounding per step, left to right.
inline float ls_dot4(float s, float4 a, float4 c) {
    float t = s + a.x * c.x;
    t = t + a.y * c.y;
    t = t + a.z * c.z;
    return t + a.w * c.w;
}
