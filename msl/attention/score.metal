#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Attention scores on Apple GPUs: a key per run of `span` lanes (several keys per simdgroup for short heads), lane j the key's blocks of 32 dims j, j+span, ...; block sums gathered by shuffles in the canonical order (N4).
using namespace metal;

// How a simdgroup's lanes split over keys: `span` lanes per key, `kps` keys per simdgroup; lane `off` of key `sub` (live when sub < kps).
struct LsLanes { uint nb; uint span; uint kps; uint sub; uint base; uint off; bool live; uint stripes; };

inline LsLanes ls_lanes(uint dim, uint lane) {
    LsLanes l;
    l.nb = (dim + 31u) >> 5u;
    l.span = metal::min(l.nb, 32u);
    l.kps = 32u / l.span;
    l.sub = lane / l.span;
    l.live = l.sub < l.kps;
    l.base = l.live ? l.sub * l.span : 0u;
    l.off = lane - l.base;
    l.stripes = (l.nb + l.span - 1u) / l.span;
    return l;
}

// The largest of every lane's x (order-free: the max of a set), by a butterfly of shuffles.
inline float ls_simd_max(float x, uint lane) {
    for (uint s = 16u; s > 0u; s >>= 1u) { x = metal::max(x, simd_shuffle(x, ushort(lane ^ s))); }
    return x;
}

// Adds block sum x (block b of nb) into the canonical segment and total: segments of 8 blocks from +0.0.
inline void ls_seg_add(thread float& seg, thread float& tot, float x, uint b, uint nb) {
    seg = seg + x;
    if ((b & 7u) == 7u || b + 1u == nb) {
        tot = tot + seg;
        seg = 0.0f;
    }
}

// The canonical dot of a key's blocks, every lane of the simdgroup taking part (block values `v` of this lane's stripe j), summed into tot.
inline void ls_gather_blocks(thread float& seg, thread float& tot, float v, LsLanes l, uint j) {
    for (uint t = 0u; t < l.span; t++) {
        const float x = simd_shuffle(v, ushort(l.base + t));
        const uint b = j * l.span + t;
        if (b < l.nb) { ls_seg_add(seg, tot, x, b, l.nb); }
    }
}
