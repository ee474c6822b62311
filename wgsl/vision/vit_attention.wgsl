// Bidirectional attention over one image, a workgroup per (row, head); keys = every row in order; s = mul_rn(canonical dot of product terms, scale), M = max(-1e30, s) order-free with +0 for a zero, p = ls_exp(s - M), o = bf16(ls_div(canonical sum of product terms p v, canonical sum of p)); keys stream in segments of 256 (one canonical segment each), scores recomputed in the second pass with the same bits; = kernels::vision::attend_all.
override CONTROL: u32 = 0u;
struct Params { zero: u32, row0: u32, n: u32, heads: u32, dim: u32, scale: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

var<workgroup> qs: array<f32, 256>;
var<workgroup> w: array<f32, 256>;
var<workgroup> part: array<f32, 256>;
var<workgroup> vpart: array<f32, 2048>;

// The score of key j: blocks of 32 dims from +0.0, block sums added in segments of 8 (head dims up to 256: one segment).
fn score(j: u32, h: u32) -> f32 {
    let base = (j * P.heads + h) * P.dim;
    var tot = 0.0;
    var seg = 0.0;
    let nb = (P.dim + 31u) >> 5u;
    for (var b = 0u; b < nb; b++) {
        var acc = 0.0;
        for (var i = b * 32u; i < min(b * 32u + 32u, P.dim); i++) {
            if (CONTROL == 6u) {
                acc = acc + qs[i] * k[base + i];
            } else {
                acc = acc + ls_mul_term(qs[i], k[base + i]);
            }
        }
        seg = seg + acc;
        if ((b & 7u) == 7u || b + 1u == nb) {
            tot = tot + seg;
            seg = 0.0;
        }
    }
    if (CONTROL == 3u) { return tot; }
    return mul_rn(tot, P.scale);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h = wid.x;
    let row = P.row0 + wid.y;
    let width = P.heads * P.dim;
    if (lid < P.dim) { qs[lid] = q[row * width + h * P.dim + lid]; }
    workgroupBarrier();
    var n = P.n;
    if (CONTROL == 1u) { n = max(n, 2u) - 1u; }
    // Max from -1e30, order-free.
    var mx = -1e30;
    for (var j = lid; j < n; j += 256u) { mx = max(mx, score(j, h)); }
    part[lid] = mx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) { part[lid] = max(part[lid], part[lid + s]); }
        workgroupBarrier();
    }
    let m = ls_pz(part[0]);
    workgroupBarrier();
    var den = 0.0;
    var tot = 0.0;
    let nseg = (n + 255u) >> 8u;
    let pairs = P.dim * 8u;
    for (var sg = 0u; sg < nseg; sg++) {
        let j = sg * 256u + lid;
        var p = 0.0;
        if (j < n) { p = ls_exp(ls_sub(score(j, h), m)); }
        w[lid] = p;
        workgroupBarrier();
        let seg_n = min(256u, n - sg * 256u);
        // Denominator: a thread per block of 32 keys, then the segment's blocks in order.
        if (lid < 8u) {
            var acc = 0.0;
            for (var t = lid * 32u; t < min(lid * 32u + 32u, seg_n); t++) { acc = acc + w[t]; }
            part[lid] = acc;
        }
        // Values: a thread per (block, dim) pair, keys of the block from +0.0.
        for (var pr = lid; pr < pairs; pr += 256u) {
            let b = pr / P.dim;
            let i = pr - b * P.dim;
            var acc = 0.0;
            for (var t = b * 32u; t < min(b * 32u + 32u, seg_n); t++) {
                let vv = v[((sg * 256u + t) * P.heads + h) * P.dim + i];
                if (CONTROL == 2u) {
                    acc = acc + w[t] * vv;
                } else {
                    acc = acc + ls_mul_term(w[t], vv);
                }
            }
            vpart[b * P.dim + i] = acc;
        }
        workgroupBarrier();
        let nb = (seg_n + 31u) >> 5u;
        if (lid == 0u) {
            var seg = 0.0;
            for (var b = 0u; b < nb; b++) { seg = seg + part[b]; }
            den = den + seg;
        }
        if (lid < P.dim) {
            var seg = 0.0;
            for (var b = 0u; b < nb; b++) { seg = seg + vpart[b * P.dim + lid]; }
            tot = tot + seg;
        }
        workgroupBarrier();
    }
    if (lid == 0u) { part[0] = den; }
    workgroupBarrier();
    var d = part[0];
    if (CONTROL == 5u) { d = d + 1.0; }
    if (lid < P.dim) {
        let at = row * width + h * P.dim + lid;
        if (!(CONTROL == 4u && row == 0u && h == 0u && lid == 0u)) { o[at] = round_bf16(ls_div(tot, d)); }
    }
}
