// mHC mixes, a workgroup per row: canonical sums of mul_rn(x, fn[m]) and mul_rn(x, x) (block sums in parallel, segments and totals ascending), mu = mul_rn(sum, rsqrt), then pre, post and the softmax + Sinkhorn comb a thread per entry in the oracle's order; = kernels::hc::mixes.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, n: u32, hc: u32, iters: u32, inv_n: f32, norm_eps: f32, hc_eps: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> hc_fn: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> base: array<f32>;
@group(0) @binding(5) var<storage, read_write> mix: array<f32>;

// Blocks of 32 per chunk (a whole number of segments); at most 25 sums (24 mixes and the squares).
const HM_CHUNK: u32 = 128u;
const HM_SUMS: u32 = 25u;
var<workgroup> hm_blocks: array<f32, 3200>;
var<workgroup> hm_totals: array<f32, 25>;
var<workgroup> hm_comb: array<f32, 16>;

// Comb entry e divided by (its row (rows) or column sum, ascending from +0.0, + hc_eps).
fn hm_normalized(e: u32, rows: bool) -> f32 {
    let hc = P.hc;
    let i = e / hc;
    let j = e - i * hc;
    var s = 0.0;
    for (var k = 0u; k < hc; k++) { s = s + hm_comb[select(k * hc + j, i * hc + k, rows)]; }
    return ls_div(hm_comb[e], s + P.hc_eps);
}

// One normalization pass over the comb, a thread per entry; every thread calls it.
fn hm_pass(lid: u32, rows: bool) {
    var v = 0.0;
    if (lid < P.hc * P.hc) { v = hm_normalized(lid, rows); }
    workgroupBarrier();
    if (lid < P.hc * P.hc) { hm_comb[lid] = v; }
    workgroupBarrier();
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    LS_ZERO = P.zero;
    let row = wid.x;
    let hc = P.hc;
    let nmix = (2u + hc) * hc;
    let nsum = nmix + 1u;
    var src = row;
    if (CONTROL == 4u) { src = min(row + 1u, P.m - 1u); }
    let xb = src * P.n;
    let nb = (P.n + 31u) >> 5u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    var seg = 0.0;
    var total = 0.0;
    for (var b0 = 0u; b0 < last; b0 += HM_CHUNK) {
        let cnt = min(HM_CHUNK, last - b0);
        for (var t = lid; t < nsum * cnt; t += 256u) {
            let s = t / cnt;
            let b = b0 + t - s * cnt;
            let lo = b * 32u;
            let len = min(32u, P.n - lo);
            var acc = 0.0;
            for (var q = 0u; q < len; q++) {
                let i = lo + select(q, len - 1u - q, CONTROL == 2u);
                let xv = h[xb + i];
                var wv = xv;
                if (s < nmix) { wv = hc_fn[s * P.n + i]; }
                if (CONTROL == 3u) { acc = acc + xv * wv; } else { acc = acc + mul_rn(xv, wv); }
            }
            hm_blocks[s * HM_CHUNK + b - b0] = acc;
        }
        workgroupBarrier();
        if (lid < nsum) {
            for (var b = b0; b < b0 + cnt; b++) {
                seg = seg + hm_blocks[lid * HM_CHUNK + b - b0];
                if ((b & 7u) == 7u || b + 1u == last) {
                    total = total + seg;
                    seg = 0.0;
                }
            }
        }
        workgroupBarrier();
    }
    if (lid < nsum) { hm_totals[lid] = total; }
    workgroupBarrier();
    let out = row * nmix;
    if (lid < nmix) {
        let r = ls_rsqrt(mul_rn(hm_totals[nmix], P.inv_n) + P.norm_eps);
        let mu = mul_rn(hm_totals[lid], r);
        if (lid < hc) {
            var s0 = scale[0];
            if (CONTROL == 7u) { s0 = s0 * 2.0; }
            mix[out + lid] = ls_sigmoid(mul_rn(mu, s0) + base[lid]) + P.hc_eps;
        } else if (lid < 2u * hc) {
            mix[out + lid] = 2.0 * ls_sigmoid(mul_rn(mu, scale[1]) + base[lid]);
        } else {
            hm_comb[lid - 2u * hc] = mul_rn(mu, scale[2]) + base[lid];
        }
    }
    workgroupBarrier();
    var v = 0.0;
    if (lid < hc * hc) {
        let i = lid / hc;
        var mx = -ls_inf();
        for (var k = 0u; k < hc; k++) { mx = max(mx, hm_comb[i * hc + k]); }
        var s = 0.0;
        for (var k = 0u; k < hc; k++) { s = s + ls_exp(hm_comb[i * hc + k] - mx); }
        v = mul_rn(ls_exp(hm_comb[lid] - mx), ls_recip(s)) + P.hc_eps;
    }
    workgroupBarrier();
    if (lid < hc * hc) { hm_comb[lid] = v; }
    workgroupBarrier();
    if (CONTROL != 6u) { hm_pass(lid, false); }
    for (var it = 1u; it < P.iters; it++) {
        hm_pass(lid, true);
        hm_pass(lid, false);
    }
    if (lid < hc * hc && !(CONTROL == 5u && row == P.m - 1u && lid == hc * hc - 1u)) { mix[out + 2u * hc + lid] = hm_comb[lid]; }
}
