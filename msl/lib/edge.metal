#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Edge arithmetic (rule N7): the canonical flushes and zero signs, by bit manipulation; identical to wgsl/lib/edge.wgsl and src/numerics/edge.rs.
using namespace metal;
#ifndef CONTROL
#define CONTROL 0u
#endif

// The exactness header forbids contraction and rewrites, so MSL needs no runtime zero: mul_rn and ls_keep keep WGSL's names and flushes.
#define LS_ZERO 0u
// The CONTROL value of the keep-subnormals control, the same in every kernel.
constant uint LS_CONTROL_KEEP = 90u;

// 1 only in the contract's keep-subnormals control (every flush below then keeps its input), a compile of its own.
#define LS_KEEP ((CONTROL) == 90u ? 1u : 0u)

// A subnormal or zero sum becomes +0 (compilers that assume no signed zeros fold 0.0 + x to x); everything else is kept.
inline float ls_fl(float x) {
    return select(x, 0.0f, (as_type<uint>(x) & 0x7f800000u) == 0u && LS_KEEP == 0u);
}

// A rounded product at or below 2^-126 in magnitude becomes the zero of its sign.
inline float ls_flp(float x) {
    const auto b = as_type<uint>(x);
    return as_type<float>(select(b, b & 0x80000000u, (b & 0x7fffffffu) <= 0x00800000u && LS_KEEP == 0u));
}

// A term of a sum below 2^-103 becomes +0, so every partial sum stays a multiple of 2^-126.
inline float ls_term(float x) {
    return select(x, 0.0f, (as_type<uint>(x) & 0x7fffffffu) < 0x0c000000u && LS_KEEP == 0u);
}

inline float4 ls_term4(float4 x) {
    return select(x, float4(0.0f), (as_type<uint4>(x) & uint4(0x7fffffffu)) < uint4(0x0c000000u) && bool4(LS_KEEP == 0u));
}

// The product a * b as a term of a sum (kept from contraction like mul_rn): below 2^-103 it is +0.
inline float ls_mul_term(float a, float b) { return ls_term(as_type<float>(as_type<uint>(a * b) ^ LS_ZERO)); }

// a + b and a - b, flushed.
inline float ls_add(float a, float b) { return ls_fl(a + b); }
inline float ls_sub(float a, float b) { return ls_fl(a - b); }

// A zero of either sign becomes +0 (the result of a max or min over values that may be zeros of both signs).
inline float ls_pz(float x) {
    const auto b = as_type<uint>(x);
    return as_type<float>(select(b, 0u, (b & 0x7fffffffu) == 0u));
}

// max(x, 0) with +0 for every zero and negative input.
inline float ls_relu(float x) {
    const auto b = as_type<uint>(x);
    return as_type<float>(select(b, 0u, (b & 0x80000000u) != 0u));
}
