// mHC mixes in two passes. PHASE 1, a workgroup per (128 blocks, sum, row): block sums of mul_rn(x, fn[m]) or mul_rn(x, x) (32 products ascending, every sum flushed), then a thread per segment of 8 blocks into seg. PHASE 2, a workgroup per row: totals of the segments ascending (staged through workgroup memory), mu = mul_rn(total, rsqrt), then pre, post and the softmax + Sinkhorn comb a thread per entry in the oracle's order, sums and differences flushed; = kernels::hc::mixes.
override CONTROL: u32 = 0u;
override PHASE: u32 = 1u;
struct Params { zero: u32, m: u32, n: u32, hc: u32, iters: u32, inv_n: f32, norm_eps: f32, hc_eps: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> hc_fn: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> base: array<f32>;
@group(0) @binding(5) var<storage, read_write> mix: array<f32>;
@group(0) @binding(6) var<storage, read_write> seg: array<f32>;
// h and hc_fn again, four elements a load (used where rows start on 16 bytes).
@group(0) @binding(7) var<storage, read> h4: array<vec4<f32>>;
@group(0) @binding(8) var<storage, read> fn4: array<vec4<f32>>;

// Blocks per phase-1 workgroup (16 segments); at most 25 sums (24 mixes and the squares).
const HM_CHUNK: u32 = 128u;
var<workgroup> hm_blocks: array<f32, 128>;
var<workgroup> hm_totals: array<f32, 25>;
// Two copies of the comb (at 0 and 16): a pass reads one and writes the other.
var<workgroup> hm_comb: array<f32, 32>;
const HM_STAGE: u32 = 1024u;
var<workgroup> hm_stage: array<f32, 1024>;

// Comb entry e of the copy at `at` divided by (its row (rows) or column sum, ascending from +0.0, + hc_eps).
fn hm_normalized(e: u32, rows: bool, at: u32) -> f32 {
    let hc = P.hc;
    let i = e / hc;
    let j = e - i * hc;
    var s = 0.0;
    for (var k = 0u; k < hc; k++) { s = s + hm_comb[at + select(k * hc + j, i * hc + k, rows)]; }
    return ls_div(hm_comb[at + e], s + P.hc_eps);
}

// One normalization pass, a thread per entry, from one copy of the comb into the other; every thread calls it and gets the copy now current.
fn hm_pass(lid: u32, rows: bool, at: u32) -> u32 {
    if (lid < P.hc * P.hc) { hm_comb[(at ^ 16u) + lid] = hm_normalized(lid, rows, at); }
    workgroupBarrier();
    return at ^ 16u;
}

// Blocks of 32 the sums cover (one fewer under CONTROL 1) and their segments of 8.
fn hm_last() -> u32 {
    let nb = (P.n + 31u) >> 5u;
    return select(nb, nb - 1u, CONTROL == 1u);
}

fn sums(lid: u32, wid: vec3<u32>) {
    let row = wid.z;
    let s = wid.y;
    let nmix = (2u + P.hc) * P.hc;
    var src = row;
    if (CONTROL == 4u) { src = min(row + 1u, P.m - 1u); }
    let xb = src * P.n;
    let last = hm_last();
    let b = wid.x * HM_CHUNK + lid;
    if (b < last) {
        let lo = b * 32u;
        let len = min(32u, P.n - lo);
        var acc = 0.0;
        if (len == 32u) {
            // A full block: every load issued before the ascending sum.
            var xv: array<f32, 32>;
            var wv: array<f32, 32>;
            if ((P.n & 3u) == 0u) {
                let hb = (xb + lo) >> 2u;
                let fb = (min(s, nmix - 1u) * P.n + lo) >> 2u;
                for (var q = 0u; q < 8u; q++) {
                    let a = h4[hb + q];
                    ls_put4(&xv, q, a);
                    ls_put4(&wv, q, select(a, fn4[fb + q], s < nmix));
                }
            } else {
                for (var q = 0u; q < 32u; q++) {
                    xv[q] = h[xb + lo + q];
                    wv[q] = select(xv[q], hc_fn[min(s, nmix - 1u) * P.n + lo + q], s < nmix);
                }
            }
            for (var q = 0u; q < 32u; q++) {
                let t = select(q, 31u - q, CONTROL == 2u);
                if (CONTROL == 3u) { acc = acc + xv[t] * wv[t]; } else { acc = ls_add(acc, mul_rn(xv[t], wv[t])); }
            }
        } else {
            for (var q = 0u; q < len; q++) {
                let i = lo + select(q, len - 1u - q, CONTROL == 2u);
                let xv = h[xb + i];
                var wv = xv;
                if (s < nmix) { wv = hc_fn[s * P.n + i]; }
                if (CONTROL == 3u) { acc = acc + xv * wv; } else { acc = ls_add(acc, mul_rn(xv, wv)); }
            }
        }
        hm_blocks[lid] = acc;
    }
    workgroupBarrier();
    let j = wid.x * (HM_CHUNK / 8u) + lid;
    let nseg = (last + 7u) >> 3u;
    if (lid < HM_CHUNK / 8u && j < nseg) {
        var acc = 0.0;
        for (var t = lid * 8u; t < min(lid * 8u + 8u, last - wid.x * HM_CHUNK); t++) { acc = ls_add(acc, hm_blocks[t]); }
        seg[(row * (nmix + 1u) + s) * ((((P.n + 31u) >> 5u) + 7u) >> 3u) + j] = acc;
    }
}

@compute @workgroup_size(128)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    if (PHASE == 1u) {
        sums(lid, wid);
        return;
    }
    let row = wid.x;
    let hc = P.hc;
    let nmix = (2u + hc) * hc;
    let nsum = nmix + 1u;
    let stride = (((P.n + 31u) >> 5u) + 7u) >> 3u;
    let nseg = (hm_last() + 7u) >> 3u;
    // Segment sums staged through workgroup memory a chunk at a time (loads in parallel), each total summed ascending.
    var total = 0.0;
    let chunk = max(1u, HM_STAGE / nsum);
    for (var j0 = 0u; j0 < nseg; j0 += chunk) {
        let len = min(chunk, nseg - j0);
        for (var t = lid; t < nsum * len; t += 128u) {
            let q = t / len;
            hm_stage[t] = seg[(row * nsum + q) * stride + j0 + t - q * len];
        }
        workgroupBarrier();
        if (lid < nsum) {
            for (var j = 0u; j < len; j++) { total = ls_add(total, hm_stage[lid * len + j]); }
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
            mix[out + lid] = ls_sigmoid(ls_add(mul_rn(mu, s0), base[lid])) + P.hc_eps;
        } else if (lid < 2u * hc) {
            mix[out + lid] = 2.0 * ls_sigmoid(ls_add(mul_rn(mu, scale[1]), base[lid]));
        } else {
            hm_comb[lid - 2u * hc] = ls_add(mul_rn(mu, scale[2]), base[lid]);
        }
    }
    workgroupBarrier();
    var v = 0.0;
    if (lid < hc * hc) {
        let i = lid / hc;
        var mx = -ls_inf();
        for (var k = 0u; k < hc; k++) { mx = max(mx, hm_comb[i * hc + k]); }
        mx = ls_pz(mx);
        var s = 0.0;
        for (var k = 0u; k < hc; k++) { s = s + ls_exp(ls_sub(hm_comb[i * hc + k], mx)); }
        v = mul_rn(ls_exp(ls_sub(hm_comb[lid], mx)), ls_recip(s)) + P.hc_eps;
    }
    if (lid < hc * hc) { hm_comb[16u + lid] = v; }
    workgroupBarrier();
    var cur = 16u;
    if (CONTROL != 6u) { cur = hm_pass(lid, false, cur); }
    for (var it = 1u; it < P.iters; it++) {
        cur = hm_pass(lid, true, cur);
        cur = hm_pass(lid, false, cur);
    }
    if (lid < hc * hc && !(CONTROL == 5u && row == P.m - 1u && lid == hc * hc - 1u)) { mix[out + 2u * hc + lid] = hm_comb[cur + lid]; }
}
