// GEMV core shared by the gemv and grouped variants: x rows first..first+cnt times weight rows wbase+n0.. into output columns cbase+n0.. (below cols), R columns per workgroup: consecutive threads take consecutive columns of one block, then segment and total sums in the canonical order (N4); every thread calls it.
fn rows_block(first: u32, cnt: u32, wbase: u32, n0: u32, cols: u32, cbase: u32, lid: u32) {
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    for (var t = lid; t < R * nb; t += 256u) {
        let b = t / R;
        let r = t - b * R;
        let n = n0 + r;
        if (n < cols) {
            let wv = wblock(wbase + n, b, P.k);
            for (var m = 0u; m < cnt; m++) {
                let xm = x_row(first + m, b);
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
            store_out(first + m, cbase + n, total);
        }
    }
}
