// Grouped GEMM: table entries (weight row base, first x row, rows, output column base, columns), a workgroup per (R columns, entry); each entry's rows in chunks that fit workgroup memory, then the gemv variant's block, segment and total sums (N4).
override R: u32 = 4u;
const PART: u32 = 4091u;
var<workgroup> part: array<f32, 4091>;
var<workgroup> entry: array<u32, 5>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    LS_ZERO = P.zero;
    if (lid < 5u) { entry[lid] = table[wid.y * 5u + lid]; }
    let wbase = workgroupUniformLoad(&entry[0]);
    let first = workgroupUniformLoad(&entry[1]);
    let rows = workgroupUniformLoad(&entry[2]);
    let cbase = workgroupUniformLoad(&entry[3]);
    let cols = workgroupUniformLoad(&entry[4]);
    let n0 = wid.x * R;
    if (n0 >= cols) { return; }
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let mc = max(1u, PART / (nb * R));
    for (var m0 = 0u; m0 < rows; m0 += mc) {
        let cnt = min(mc, rows - m0);
        for (var t = lid; t < R * nb; t += 256u) {
            let b = t / R;
            let r = t - b * R;
            let n = n0 + r;
            if (n < cols) {
                let wv = wblock(wbase + n, b, P.k);
                for (var m = 0u; m < cnt; m++) {
                    let xm = x_row(first + m0 + m, b);
                    var v = block_dot(xm, b, wv) * block_scale(xm, wbase + n, b);
                    if (b >= last) { v = 0.0; }
                    part[(m * nb + b) * R + r] = v;
                }
            }
        }
        workgroupBarrier();
        for (var t = lid; t < cnt * R * nseg; t += 256u) {
            let r = t % R;
            let ms = t / R;
            let s = ms % nseg;
            let m = ms / nseg;
            var seg = 0.0;
            for (var b = s * 8u; b < min(s * 8u + 8u, nb); b++) { seg = seg + part[(m * nb + b) * R + r]; }
            part[(m * nb + s * 8u) * R + r] = seg;
        }
        workgroupBarrier();
        for (var t = lid; t < cnt * R; t += 256u) {
            let m = t / R;
            let r = t - m * R;
            let n = n0 + r;
            if (n < cols) {
                var total = 0.0;
                for (var si = 0u; si < nseg; si++) {
                    let s = select(si, nseg - 1u - si, CONTROL == 2u);
                    total = total + part[(m * nb + s * 8u) * R + r];
                }
                store_out(first + m0 + m, cbase + n, total);
            }
        }
        workgroupBarrier();
    }
}
