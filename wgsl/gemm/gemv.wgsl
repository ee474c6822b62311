// GEMM for 1-8 rows: consecutive threads take consecutive rows of one block, then segment and total sums in the canonical order (N4).
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
        let b = t / R;
        let r = t - b * R;
        let n = n0 + r;
        if (n < P.n) {
            let wv = wblock(n, b, P.k);
            for (var m = 0u; m < P.m; m++) {
                let xm = x_row(m, b);
                var v = block_dot(xm, b, wv) * block_scale(xm, n, b);
                if (b >= last) { v = 0.0; }
                part[(m * nb + b) * R + r] = v;
            }
        }
    }
    workgroupBarrier();
    for (var t = lid; t < P.m * R * nseg; t += 256u) {
        let r = t % R;
        let ms = t / R;
        let s = ms % nseg;
        let m = ms / nseg;
        var seg = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, nb); b++) { seg = seg + part[(m * nb + b) * R + r]; }
        part[(m * nb + s * 8u) * R + r] = seg;
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
                total = total + part[(m * nb + s * 8u) * R + r];
            }
            store_out(m, n, total);
        }
    }
}
