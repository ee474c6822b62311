#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// GEMM shared pieces in MSL: parameters, controls, the exact block dot and scale (the same order as wgsl/gemm/common.wgsl: 32 products ascending from +0.0).
using namespace metal;

struct LsGemmParams { uint zero; uint m; uint n; uint k; uint n_base; uint ldo; uint groups_x; uint round; };

// A decoded block of 32 weights, columns ascending.
struct LsW32 { float4 v[8]; };

// Eight decoded weights, columns ascending.
struct LsW8 { float4 a; float4 b; };

// A grouped table entry as wgsl/gemm/entry.wgsl resolves it: a pick entry (rows PICK | the part's experts) is one row through the expert picks[i] names, no columns outside the part.
struct LsGroupRow { uint wbase; uint first; uint rows; uint cbase; uint cols; };

inline LsGroupRow ls_group_entry(const device uint* table, const device float* picks, uint i) {
    const uint t = i * 5u;
    LsGroupRow g = { table[t], table[t + 1u], table[t + 2u], table[t + 3u], table[t + 4u] };
    if (g.rows >= 0x80000000u) {
        const float e = picks[i];
        const bool inside = e >= float(g.wbase) && e < float(g.wbase + (g.rows - 0x80000000u));
        g.wbase = inside ? (uint(e) - g.wbase) * g.cols : 0u;
        g.cols = inside ? g.cols : 0u;
        g.rows = 1u;
    }
    return g;
}

// The x row block b reads: the neighbouring row in the last block under control 3.
inline uint ls_x_row(LsGemmParams P, uint m, uint b) {
    return (CONTROL == 3u && b + 1u == (P.k >> 5u)) ? metal::min(m + 1u, P.m - 1u) : m;
}

// Stores one output, rounded to bf16 when the parameters ask for it.
inline void ls_store_out(LsGemmParams P, device float* out, uint m, uint n, float v) {
    if (CONTROL == 4u && m == 0u && n == 0u) { return; }
    const bool keep = CONTROL == 6u && m == 0u && n == 0u;
    out[m * P.ldo + P.n_base + n] = (P.round != 0u && !keep) ? round_bf16(v) : v;
}

// s + a.x c.x + a.y c.y + a.z c.z + a.w c.w, one rounding per step, left to right.
inline float ls_dot4(float s, float4 a, float4 c) {
    float t = s + a.x * c.x;
    t = t + a.y * c.y;
    t = t + a.z * c.z;
    return t + a.w * c.w;
}
