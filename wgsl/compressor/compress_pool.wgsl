// Compressor pooling, CARRY 0: a thread per (group, channel); member t of group j is buffered row j*r+t below pending, else this call's row j*r+t-pending; M = max_t g order-free, a zero +0; e_t = ls_exp(g_t - M) (difference flushed); inv = ls_recip(canonical sum of e); latent = bf16(canonical sum of mul_rn(mul_rn(e_t, inv), k_t), every sum flushed), t ascending: bit-identical to kernels::compressor::pool_group. CARRY 1: the ungrouped remainder into partial's first rows, the rest zero, as exec::cpu's compress_pool.
override CONTROL: u32 = 0u;
override CARRY: u32 = 0u;
struct Params { zero: u32, s: u32, hd: u32, pending: u32, ratio: u32, groups: u32, grid_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;
@group(0) @binding(4) var<storage, read_write> pooled: array<f32>;

// Member u's k (gate: off = hd) at channel c: a buffered row of partial, else a row of this call.
fn member(u: u32, c0: u32, gate: bool) -> f32 {
    var c = c0;
    if (CONTROL == 2u && gate) { c = min(c0 + 1u, P.hd - 1u); }
    if (u < P.pending) { return partial[u * 2u * P.hd + select(0u, P.hd, gate) + c]; }
    let at = (u - P.pending) * P.hd + c;
    if (gate) { return g[at]; }
    return k[at];
}

// True after the last term of a block of 32 and of a segment of 8 blocks (or the last term).
fn block_end(t: u32, n: u32) -> bool { return (t & 31u) == 31u || t + 1u == n; }
fn segment_end(t: u32, n: u32) -> bool { return ((t >> 5u) & 7u) == 7u || t + 1u == n; }

fn pool(idx: u32) {
    if (idx >= P.groups * P.hd) { return; }
    let j = idx / P.hd;
    let c = idx - j * P.hd;
    var jj = j;
    if (CONTROL == 3u) { jj = min(j + 1u, P.groups - 1u); }
    let first = jj * P.ratio;
    let r = P.ratio;
    var mx = member(first, c, true);
    for (var t = 1u; t < r; t++) { mx = max(mx, member(first + t, c, true)); }
    mx = ls_pz(mx);
    var acc = 0.0;
    var seg = 0.0;
    var tot = 0.0;
    for (var t = 0u; t < r; t++) {
        acc = acc + ls_exp(ls_sub(member(first + t, c, true), mx));
        if (block_end(t, r)) { seg = seg + acc; acc = 0.0; }
        if (block_end(t, r) && segment_end(t, r)) { tot = tot + seg; seg = 0.0; }
    }
    var inv = ls_recip(tot);
    if (CONTROL == 5u) { inv = inv * 2.0; }
    let used = select(r, r - 1u, CONTROL == 1u && r > 1u);
    acc = 0.0;
    seg = 0.0;
    var lat = 0.0;
    for (var t = 0u; t < used; t++) {
        let p = mul_rn(ls_exp(ls_sub(member(first + t, c, true), mx)), inv);
        acc = ls_add(acc, mul_rn(p, member(first + t, c, false)));
        if (block_end(t, used)) { seg = ls_add(seg, acc); acc = 0.0; }
        if (block_end(t, used) && segment_end(t, used)) { lat = ls_add(lat, seg); seg = 0.0; }
    }
    pooled[idx] = round_bf16(lat);
}

fn carry(idx: u32) {
    let w = 2u * P.hd;
    if (idx >= (P.ratio - 1u) * w) { return; }
    let t = idx / w;
    let c = idx - t * w;
    let rem = P.pending + P.s - P.groups * P.ratio;
    var v = 0.0;
    if (t < rem) {
        let u = P.groups * P.ratio + t;
        if (u < P.pending) {
            v = partial[idx];
        } else if (c < P.hd) {
            v = k[(u - P.pending) * P.hd + c];
        } else {
            v = g[(u - P.pending) * P.hd + c - P.hd];
        }
    }
    if (!(CONTROL == 4u && idx == 0u)) { partial[idx] = v; }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let idx = gid.x + gid.y * P.grid_x * 64u;
    if (CARRY == 0u) { pool(idx); } else { carry(idx); }
}
