#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// A block's scaled dot in MSL: 32 products ascending from +0.0, times the activation and weight scales (the first block's doubled under control 5).
using namespace metal;

inline float ls_block_scale(LsGemmParams P, const device float* xs, const device uint* ws, uint m, uint n, uint b) {
    const float sc = xs[m * (P.k >> 5u) + b] * ls_wscale(ws, n, b, P.k);
    return (CONTROL == 5u && b == 0u) ? sc * 2.0f : sc;
}

inline float ls_block_dot(LsGemmParams P, const device float4* x, uint m, uint b, LsW32 wv) {
    const uint base = (m * P.k + b * 32u) >> 2u;
    float s = ls_dot4(0.0f, x[base], wv.v[0]);
    for (uint i = 1u; i < 8u; i++) { s = ls_dot4(s, x[base + i], wv.v[i]); }
    return s;
}
