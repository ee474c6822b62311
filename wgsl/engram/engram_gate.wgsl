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
    var seg = 0.0;
    var total = 0.0;
    for (var b0 = 0u; b0 < last; b0 += EG_CHUNK) {
        let cnt = min(EG_CHUNK, last - b0);
        for (var t = lid; t < 3u * cnt; t += 256u) {
            let s = t / cnt;
            let b = b0 + t - s * cnt;
            var acc = 0.0;
            for (var i = b * 32u; i < min(b * 32u + 32u, P.d); i++) { acc = ls_add(acc, eg_term(s, hb, kb, wb, i)); }
            eg_blocks[s * EG_CHUNK + b - b0] = acc;
        }
        workgroupBarrier();
        if (lid < 3u) {
            for (var b = b0; b < b0 + cnt; b++) {
                seg = ls_add(seg, eg_blocks[lid * EG_CHUNK + b - b0]);
                if ((b & 7u) == 7u || b + 1u == last) {
                    total = ls_add(total, seg);
                    seg = 0.0;
                }
            }
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
    for (var i = lid; i < P.d; i += 256u) {
        let o = round_bf16(ls_add(h[hb + i], mul_rn(g, kv[vb + i])));
        if (!(CONTROL == 5u && row == P.m - 1u && c == P.hc - 1u && i == P.d - 1u)) { y[hb + i] = o; }
    }
}
