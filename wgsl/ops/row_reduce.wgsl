// Row reductions for one workgroup of 256 per row: canonical sums (blocks of 32, segments of 8, ascending) and order-free max.
const RED_BLOCKS: u32 = 1024u;
var<workgroup> red: array<f32, 1024>;
var<workgroup> red_max: array<f32, 256>;
var<workgroup> red_out: f32;

// Sums block sums red[0..nb] in the canonical order; callers fill red and all 256 threads call this.
fn canonical_total(nb: u32, lid: u32, reverse: bool) -> f32 {
    workgroupBarrier();
    let nseg = (nb + 7u) >> 3u;
    for (var s = lid; s < nseg; s += 256u) {
        var acc = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, nb); b++) { acc = acc + red[b]; }
        red[s * 8u] = acc;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var t = 0.0;
        for (var si = 0u; si < nseg; si++) {
            let s = select(si, nseg - 1u - si, reverse);
            t = t + red[s * 8u];
        }
        red_out = t;
    }
    workgroupBarrier();
    let r = red_out;
    workgroupBarrier();
    return r;
}

// Maximum over the workgroup of each thread's partial maximum (order-free).
fn workgroup_max(v: f32, lid: u32) -> f32 {
    red_max[lid] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { red_max[lid] = max(red_max[lid], red_max[lid + w]); }
        workgroupBarrier();
    }
    let r = red_max[0];
    workgroupBarrier();
    return r;
}
