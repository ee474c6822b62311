// Sparse attention with sink, a workgroup per (row, head); keys = window rows by ascending position (this call's kv from start, the ring slot pos mod window before; with block > 0 every row takes the ring's positions from start - window and all block kv rows) then the selected compressed rows in selection order; s = mul_rn(canonical dot of product terms, scale), M = max(-1e30, s) order-free with +0 for a zero, p = ls_exp(s - M), denominator = canonical sum of p + ls_exp(sink - M), o = bf16(ls_div(canonical sum of product terms p v, denominator)); differences flushed, product terms below 2^-103 dropped (N7): bit-identical to kernels::attention::attend_row.
override CONTROL: u32 = 0u;
struct Params { zero: u32, row0: u32, m: u32, heads: u32, dim: u32, start: u32, window: u32, topk: u32, scale: f32, block: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kv: array<f32>;
@group(0) @binding(3) var<storage, read> ring: array<f32>;
@group(0) @binding(4) var<storage, read> comp: array<f32>;
@group(0) @binding(5) var<storage, read> sel: array<f32>;
@group(0) @binding(6) var<storage, read> sink: array<f32>;
@group(0) @binding(7) var<storage, read_write> o: array<f32>;

// A key is a row of kv, of the ring (KEY_RING) or of the compressed cache (KEY_COMP).
const KEY_COMP: u32 = 0x80000000u;
const KEY_RING: u32 = 0x40000000u;
const KEY_ROW: u32 = 0x3fffffffu;
const MAX_KEYS: u32 = 1024u;
var<workgroup> keys: array<u32, 1024>;
var<workgroup> w: array<f32, 1024>;
var<workgroup> part: array<f32, 256>;
var<workgroup> counts: array<u32, 256>;
var<workgroup> n_keys: u32;
var<workgroup> denom: f32;

// Element i of the key with list entry e.
fn key_elem(e: u32, i: u32) -> f32 {
    let at = (e & KEY_ROW) * P.dim + i;
    if ((e & KEY_COMP) != 0u) { return comp[at]; }
    if ((e & KEY_RING) != 0u) { return ring[at]; }
    return kv[at];
}

// Fills keys[0..n_keys] for query row `row`: window positions ascending, then the selection's entries >= 0 in order.
fn gather(row: u32, lid: u32) {
    let p = P.start + row;
    var lo = select(0u, p + 1u - P.window, p + 1u >= P.window);
    var nw = p + 1u - lo;
    if (P.block > 0u && CONTROL != 8u) {
        lo = select(0u, P.start - P.window, P.start >= P.window);
        nw = P.start + P.block - lo;
    }
    for (var j = lid; j < nw; j += 256u) {
        let pos = lo + j;
        var slot = pos % P.window;
        if (CONTROL == 7u) { slot = (pos + 1u) % P.window; }
        keys[j] = select(KEY_RING | slot, pos - P.start, pos >= P.start);
    }
    var srow = row;
    if (CONTROL == 3u) { srow = min(row + 1u, P.m - 1u); }
    let per = (P.topk + 255u) >> 8u;
    let c0 = min(lid * per, P.topk);
    let c1 = min(c0 + per, P.topk);
    let base = srow * P.topk;
    var cnt = 0u;
    for (var c = c0; c < c1; c++) { if (sel[base + c] >= 0.0) { cnt++; } }
    counts[lid] = cnt;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0u;
        for (var t = 0u; t < 256u; t++) {
            let ct = counts[t];
            counts[t] = acc;
            acc += ct;
        }
        n_keys = min(nw + acc, MAX_KEYS);
    }
    workgroupBarrier();
    var at = nw + counts[lid];
    for (var c = c0; c < c1; c++) {
        let v = sel[base + c];
        if (v >= 0.0 && at < MAX_KEYS) {
            keys[at] = KEY_COMP | u32(v);
            at++;
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h = wid.x;
    let row = P.row0 + wid.y;
    gather(row, lid);
    var n = workgroupUniformLoad(&n_keys);
    if (CONTROL == 1u) { n = max(n, 2u) - 1u; }
    // Scores: a thread per (key, block of 32 dims); a thread per key then sums its blocks in segments of 8.
    let nb = (P.dim + 31u) >> 5u;
    let kpp = 256u / nb;
    let mk = lid / nb;
    let mb = lid - mk * nb;
    let qbase = (row * P.heads + h) * P.dim;
    let blen = min(32u, P.dim - min(mb * 32u, P.dim));
    var qb: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        if (mk < kpp && j < blen) { qb[j] = q[qbase + mb * 32u + j]; }
    }
    for (var k0 = 0u; k0 < n; k0 += kpp) {
        let k = k0 + mk;
        if (mk < kpp && k < n) {
            let e = keys[k];
            var acc = 0.0;
            for (var j = 0u; j < 32u; j++) {
                if (j < blen) { acc = acc + ls_mul_term(qb[j], key_elem(e, mb * 32u + j)); }
            }
            part[lid] = acc;
        }
        workgroupBarrier();
        if (lid < kpp && k0 + lid < n) {
            var seg = 0.0;
            var tot = 0.0;
            for (var b = 0u; b < nb; b++) {
                seg = seg + part[lid * nb + b];
                if ((b & 7u) == 7u || b + 1u == nb) {
                    tot = tot + seg;
                    seg = 0.0;
                }
            }
            w[k0 + lid] = mul_rn(tot, P.scale);
        }
        workgroupBarrier();
    }
    // Max from -1e30, order-free.
    var mx = -1e30;
    for (var k = lid; k < n; k += 256u) { mx = max(mx, w[k]); }
    part[lid] = mx;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) { part[lid] = max(part[lid], part[lid + s]); }
        workgroupBarrier();
    }
    let m = ls_pz(part[0]);
    workgroupBarrier();
    for (var k = lid; k < n; k += 256u) { w[k] = ls_exp(ls_sub(w[k], m)); }
    workgroupBarrier();
    // Denominator: a thread per block of 32 keys, then one thread over blocks in segments of 8, plus the sink.
    let nbk = (n + 31u) >> 5u;
    if (lid < nbk) {
        var acc = 0.0;
        for (var k = lid * 32u; k < min(lid * 32u + 32u, n); k++) { acc = acc + w[k]; }
        part[lid] = acc;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var seg = 0.0;
        var tot = 0.0;
        for (var b = 0u; b < nbk; b++) {
            seg = seg + part[b];
            if ((b & 7u) == 7u || b + 1u == nbk) {
                tot = tot + seg;
                seg = 0.0;
            }
        }
        denom = select(tot + ls_exp(ls_sub(sink[h], m)), tot, CONTROL == 5u);
    }
    let den = workgroupUniformLoad(&denom);
    // Values: a thread per pair of output dims (i, i + 256), keys in blocks of 32 from +0.0, segments of 8 blocks.
    for (var i = lid; i < P.dim; i += 512u) {
        let i2 = min(i + 256u, P.dim - 1u);
        var seg = vec2<f32>(0.0);
        var tot = vec2<f32>(0.0);
        for (var b = 0u; b < nbk; b++) {
            var acc = vec2<f32>(0.0);
            for (var k = b * 32u; k < min(b * 32u + 32u, n); k++) {
                let e = keys[k];
                let p = w[k];
                let v = vec2<f32>(key_elem(e, i), key_elem(e, i2));
                if (CONTROL == 6u) {
                    acc = acc + p * v;
                } else if (CONTROL == 2u) {
                    tot = tot + vec2<f32>(ls_mul_term(p, v.x), ls_mul_term(p, v.y));
                } else {
                    acc = acc + vec2<f32>(ls_mul_term(p, v.x), ls_mul_term(p, v.y));
                }
            }
            seg = seg + acc;
            if ((b & 7u) == 7u || b + 1u == nbk) {
                tot = tot + seg;
                seg = vec2<f32>(0.0);
            }
        }
        let base = (row * P.heads + h) * P.dim;
        if (!(CONTROL == 4u && row == 0u && h == 0u && i == 0u)) { o[base + i] = round_bf16(ls_div(tot.x, den)); }
        if (i + 256u < P.dim) { o[base + i + 256u] = round_bf16(ls_div(tot.y, den)); }
    }
}
