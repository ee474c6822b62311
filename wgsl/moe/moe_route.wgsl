// MoE router per row (sums and differences flushed, a zero max +0): s = func(mul_rn(z, 1/temp)); k passes each taking the best (s + bias) after the previous pick by (value desc, index asc); weights s[pick] / (canonical sum in pick order + 1e-20), times the route scale; = kernels::moe::route_row.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, e: u32, k: u32, func: u32, has_temp: u32, inv_temp: f32, normalize: u32, route_scale: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> bias_vl: array<f32>;
@group(0) @binding(4) var<storage, read> image: array<u32>;
@group(0) @binding(5) var<storage, read_write> ids: array<f32>;
@group(0) @binding(6) var<storage, read_write> weights: array<f32>;

const MAX_EXPERTS: u32 = 1024u;
const MAX_K: u32 = 32u;
const NONE: u32 = 0xffffffffu;
var<workgroup> s: array<f32, 1024>;
var<workgroup> biased: array<f32, 1024>;
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;
var<workgroup> picks: array<u32, 32>;
var<workgroup> soft: vec2<f32>;

// Whether (va, ia) comes before (vb, ib): larger value first, then lower index.
fn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    if (ib == NONE) { return ia != NONE; }
    if (ia == NONE) { return false; }
    if (CONTROL == 1u && va == vb) { return ia > ib; }
    return va > vb || (va == vb && ia < ib);
}

// The temperature-scaled logit of expert i.
fn scaled(src: u32, i: u32) -> f32 {
    let z = logits[src * P.e + i];
    return select(z, mul_rn(z, P.inv_temp), P.has_temp != 0u);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x + wid.y * 32768u;
    if (row >= P.m) { return; }
    var src = row;
    if (CONTROL == 6u) { src = min(row + 1u, P.m - 1u); }
    if (P.func == 2u) {
        if (lid == 0u) {
            var mx = -0x1.fffffep+127f;
            for (var i = 0u; i < P.e; i++) { mx = max(mx, scaled(src, i)); }
            mx = ls_pz(mx);
            let nb = (P.e + 31u) >> 5u;
            var total = 0.0;
            var seg = 0.0;
            for (var b = 0u; b < nb; b++) {
                var acc = 0.0;
                for (var i = b * 32u; i < min(b * 32u + 32u, P.e); i++) { acc = acc + ls_exp(ls_sub(scaled(src, i), mx)); }
                seg = seg + acc;
                if ((b & 7u) == 7u || b + 1u == nb) {
                    total = total + seg;
                    seg = 0.0;
                }
            }
            soft = vec2<f32>(mx, ls_recip(total));
        }
        workgroupBarrier();
    }
    let sm = soft;
    let vl = image[row] != 0u && CONTROL != 2u;
    for (var i = lid; i < P.e; i += 256u) {
        let x = scaled(src, i);
        var v = 0.0;
        if (P.func == 0u) {
            v = ls_sqrt(ls_softplus(x));
        } else if (P.func == 1u) {
            v = ls_sigmoid(x);
        } else if (CONTROL == 7u) {
            v = ls_exp(ls_sub(x, sm.x)) * sm.y;
        } else {
            v = mul_rn(ls_exp(ls_sub(x, sm.x)), sm.y);
        }
        s[i] = v;
        biased[i] = ls_add(v, select(bias[i], bias_vl[i], vl));
    }
    workgroupBarrier();
    var pv = 0.0;
    var pi = NONE;
    for (var j = 0u; j < P.k; j++) {
        var cv = 0.0;
        var ci = NONE;
        for (var i = lid; i < P.e; i += 256u) {
            let v = biased[i];
            if ((pi == NONE || before(pv, pi, v, i)) && before(v, i, cv, ci)) {
                cv = v;
                ci = i;
            }
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
        if (lid == 0u) { picks[j] = pi; }
        workgroupBarrier();
    }
    if (lid != 0u) { return; }
    var denom = 1.0;
    if (P.normalize != 0u && P.k > 1u) {
        let last = select(P.k, P.k - 1u, CONTROL == 5u);
        var acc = 0.0;
        for (var j = 0u; j < last; j++) { acc = acc + s[picks[j]]; }
        var seg = 0.0;
        seg = seg + acc;
        var total = 0.0;
        total = total + seg;
        denom = total + 1e-20;
    }
    for (var j = 0u; j < P.k; j++) {
        var v = s[picks[j]];
        if (P.normalize != 0u && P.k > 1u) { v = ls_div(v, denom); }
        if (CONTROL != 3u) { v = mul_rn(v, P.route_scale); }
        ids[row * P.k + j] = f32(picks[j]);
        if (!(CONTROL == 4u && row == P.m - 1u && j == P.k - 1u)) { weights[row * P.k + j] = v; }
    }
}
