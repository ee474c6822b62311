#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Numerics library probe in MSL: y[i] = f(a[i]) (or f(a[i], b[i]) for div) for the function FUNC, the same words as wgsl/lib/probe.wgsl.
using namespace metal;
#ifndef FUNC
#define FUNC 0u
#endif

struct LsProbeParams { uint zero; uint n; uint groups_x; };

inline float ls_probe_apply(float a, float b) {
    if (FUNC == 0u) { return ls_exp2(a); }
    if (FUNC == 1u) { return ls_exp(a); }
    if (FUNC == 2u) { return ls_log2(a); }
    if (FUNC == 3u) { return ls_log(a); }
    if (FUNC == 4u) { return ls_log1p(a); }
    if (FUNC == 5u) { return ls_rsqrt(a); }
    if (FUNC == 6u) { return ls_recip(a); }
    if (FUNC == 7u) { return ls_sqrt(a); }
    if (FUNC == 8u) { return ls_div(a, b); }
    if (FUNC == 9u) { return ls_sigmoid(a); }
    if (FUNC == 10u) { return ls_silu(a); }
    if (FUNC == 11u) { return ls_softplus(a); }
    return ls_erf(a);
}

[[max_total_threads_per_threadgroup(64)]]
kernel void lib_probe(
  constant LsProbeParams& P [[buffer(0)]]
, const device float2* x [[buffer(1)]]
, device uint* y [[buffer(2)]]
, uint3 gid [[thread_position_in_grid]]
) {
    const uint i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.n) { return; }
    float2 v = x[i];
    if (CONTROL == 2u) { v = x[min(i + 1u, P.n - 1u)]; }
    if (FUNC == 100u) {
        const float a = v.x;
        uint h = bf16_bits(a);
        uint c = e4m3_code(a);
        if (CONTROL == 1u) { h = as_type<uint>(a) >> 16u; c = e4m3_code(as_type<float>(as_type<uint>(a) & 0xfff00000u)); }
        const uint words[4] = {h, c, e2m1_code(a), as_type<uint>(act_scale_exp(metal::abs(a)))};
        for (uint j = 0u; j < 4u; j++) {
            if (!(CONTROL == 3u && i == 0u && j == 1u)) { y[4u * i + j] = words[j]; }
        }
        return;
    }
    float r = ls_probe_apply(v.x, v.y);
    if (CONTROL == 1u) { r = round_bf16(r); }
    if (!(CONTROL == 3u && i == 0u)) { y[i] = as_type<uint>(r); }
}
