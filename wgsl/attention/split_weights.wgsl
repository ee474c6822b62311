// Stage 3 of split attention, a workgroup per (head, row): the max, weights and denominator as attention.wgsl forms them; the weights replace the scores in s, the denominator goes to nk after the row's key count (count_at) as f32 bits.
@group(0) @binding(1) var<storage, read_write> s: array<f32>;
@group(0) @binding(2) var<storage, read_write> nk: array<u32>;
@group(0) @binding(3) var<storage, read> sink: array<f32>;

var<workgroup> w: array<f32, 1024>;
var<workgroup> part: array<f32, 256>;
var<workgroup> n_keys: u32;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h = wid.x;
    let row = P.row0 + wid.y;
    let lk = key_slots();
    if (lid == 0u) { n_keys = nk[count_at(row)]; }
    let n = workgroupUniformLoad(&n_keys);
    let sbase = (local_row(row) * P.heads + h) * lk;
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
    for (var k = lid; k < n; k += 256u) {
        let e = ls_exp(ls_sub(w[k], m));
        w[k] = e;
        s[sbase + k] = e;
    }
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
        let den = select(tot + ls_exp(ls_sub(sink[h], m)), tot, CONTROL == 5u);
        nk[count_at(row) + 1u + h] = bitcast<u32>(den);
    }
}
