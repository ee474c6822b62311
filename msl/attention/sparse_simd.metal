#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Sparse attention with sink on Apple GPUs, a threadgroup per (row, head): keys gathered as wgsl/attention/attention.wgsl gathers them, scores by simdgroups (msl/attention/score.metal), the max by shuffles, the denominator by one simdgroup, values a thread per dim; every sum in the reference's order, so the bits equal kernels::attention::attend_row.
using namespace metal;

struct LsAttnParams { uint zero; uint row0; uint m; uint heads; uint dim; uint start; uint window; uint topk; float scale; uint block; };

#define LS_KEY_COMP 0x80000000u
#define LS_KEY_RING 0x40000000u
#define LS_KEY_ROW 0x3fffffffu
#define LS_MAX_KEYS 1024u

// Element i of the key with list entry e.
inline float ls_key_elem(uint dim, const device float* kv, const device float* ring, const device float* comp, uint e, uint i) {
    const uint at = (e & LS_KEY_ROW) * dim + i;
    if ((e & LS_KEY_COMP) != 0u) { return comp[at]; }
    if ((e & LS_KEY_RING) != 0u) { return ring[at]; }
    return kv[at];
}

[[max_total_threads_per_threadgroup(256)]]
kernel void sparse_attention_simd(
  constant LsAttnParams& P [[buffer(0)]]
, const device float* q [[buffer(1)]]
, const device float* kv [[buffer(2)]]
, const device float* ring [[buffer(3)]]
, const device float* comp [[buffer(4)]]
, const device float* sel [[buffer(5)]]
, const device float* sink [[buffer(6)]]
, device float* o [[buffer(7)]]
, uint tid [[thread_index_in_threadgroup]]
, uint lane [[thread_index_in_simdgroup]]
, uint sg [[simdgroup_index_in_threadgroup]]
, uint3 wid [[threadgroup_position_in_grid]]
) {
    LS_THREADGROUP_VAR uint keys[1024];
    LS_THREADGROUP_VAR float w[1024];
    LS_THREADGROUP_VAR uint counts[256];
    LS_THREADGROUP_VAR float part[8];
    LS_THREADGROUP_VAR uint shared_n[1];
    LS_THREADGROUP_VAR float shared_den[1];
    const LsAttnParams p = P;
    const uint h = wid.x;
    const uint row = p.row0 + wid.y;
    // Keys: window positions ascending, then the selection's entries >= 0 in order.
    const uint pos = p.start + row;
    uint lo = pos + 1u >= p.window ? pos + 1u - p.window : 0u;
    uint nw = pos + 1u - lo;
    if (p.block > 0u && CONTROL != 8u) {
        lo = p.start >= p.window ? p.start - p.window : 0u;
        nw = p.start + p.block - lo;
    }
    for (uint j = tid; j < nw; j += 256u) {
        const uint kp = lo + j;
        const uint slot = CONTROL == 7u ? (kp + 1u) % p.window : kp % p.window;
        keys[j] = kp >= p.start ? kp - p.start : (LS_KEY_RING | slot);
    }
    const uint srow = CONTROL == 3u ? metal::min(row + 1u, p.m - 1u) : row;
    const uint per = (p.topk + 255u) >> 8u;
    const uint c0 = metal::min(tid * per, p.topk);
    const uint c1 = metal::min(c0 + per, p.topk);
    const uint sbase = srow * p.topk;
    uint cnt = 0u;
    for (uint c = c0; c < c1; c++) { if (sel[sbase + c] >= 0.0f) { cnt++; } }
    counts[tid] = cnt;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0u) {
        uint acc = 0u;
        for (uint t = 0u; t < 256u; t++) {
            const uint ct = counts[t];
            counts[t] = acc;
            acc += ct;
        }
        shared_n[0] = metal::min(nw + acc, LS_MAX_KEYS);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint at = nw + counts[tid];
    for (uint c = c0; c < c1; c++) {
        const float v = sel[sbase + c];
        if (v >= 0.0f && at < LS_MAX_KEYS) {
            keys[at] = LS_KEY_COMP | uint(v);
            at++;
        }
    }
    uint n = shared_n[0];
    if (CONTROL == 1u) { n = metal::max(n, 2u) - 1u; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Scores: `kps` keys per simdgroup at a time, blocks of 32 dims from +0.0 across the key's lanes.
    const LsLanes l = ls_lanes(p.dim, lane);
    const uint qbase = (row * p.heads + h) * p.dim;
    for (uint k0 = sg * l.kps; k0 < n; k0 += 8u * l.kps) {
        const uint k = k0 + l.sub;
        const bool valid = l.live && k < n;
        const uint e = valid ? keys[k] : 0u;
        float seg = 0.0f;
        float tot = 0.0f;
        for (uint j = 0u; j < l.stripes; j++) {
            const uint b = j * l.span + l.off;
            float v = 0.0f;
            if (valid && b < l.nb) {
                const uint blen = metal::min(32u, p.dim - b * 32u);
                float acc = 0.0f;
                for (uint t = 0u; t < 32u; t++) {
                    if (t < blen) { acc = acc + ls_mul_term(q[qbase + b * 32u + t], ls_key_elem(p.dim, kv, ring, comp, e, b * 32u + t)); }
                }
                v = acc;
            }
            ls_gather_blocks(seg, tot, v, l, j);
        }
        if (valid && l.off == 0u) { w[k] = mul_rn(tot, p.scale); }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Max from -1e30, order-free.
    float mx = -1e30f;
    for (uint k = tid; k < n; k += 256u) { mx = metal::max(mx, w[k]); }
    mx = ls_simd_max(mx, lane);
    if (lane == 0u) { part[sg] = mx; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float mall = part[0];
    for (uint s = 1u; s < 8u; s++) { mall = metal::max(mall, part[s]); }
    const float m = ls_pz(mall);
    for (uint k = tid; k < n; k += 256u) { w[k] = ls_exp(ls_sub(w[k], m)); }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // Denominator: lane L of the first simdgroup sums keys 32L.. from +0.0, blocks then added in segments of 8, plus the sink.
    if (sg == 0u) {
        const uint nbk = (n + 31u) >> 5u;
        float acc = 0.0f;
        if (lane < nbk) {
            for (uint k = lane * 32u; k < metal::min(lane * 32u + 32u, n); k++) { acc = acc + w[k]; }
        }
        float seg = 0.0f;
        float tot = 0.0f;
        for (uint b = 0u; b < nbk; b++) { ls_seg_add(seg, tot, simd_shuffle(acc, ushort(b)), b, nbk); }
        if (lane == 0u) { shared_den[0] = CONTROL == 5u ? tot : tot + ls_exp(ls_sub(sink[h], m)); }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float den = shared_den[0];
    // Values: a thread per output dim, keys in blocks of 32 from +0.0, segments of 8 blocks.
    const uint nbk = (n + 31u) >> 5u;
    for (uint i = tid; i < p.dim; i += 256u) {
        float seg = 0.0f;
        float tot = 0.0f;
        for (uint b = 0u; b < nbk; b++) {
            float acc = 0.0f;
            for (uint k = b * 32u; k < metal::min(b * 32u + 32u, n); k++) {
                const float pk = w[k];
                const float v = ls_key_elem(p.dim, kv, ring, comp, keys[k], i);
                if (CONTROL == 6u) {
                    acc = acc + pk * v;
                } else if (CONTROL == 2u) {
                    tot = tot + ls_mul_term(pk, v);
                } else {
                    acc = acc + ls_mul_term(pk, v);
                }
            }
            ls_seg_add(seg, tot, acc, b, nbk);
        }
        if (!(CONTROL == 4u && row == 0u && h == 0u && i == 0u)) { o[(row * p.heads + h) * p.dim + i] = round_bf16(ls_div(tot, den)); }
    }
}
