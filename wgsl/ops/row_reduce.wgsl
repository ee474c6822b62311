// Row reductions for one workgroup of 256 per row: canonical sums (a thread per segment of 8 blocks of 32) and order-free max.
const RED_SEGMENTS: u32 = 1024u;
var<workgroup> red: array<f32, 1024>;
var<workgroup> red_max: array<f32, 256>;
var<workgroup> red_out: f32;

// Sums segment sums red[0..nseg] in ascending order (reversed for a control); all 256 threads call this.
fn canonical_total(nseg: u32, lid: u32, reverse: bool) -> f32 {
    workgroupBarrier();
    if (lid == 0u) {
        var t = 0.0;
        for (var si = 0u; si < nseg; si++) {
            let s = select(si, nseg - 1u - si, reverse);
            t = t + red[s];
        }
        red_out = t;
    }
    workgroupBarrier();
    let r = red_out;
    workgroupBarrier();
    return r;
}

// Maximum over the workgroup of each thread's partial maximum (order-free; a zero result is +0).
fn workgroup_max(v: f32, lid: u32) -> f32 {
    red_max[lid] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (lid < w) { red_max[lid] = max(red_max[lid], red_max[lid + w]); }
        workgroupBarrier();
    }
    let r = ls_pz(red_max[0]);
    workgroupBarrier();
    return r;
}
