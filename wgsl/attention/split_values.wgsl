// Stage 3 of split attention, a workgroup per (head, 32 output dims, row): the max, weights and denominator as attention.wgsl forms them, then each dim's weighted values a thread per block of 32 keys and the blocks summed in segments of 8, so the bits equal the one-workgroup kernel.
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> nk: array<u32>;
@group(0) @binding(3) var<storage, read> s: array<f32>;
@group(0) @binding(4) var<storage, read> sink: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;

const DIMS: u32 = 32u;
var<workgroup> w: array<f32, 1024>;
var<workgroup> part: array<f32, 256>;
var<workgroup> blocks: array<f32, 1024>;
var<workgroup> denom: f32;
var<workgroup> n_keys: u32;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h = wid.x;
    let row = P.row0 + wid.z;
    let lk = key_slots();
    if (lid == 0u) { n_keys = nk[row]; }
    let n = workgroupUniformLoad(&n_keys);
    let sbase = (row * P.heads + h) * lk;
    for (var k = lid; k < n; k += 256u) { w[k] = s[sbase + k]; }
    // Max from -1e30, order-free.
    var mx = -1e30;
    for (var k = lid; k < n; k += 256u) { mx = max(mx, w[k]); }
    part[lid] = mx;
    workgroupBarrier();
    for (var t = 128u; t > 0u; t >>= 1u) {
        if (lid < t) { part[lid] = max(part[lid], part[lid + t]); }
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
    // Values: a thread per (dim, block of 32 keys from +0.0); then a thread per dim over the blocks in segments of 8.
    let d = lid % DIMS;
    let i = wid.y * DIMS + d;
    let gbase = row * lk * P.dim;
    if (i < P.dim) {
        for (var b = lid / DIMS; b < nbk; b += 256u / DIMS) {
            var acc = 0.0;
            for (var k = b * 32u; k < min(b * 32u + 32u, n); k++) {
                let p = w[k];
                let v = g[gbase + k * P.dim + i];
                if (CONTROL == 6u) { acc = acc + p * v; } else { acc = acc + ls_mul_term(p, v); }
            }
            blocks[b * DIMS + d] = acc;
        }
    }
    workgroupBarrier();
    if (lid < DIMS && i < P.dim) {
        var seg = 0.0;
        var tot = 0.0;
        for (var b = 0u; b < nbk; b++) {
            seg = seg + blocks[b * DIMS + d];
            if ((b & 7u) == 7u || b + 1u == nbk) {
                tot = tot + seg;
                seg = 0.0;
            }
        }
        if (CONTROL == 2u) {
            tot = 0.0;
            for (var k = 0u; k < n; k++) { tot = tot + ls_mul_term(w[k], g[gbase + k * P.dim + i]); }
        }
        if (!(CONTROL == 4u && row == 0u && h == 0u && i == 0u)) { o[(row * P.heads + h) * P.dim + i] = round_bf16(ls_div(tot, den)); }
    }
}
