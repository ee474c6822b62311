#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Bidirectional vision attention on Apple GPUs, a threadgroup per (row, head): scores by simdgroups (msl/attention/score.metal, several keys per simdgroup for short heads), the max by shuffles, keys streamed in segments of 256 with values a thread per (block, dim) as wgsl/vision/vit_attention.wgsl; every sum in its order, so the bits equal kernels::vision::attend_all.
using namespace metal;

struct LsVitParams { uint zero; uint row0; uint n; uint heads; uint dim; float scale; };

// The block sum of key j's dims b*32.. from +0.0 (the fused product under control 6).
inline float ls_vit_block(LsVitParams p, const threadgroup float* qs, const device float* k, uint j, uint h, uint b) {
    const uint base = (j * p.heads + h) * p.dim;
    float acc = 0.0f;
    for (uint i = b * 32u; i < metal::min(b * 32u + 32u, p.dim); i++) {
        if (CONTROL == 6u) {
            acc = acc + qs[i] * k[base + i];
        } else {
            acc = acc + ls_mul_term(qs[i], k[base + i]);
        }
    }
    return acc;
}

// Scores of keys from..from+count into w[key - from] (every lane of the threadgroup taking part; the raw dot under control 3).
inline void ls_vit_scores(LsVitParams p, const threadgroup float* qs, const device float* k, threadgroup float* w, uint h, uint from, uint count, LsLanes l, uint sg) {
    for (uint k0 = sg * l.kps; k0 < count; k0 += 8u * l.kps) {
        const uint j = k0 + l.sub;
        const bool valid = l.live && j < count;
        float v = 0.0f;
        if (valid && l.off < l.nb) { v = ls_vit_block(p, qs, k, from + j, h, l.off); }
        float seg = 0.0f;
        float tot = 0.0f;
        ls_gather_blocks(seg, tot, v, l, 0u);
        if (valid && l.off == 0u) { w[j] = CONTROL == 3u ? tot : mul_rn(tot, p.scale); }
    }
}

[[max_total_threads_per_threadgroup(256)]]
kernel void vit_attention_simd(
  constant LsVitParams& P [[buffer(0)]]
, const device float* q [[buffer(1)]]
, const device float* k [[buffer(2)]]
, const device float* v [[buffer(3)]]
, device float* o [[buffer(4)]]
, uint tid [[thread_index_in_threadgroup]]
, uint lane [[thread_index_in_simdgroup]]
, uint sg [[simdgroup_index_in_threadgroup]]
, uint3 wid [[threadgroup_position_in_grid]]
) {
    LS_THREADGROUP_VAR float qs[256];
    LS_THREADGROUP_VAR float w[256];
    LS_THREADGROUP_VAR float part[8];
    LS_THREADGROUP_VAR float vpart[2048];
    const LsVitParams p = P;
    const uint h = wid.x;
    const uint row = p.row0 + wid.y;
    const uint width = p.heads * p.dim;
    if (tid < p.dim) { qs[tid] = q[row * width + h * p.dim + tid]; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint n = p.n;
    if (CONTROL == 1u) { n = metal::max(n, 2u) - 1u; }
    const LsLanes l = ls_lanes(p.dim, lane);
    // Max from -1e30, order-free, over segments of 256 scores.
    float mx = -1e30f;
    for (uint from = 0u; from < n; from += 256u) {
        const uint count = metal::min(256u, n - from);
        ls_vit_scores(p, qs, k, w, h, from, count, l, sg);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < count) { mx = metal::max(mx, w[tid]); }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    mx = ls_simd_max(mx, lane);
    if (lane == 0u) { part[sg] = mx; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float mall = part[0];
    for (uint s = 1u; s < 8u; s++) { mall = metal::max(mall, part[s]); }
    const float m = ls_pz(mall);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float den = 0.0f;
    float tot = 0.0f;
    const uint pairs = p.dim * 8u;
    for (uint from = 0u; from < n; from += 256u) {
        const uint seg_n = metal::min(256u, n - from);
        ls_vit_scores(p, qs, k, w, h, from, seg_n, l, sg);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tid < seg_n) { w[tid] = ls_exp(ls_sub(w[tid], m)); }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // Denominator: lane L < 8 of the first simdgroup sums keys 32L.. from +0.0; the segment's blocks then added in order.
        if (sg == 0u) {
            float acc = 0.0f;
            if (lane < 8u) {
                for (uint t = lane * 32u; t < metal::min(lane * 32u + 32u, seg_n); t++) { acc = acc + w[t]; }
            }
            const uint nb = (seg_n + 31u) >> 5u;
            float seg = 0.0f;
            for (uint b = 0u; b < nb; b++) { seg = seg + simd_shuffle(acc, ushort(b)); }
            den = den + seg;
        }
        // Values: a thread per (block, dim) pair, keys of the block from +0.0.
        for (uint pr = tid; pr < pairs; pr += 256u) {
            const uint b = pr / p.dim;
            const uint i = pr - b * p.dim;
            float acc = 0.0f;
            for (uint t = b * 32u; t < metal::min(b * 32u + 32u, seg_n); t++) {
                const float vv = v[((from + t) * p.heads + h) * p.dim + i];
                if (CONTROL == 2u) {
                    acc = acc + w[t] * vv;
                } else {
                    acc = acc + ls_mul_term(w[t], vv);
                }
            }
            vpart[b * p.dim + i] = acc;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint nb = (seg_n + 31u) >> 5u;
        if (tid < p.dim) {
            float seg = 0.0f;
            for (uint b = 0u; b < nb; b++) { seg = seg + vpart[b * p.dim + tid]; }
            tot = tot + seg;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0u) { part[0] = den; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float d = part[0];
    if (CONTROL == 5u) { d = d + 1.0f; }
    if (tid < p.dim) {
        const uint at = row * width + h * p.dim + tid;
        if (!(CONTROL == 4u && row == 0u && h == 0u && tid == 0u)) { o[at] = round_bf16(ls_div(tot, d)); }
    }
}
