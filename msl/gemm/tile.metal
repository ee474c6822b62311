#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// The GEMM tile core in MSL: one 64x64 output tile of an entry (weight row base, x row end, output column base, columns), 32x64 operand tiles in threadgroup memory, 4x4 outputs per thread, per-output block sums in the canonical order (N4), as wgsl/gemm/tile.wgsl.
using namespace metal;

// Scales of block b for row m and the entry's four columns n0..n0+3 (clamped into range).
inline float4 ls_scale4(LsGemmParams p, const device float* xs, const device uint* ws, uint wbase, uint end, uint cols, uint m, uint n0, uint b) {
    const uint mm = ls_x_row(p, metal::min(m, end - 1u), b);
    const uint l = cols - 1u;
    return float4(ls_block_scale(p, xs, ws, mm, wbase + metal::min(n0, l), b), ls_block_scale(p, xs, ws, mm, wbase + metal::min(n0 + 1u, l), b), ls_block_scale(p, xs, ws, mm, wbase + metal::min(n0 + 2u, l), b), ls_block_scale(p, xs, ws, mm, wbase + metal::min(n0 + 3u, l), b));
}

inline void ls_store4(LsGemmParams p, device float* out, uint end, uint cbase, uint cols, uint m, uint n0, float4 v) {
    if (m >= end) { return; }
    for (uint j = 0u; j < 4u; j++) {
        if (n0 + j < cols) { ls_store_out(p, out, m, cbase + n0 + j, v[j]); }
    }
}

// One 64x64 output tile at x rows m0.. (below end) and the entry's columns n0..; every thread of the threadgroup calls it.
inline void ls_tile(LsGemmParams p, const device float4* x, const device float* xs, const device uint4* w, const device uint* ws, device float* out, threadgroup float4* As, threadgroup float4* Bs, uint wbase, uint m0, uint end, uint cbase, uint cols, uint n0, uint tid) {
    const uint tx = tid & 15u;
    const uint ty = tid >> 4u;
    const uint lr = tid >> 2u;
    const uint q = tid & 3u;
    const uint nb = p.k >> 5u;
    const uint nseg = (nb + 7u) >> 3u;
    const uint last = CONTROL == 1u ? nb - 1u : nb;
    const float4 zero4 = float4(0.0f);
    float4 t[4] = {zero4, zero4, zero4, zero4};
    const uint mi = m0 + ty * 4u;
    const uint nj = n0 + tx * 4u;
    for (uint si = 0u; si < nseg; si++) {
        const uint s = CONTROL == 2u ? nseg - 1u - si : si;
        float4 sacc[4] = {zero4, zero4, zero4, zero4};
        for (uint b = s * 8u; b < metal::min(s * 8u + 8u, last); b++) {
            const uint am = m0 + lr;
            LsW8 av = LsW8{zero4, zero4};
            if (am < end) {
                const uint base = (ls_x_row(p, am, b) * p.k + b * 32u + q * 8u) >> 2u;
                av = LsW8{x[base], x[base + 1u]};
            }
            const uint bn = n0 + lr;
            LsW8 wv = LsW8{zero4, zero4};
            if (bn < cols) { wv = ls_wvals8(w, wbase + bn, b, q, p.k); }
            const uint row = lr >> 2u;
            const uint c = lr & 3u;
            const uint k0 = q * 8u;
            for (uint i = 0u; i < 4u; i++) {
                As[(k0 + i) * 16u + row][c] = av.a[i];
                As[(k0 + 4u + i) * 16u + row][c] = av.b[i];
                Bs[(k0 + i) * 16u + row][c] = wv.a[i];
                Bs[(k0 + 4u + i) * 16u + row][c] = wv.b[i];
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            float4 bacc[4] = {zero4, zero4, zero4, zero4};
            for (uint kk = 0u; kk < 32u; kk++) {
                const float4 a = As[kk * 16u + ty];
                const float4 cw = Bs[kk * 16u + tx];
                for (uint r = 0u; r < 4u; r++) { bacc[r] = ls_gmac4(bacc[r], a[r], cw); }
            }
            threadgroup_barrier(mem_flags::mem_threadgroup);
            for (uint r = 0u; r < 4u; r++) { sacc[r] = sacc[r] + bacc[r] * ls_scale4(p, xs, ws, wbase, end, cols, mi + r, nj, b); }
        }
        for (uint r = 0u; r < 4u; r++) { t[r] = t[r] + sacc[r]; }
    }
    for (uint r = 0u; r < 4u; r++) { ls_store4(p, out, end, cbase, cols, mi + r, nj, t[r]); }
}
