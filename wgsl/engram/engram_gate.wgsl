// Engram gate, a workgroup per (stream, row): canonical sums (every sum flushed) of h^2, key^2 and mul_rn(mul_rn(h, mul_rn(q, k)), key); g = sigmoid(+-ls_sqrt(max(|dot|, 1e-6))) or 0 when not live; y = bf16(h + mul_rn(g, value)), the sum flushed; = kernels::engram_op::gate_row.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, hc: u32, d: u32, inv_d: f32, inv_sqrt_d: f32, eps: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> kv: array<f32>;
@group(0) @binding(3) var<storage, read> qw: array<f32>;
@group(0) @binding(4) var<storage, read> kw: array<f32>;
@group(0) @binding(5) var<storage, read> live: array<u32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

// Blocks of 32 per chunk: a whole number of segments of 8 blocks.
const EG_CHUNK: u32 = 256u;
var<workgroup> eg_blocks: array<f32, 768>;
var<workgroup> eg_gate: f32;
var<workgroup> eg_segs: array<f32, 96>;

// Term i of sum s (0: h^2, 1: key^2, 2: the weighted dot); control 3 leaves the products free to fuse.
fn eg_term(s: u32, hb: u32, kb: u32, wb: u32, i: u32) -> f32 {
    let hv = h[hb + i];
    let kv_ = kv[kb + i];
    if (CONTROL == 3u) {
        if (s == 0u) { return hv * hv; }
        if (s == 1u) { return kv_ * kv_; }
        return hv * (qw[wb + i] * kw[wb + i]) * kv_;
    }
    if (s == 0u) { return mul_rn(hv, hv); }
    if (s == 1u) { return mul_rn(kv_, kv_); }
    return mul_rn(mul_rn(hv, mul_rn(qw[wb + i], kw[wb + i])), kv_);
}

// Sum s of one full block of 32 (every load issued before the ascending sum).
fn eg_full_block(s: u32, hb: u32, kb: u32, wb: u32) -> f32 {
    var a: array<f32, 32>;
    var w2: array<f32, 32>;
    var k2: array<f32, 32>;
    for (var q = 0u; q < 32u; q++) {
        a[q] = h[hb + q];
        w2[q] = mul_rn(qw[wb + q], kw[wb + q]);
        k2[q] = kv[kb + q];
    }
    var acc = 0.0;
    for (var q = 0u; q < 32u; q++) {
        var t = mul_rn(mul_rn(a[q], w2[q]), k2[q]);
        if (s == 0u) { t = mul_rn(a[q], a[q]); }
        if (s == 1u) { t = mul_rn(k2[q], k2[q]); }
        acc = ls_add(acc, t);
    }
    return acc;
}

fn eg_out(g: f32, hb: u32, vb: u32, i: u32) -> f32 { return round_bf16(ls_add(h[hb + i], mul_rn(g, kv[vb + i]))); }

fn eg_store(row: u32, c: u32, hb: u32, i: u32, o: f32) {
    if (!(CONTROL == 5u && row == P.m - 1u && c == P.hc - 1u && i == P.d - 1u)) { y[hb + i] = o; }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let c = wid.x;
    let row = wid.y;
    var krow = row;
    if (CONTROL == 4u) { krow = min(row + 1u, P.m - 1u); }
    let hb = (row * P.hc + c) * P.d;
    let kb = (krow * (P.hc + 1u) + c) * P.d;
    let wb = c * P.d;
    let nb = (P.d + 31u) >> 5u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    var total = 0.0;
    for (var b0 = 0u; b0 < last; b0 += EG_CHUNK) {
        let cnt = min(EG_CHUNK, last - b0);
        for (var t = lid; t < 3u * cnt; t += 256u) {
            let s = t / cnt;
            let b = b0 + t - s * cnt;
            var acc = 0.0;
            if (b * 32u + 32u <= P.d && CONTROL != 3u) {
                acc = eg_full_block(s, hb + b * 32u, kb + b * 32u, wb + b * 32u);
            } else {
                for (var i = b * 32u; i < min(b * 32u + 32u, P.d); i++) { acc = ls_add(acc, eg_term(s, hb, kb, wb, i)); }
            }
            eg_blocks[s * EG_CHUNK + b - b0] = acc;
        }
        workgroupBarrier();
        // Segments of 8 blocks a thread each (chunks start on segment bounds), then each sum's segments ascending.
        let nsegc = (cnt + 7u) >> 3u;
        if (lid < 3u * nsegc) {
            let s = lid / nsegc;
            let j = lid - s * nsegc;
            var sg = 0.0;
            for (var b = j * 8u; b < min(j * 8u + 8u, cnt); b++) { sg = ls_add(sg, eg_blocks[s * EG_CHUNK + b]); }
            eg_segs[s * 32u + j] = sg;
        }
        workgroupBarrier();
        if (lid < 3u) {
            for (var j = 0u; j < nsegc; j++) { total = ls_add(total, eg_segs[lid * 32u + j]); }
        }
        workgroupBarrier();
    }
    if (lid < 3u) { eg_blocks[lid] = total; }
    workgroupBarrier();
    if (lid == 0u) {
        let ms_h = mul_rn(eg_blocks[0], P.inv_d);
        let ms_k = mul_rn(eg_blocks[1], P.inv_d);
        let rho = mul_rn(ls_rsqrt(ms_h + P.eps), ls_rsqrt(ms_k + P.eps));
        let dot = mul_rn(mul_rn(eg_blocks[2], rho), P.inv_sqrt_d);
        let root = ls_sqrt(max(abs(dot), 1e-6));
        var g = ls_sigmoid(select(root, -root, dot < 0.0 && CONTROL != 7u));
        if (live[row] == 0u && CONTROL != 6u) { g = 0.0; }
        eg_gate = g;
    }
    workgroupBarrier();
    let g = eg_gate;
    let vb = (krow * (P.hc + 1u) + P.hc) * P.d;
    // Four elements a thread loaded before any is stored (past the end, the last again).
    for (var i = lid; i < P.d; i += 1024u) {
        let i1 = min(i + 256u, P.d - 1u);
        let i2 = min(i + 512u, P.d - 1u);
        let i3 = min(i + 768u, P.d - 1u);
        let o0 = eg_out(g, hb, vb, i);
        let o1 = eg_out(g, hb, vb, i1);
        let o2 = eg_out(g, hb, vb, i2);
        let o3 = eg_out(g, hb, vb, i3);
        eg_store(row, c, hb, i, o0);
        if (i + 256u < P.d) { eg_store(row, c, hb, i1, o1); }
        if (i + 512u < P.d) { eg_store(row, c, hb, i2, o2); }
        if (i + 768u < P.d) { eg_store(row, c, hb, i3, o3); }
    }
}
