#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Storage formats (bf16, e4m3fn, e2m1, e8m0) by bit manipulation; identical to wgsl/lib/formats.wgsl and src/numerics/formats.rs.
using namespace metal;
#ifndef CONTROL
#define CONTROL 0u
#endif
inline uint rne_shift(uint m, uint shift) {
    if (shift == 0u) { return m; }
    if (shift > 24u) { return 0u; }
    const auto q = m >> shift;
    const auto rem = m & ((1u << shift) - 1u);
    const auto halfway = 1u << (shift - 1u);
    return q + select(0u, 1u, rem > halfway || (rem == halfway && (q & 1u) == 1u));
}

inline uint minifloat_code(float x, uint mbits, int emin, uint max_code) {
    const auto b = as_type<uint>(x) & 0x7fffffffu;
    if (b >= 0x7f800000u) { return max_code; }
    const auto exp_bits = int(b >> 23u);
    auto mant = (b & 0x7fffffu) | 0x800000u;
    auto e = exp_bits - 127;
    if (exp_bits == 0) { mant = b & 0x7fffffu; e = -126; }
    const auto shift = uint(23 - int(mbits) + max(emin - e, 0));
    const auto code = rne_shift(mant, shift) + (uint(max(e - emin, 0)) << mbits);
    return min(code, max_code);
}

inline uint bf16_bits(float x) {
    const auto b = as_type<uint>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

inline float bf16_value(uint h) {
    return as_type<float>(h << 16u);
}

inline float round_bf16(float x) {
    return bf16_value(bf16_bits(x));
}

inline uint e4m3_code(float x) {
    const auto sign = (as_type<uint>(x) >> 24u) & 0x80u;
    return sign | minifloat_code(x, 3u, -6, 0x7eu);
}

inline float e4m3_value(uint c) {
    const auto mag = as_type<float>(((c & 0x7fu) << 20u) + 0x3c000000u);
    const auto v = select(mag, mag * 2.0f - 0.015625f, (c & 0x78u) == 0u);
    return as_type<float>(as_type<uint>(v) | ((c & 0x80u) << 24u));
}

inline uint e2m1_code(float x) {
    const auto sign = (as_type<uint>(x) >> 28u) & 0x8u;
    return sign | minifloat_code(x, 1u, 0, 7u);
}

inline float e2m1_value(uint c) {
    const auto mag = as_type<float>(((c & 7u) << 22u) + 0x3f000000u);
    const auto v = select(mag, select(0.0f, 0.5f, (c & 1u) == 1u), (c & 6u) == 0u);
    return as_type<float>(as_type<uint>(v) | ((c & 8u) << 28u));
}

inline float e8m0_value(uint b) {
    if (b == 0u) { return as_type<float>(0x00400000u); }
    return as_type<float>(b << 23u);
}

inline float pow2i(int e) {
    return as_type<float>(uint(e + 127) << 23u);
}

inline int ceil_log2_bits(float t) {
    const auto b = as_type<uint>(t);
    return int((b >> 23u) & 0xffu) - 127 + select(0, 1, (b & 0x7fffffu) != 0u);
}

inline int act_scale_exp(float amax) {
    const auto b = as_type<uint>(max(amax, 1e-4));
    return int((b >> 23u) & 0xffu) - 127 - 8 + select(0, 1, (b & 0x7fffffu) > 0x600000u);
}

inline uint act_quant_code(float x, int e) {
    return e4m3_code(clamp(x * pow2i(-e), -448.0f, 448.0f));
}

inline uint byte_of(uint word, uint i) {
    return (word >> (8u * (i & 3u))) & 0xffu;
}

