// GEMM for 1-8 rows: threads take (row, block) pairs, then segment and total sums in the canonical order (N4).
override R: u32 = 4u;
var<workgroup> part: array<f32, 4096>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    LS_ZERO = P.zero;
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let n0 = (wid.x + wid.y * P.groups_x) * R;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    for (var t = lid; t < R * nb; t += 256u) {
        let r = t / nb;
        let b = t - r * nb;
        let n = n0 + r;
        if (n < P.n) {
            let wv = wblock(n, b, P.k);
            for (var m = 0u; m < P.m; m++) {
                let xm = x_row(m, b);
                var v = block_dot(xm, b, wv) * block_scale(xm, n, b);
                if (b >= last) { v = 0.0; }
                part[(m * R + r) * nb + b] = v;
            }
        }
    }
    workgroupBarrier();
    for (var t = lid; t < P.m * R * nseg; t += 256u) {
        let mr = t / nseg;
        let s = t - mr * nseg;
        var seg = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, nb); b++) { seg = seg + part[mr * nb + b]; }
        part[mr * nb + s * 8u] = seg;
    }
    workgroupBarrier();
    for (var t = lid; t < P.m * R; t += 256u) {
        let m = t / R;
        let r = t - m * R;
        let n = n0 + r;
        if (n < P.n) {
            var total = 0.0;
            for (var si = 0u; si < nseg; si++) {
                let s = select(si, nseg - 1u - si, CONTROL == 2u);
                total = total + part[t * nb + s * 8u];
            }
            store_out(m, n, total);
        }
    }
}
