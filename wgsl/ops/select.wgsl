// Argmax and top-k per row: k passes, each the best (value desc, index asc) strictly after the previous pick; order-free.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, k: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> val: array<f32>;
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

const NONE: u32 = 0xffffffffu;

// Whether (va, ia) comes before (vb, ib): larger value first, then lower index.
fn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    if (ib == NONE) { return ia != NONE; }
    if (ia == NONE) { return false; }
    if (CONTROL == 1u && va == vb) { return ia > ib; }
    return va > vb || (va == vb && ia < ib);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x;
    var src = row;
    if (CONTROL == 4u) { src = min(row + 1u, P.m - 1u); }
    let n = select(P.d, P.d - 1u, CONTROL == 2u);
    var pv = 0.0;
    var pi = NONE;
    for (var j = 0u; j < P.k; j++) {
        var cv = 0.0;
        var ci = NONE;
        for (var i = lid; i < n; i += 256u) {
            let v = x[src * P.d + i];
            let after_prev = pi == NONE || before(pv, pi, v, i);
            if (after_prev && before(v, i, cv, ci)) { cv = v; ci = i; }
        }
        bv[lid] = cv;
        bi[lid] = ci;
        workgroupBarrier();
        for (var w = 128u; w > 0u; w >>= 1u) {
            if (lid < w && before(bv[lid + w], bi[lid + w], bv[lid], bi[lid])) {
                bv[lid] = bv[lid + w];
                bi[lid] = bi[lid + w];
            }
            workgroupBarrier();
        }
        pv = bv[0];
        pi = bi[0];
        workgroupBarrier();
        if (lid == 0u && !(CONTROL == 3u && row == 0u && j == P.k - 1u)) {
            idx[row * P.k + j] = pi;
            val[row * P.k + j] = pv;
        }
    }
}
