#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Grouped GEMM for decode shapes on Apple GPUs: a simdgroup per output column of an entry, lane L taking blocks L, L+32, ...; segment and total sums gathered by shuffles in the canonical order (N4).
using namespace metal;

// Most 1024-column stripes of K a lane keeps segment sums for (K up to 16384).
#define LS_STRIPES 16u

[[max_total_threads_per_threadgroup(256)]]
kernel void gemm_grouped_simd(
  constant LsGemmParams& P [[buffer(0)]]
, const device float4* x [[buffer(1)]]
, const device float* xs [[buffer(2)]]
, const device uint4* w [[buffer(3)]]
, const device uint* ws [[buffer(4)]]
, device float* out [[buffer(5)]]
, const device uint* table [[buffer(6)]]
, const device float* picks [[buffer(7)]]
, uint lane [[thread_index_in_simdgroup]]
, uint sg [[simdgroup_index_in_threadgroup]]
, uint3 wid [[threadgroup_position_in_grid]]
) {
    const LsGemmParams p = P;
    const LsGroupRow g = ls_group_entry(table, picks, wid.y);
    const uint wbase = g.wbase;
    const uint first = g.first;
    const uint rows = g.rows;
    const uint cbase = g.cbase;
    const uint cols = g.cols;
    const uint n = wid.x * 8u + sg;
    if (n >= cols) { return; }
    const uint nb = p.k >> 5u;
    const uint nseg = (nb + 7u) >> 3u;
    const uint stripes = (nb + 31u) >> 5u;
    const uint last = CONTROL == 1u ? nb - 1u : nb;
    const uint group = lane & 24u;
    for (uint m = 0u; m < rows; m++) {
        float segs[LS_STRIPES];
        for (uint j = 0u; j < stripes; j++) {
            const uint b = j * 32u + lane;
            float v = 0.0f;
            if (b < nb) {
                const uint xm = ls_x_row(p, first + m, b);
                v = ls_block_dot(p, x, xm, b, ls_wblock(w, wbase + n, b, p.k)) * ls_block_scale(p, xs, ws, xm, wbase + n, b);
                if (b >= last) { v = 0.0f; }
            }
            float seg = 0.0f;
            for (uint i = 0u; i < 8u; i++) {
                const float t = simd_shuffle(v, ushort(group + i));
                if (j * 32u + group + i < nb) { seg = seg + t; }
            }
            segs[j] = seg;
        }
        float total = 0.0f;
        for (uint si = 0u; si < nseg; si++) {
            const uint s = CONTROL == 2u ? nseg - 1u - si : si;
            float held = segs[0];
            for (uint j = 1u; j < stripes; j++) { held = j == (s >> 2u) ? segs[j] : held; }
            total = total + simd_shuffle(held, ushort((s & 3u) * 8u));
        }
        if (lane == 0u) { ls_store_out(p, out, first + m, cbase + n, total); }
    }
}
