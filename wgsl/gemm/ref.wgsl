// GEMM reference: one invocation per output; blocks of 32 from +0.0, scaled, segments of 8 blocks, segments ascending (N4).
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let n = gid.x;
    let m = gid.y;
    if (n >= P.n || m >= P.m) { return; }
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    var total = 0.0;
    for (var si = 0u; si < nseg; si++) {
        let s = select(si, nseg - 1u - si, CONTROL == 2u);
        var seg = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, last); b++) {
            let xm = x_row(m, b);
            seg = seg + block_dot(xm, b, wblock(n, b, P.k)) * block_scale(xm, n, b);
        }
        total = total + seg;
    }
    store_out(m, n, total);
}
