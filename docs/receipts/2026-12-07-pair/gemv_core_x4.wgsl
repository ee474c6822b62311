// GEMV core shared by the gemv and grouped variants: x rows first..first+cnt times weight rows wbase+n0.. into output columns cbase+n0.. (below cols), R columns per workgroup, block sums then segment and total sums in the canonical order (N4); every thread calls it.
// Threads per workgroup: the host sizes it to a whole number of blocks per thread group, so no thread idles while the others take their blocks.
override WG: u32 = 256u;

// Where the block sum of x row m, column r, block b sits in `part`: row-major for one x row, column-fastest for several.
fn part_index(one: bool, m: u32, r: u32, b: u32, nb: u32) -> u32 {
    return select((m * nb + b) * R + r, r * nb + b, one);
}

fn rows_block(first: u32, cnt: u32, wbase: u32, n0: u32, cols: u32, cbase: u32, lid: u32) {
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let rc = min(R, cols - min(n0, cols));
    let one = cnt == 1u;
    if (one) {
        // One x row: a thread keeps its x block and takes that block of every g-th column, two columns' weight blocks loaded before either dot.
        let g = max(1u, WG / nb);
        let gi = select(lid / nb, 0u, nb > WG);
        if (gi < g) {
            for (var b = lid - gi * nb; b < nb; b += WG) {
                let xm = x_row(first, b);
                let xv = x_block(xm, b);
                for (var r = gi; r < rc; r += 2u * g) {
                    let n = wbase + n0 + r;
                    let two = r + g < rc;
                    let n2 = select(n, n + g, two);
                    let wa = wblock(n, b, P.k);
                    let wb = wblock(n2, b, P.k);
                    let va = block_dot_x(xv, wa) * block_scale(xm, n, b);
                    let vb = block_dot_x(xv, wb) * block_scale(xm, n2, b);
                    part[part_index(true, 0u, r, b, nb)] = select(va, 0.0, b >= last);
                    if (two) { part[part_index(true, 0u, r + g, b, nb)] = select(vb, 0.0, b >= last); }
                }
            }
        }
    } else {
        // Several x rows: consecutive threads take consecutive columns of one block, so a warp shares each x block; two rows' dots at a time.
        for (var t = lid; t < rc * nb; t += WG) {
            let b = t / rc;
            let r = t - b * rc;
            let n = wbase + n0 + r;
            let wv = wblock(n, b, P.k);
            for (var m = 0u; m < cnt; m += 4u) {
                let x0 = x_row(first + m, b);
                let x1 = x_row(first + min(m + 1u, cnt - 1u), b);
                let x2 = x_row(first + min(m + 2u, cnt - 1u), b);
                let x3 = x_row(first + min(m + 3u, cnt - 1u), b);
                let v0 = block_dot(x0, b, wv) * block_scale(x0, n, b);
                let v1 = block_dot(x1, b, wv) * block_scale(x1, n, b);
                let v2 = block_dot(x2, b, wv) * block_scale(x2, n, b);
                let v3 = block_dot(x3, b, wv) * block_scale(x3, n, b);
                part[part_index(false, m, r, b, nb)] = select(v0, 0.0, b >= last);
                if (m + 1u < cnt) { part[part_index(false, m + 1u, r, b, nb)] = select(v1, 0.0, b >= last); }
                if (m + 2u < cnt) { part[part_index(false, m + 2u, r, b, nb)] = select(v2, 0.0, b >= last); }
                if (m + 3u < cnt) { part[part_index(false, m + 3u, r, b, nb)] = select(v3, 0.0, b >= last); }
            }
        }
    }
    workgroupBarrier();
    for (var t = lid; t < cnt * R * nseg; t += WG) {
        let r = select(t % R, t / nseg, one);
        let ms = select(t / R, t % nseg, one);
        let s = select(ms % nseg, ms, one);
        let m = select(ms / nseg, 0u, one);
        var seg = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, nb); b++) { seg = seg + part[part_index(one, m, r, b, nb)]; }
        part[part_index(one, m, r, s * 8u, nb)] = seg;
    }
    workgroupBarrier();
    for (var t = lid; t < cnt * R; t += WG) {
        let m = t / R;
        let r = t - m * R;
        let n = n0 + r;
        if (n < cols) {
            var total = 0.0;
            for (var si = 0u; si < nseg; si++) {
                let s = select(si, nseg - 1u - si, CONTROL == 2u);
                total = total + part[part_index(one, m, r, s * 8u, nb)];
            }
            store_out(first + m, cbase + n, total);
        }
    }
}
