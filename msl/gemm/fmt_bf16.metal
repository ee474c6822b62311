#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// GEMM operand access in MSL for bf16 weights [N,K] (two per word, low half first) with bf16-valued activations and unit scales, as wgsl/gemm/fmt_bf16.wgsl.
using namespace metal;

inline float4 ls_bf16x4(uint a, uint b) {
    return float4(as_type<float>(a << 16u), as_type<float>(a & 0xffff0000u), as_type<float>(b << 16u), as_type<float>(b & 0xffff0000u));
}

// Eight consecutive weights of row n starting at column b*32 + q*8.
inline LsW8 ls_wvals8(const device uint4* w, uint n, uint b, uint q, uint k) {
    const uint4 v = w[(n * k + b * 32u + q * 8u) >> 3u];
    return LsW8{ls_bf16x4(v.x, v.y), ls_bf16x4(v.z, v.w)};
}

// acc + a w with bf16 products below 2^-103 dropped, so every block sum stays a multiple of 2^-126 (N7): a multiply and an add.
inline float4 ls_gmac4(float4 acc, float a, float4 w) { return acc + ls_term4(a * w); }

// A block's scale: 1, doubled for the first block under control 5 (no scale buffers are read).
inline float ls_block_scale(LsGemmParams P, const device float* xs, const device uint* ws, uint m, uint n, uint b) {
    return (CONTROL == 5u && b == 0u) ? 2.0f : 1.0f;
}
