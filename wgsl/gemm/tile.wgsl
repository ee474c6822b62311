// GEMM tile core shared by the tiled variants: 64x64 tiles of an entry (weight row base, x row end, output column base, columns), 4x4 outputs per thread, per-output block sums in the canonical order (N4).
var<workgroup> As: array<vec4<f32>, 512>;
var<workgroup> Bs: array<vec4<f32>, 512>;

// Scales of block b for row m and the entry's four columns n0..n0+3 (clamped into range).
fn scale4(g: Entry, m: u32, n0: u32, b: u32) -> vec4<f32> {
    let mm = x_row(min(m, g.end - 1u), b);
    let l = g.cols - 1u;
    return vec4<f32>(block_scale(mm, g.wbase + min(n0, l), b), block_scale(mm, g.wbase + min(n0 + 1u, l), b), block_scale(mm, g.wbase + min(n0 + 2u, l), b), block_scale(mm, g.wbase + min(n0 + 3u, l), b));
}

fn store4(g: Entry, m: u32, n0: u32, v: vec4<f32>) {
    if (m >= g.end) { return; }
    for (var j = 0u; j < 4u; j++) {
        if (n0 + j < g.cols) { store_out(m, g.cbase + n0 + j, v[j]); }
    }
}

// One 64x64 output tile at x rows m0.. (below g.end) and the entry's columns n0..: 4x4 outputs per thread in registers, per-output block sums in the canonical order; every thread calls it.
fn tile(g: Entry, m0: u32, n0: u32, tid: u32) {
    let tx = tid & 15u;
    let ty = tid >> 4u;
    let lr = tid >> 2u;
    let q = tid & 3u;
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let zero4 = vec4<f32>(0.0);
    var t0 = zero4;
    var t1 = zero4;
    var t2 = zero4;
    var t3 = zero4;
    let mi = m0 + ty * 4u;
    let nj = n0 + tx * 4u;
    // Threads whose four rows or four columns all lie past the entry skip the products and scales.
    let live = mi < g.end && nj < g.cols;
    for (var si = 0u; si < nseg; si++) {
        let s = select(si, nseg - 1u - si, CONTROL == 2u);
        var s0 = zero4;
        var s1 = zero4;
        var s2 = zero4;
        var s3 = zero4;
        for (var b = s * 8u; b < min(s * 8u + 8u, last); b++) {
            let am = m0 + lr;
            var av = W8(zero4, zero4);
            if (am < g.end) {
                let base = (x_row(am, b) * P.k + b * 32u + q * 8u) >> 2u;
                av = W8(x[base], x[base + 1u]);
            }
            let bn = n0 + lr;
            var wv = W8(zero4, zero4);
            if (bn < g.cols) { wv = wvals8(g.wbase + bn, b, q, P.k); }
            let row = lr >> 2u;
            let c = lr & 3u;
            let k0 = q * 8u;
            As[(k0 + 0u) * 16u + row][c] = av.a.x;
            As[(k0 + 1u) * 16u + row][c] = av.a.y;
            As[(k0 + 2u) * 16u + row][c] = av.a.z;
            As[(k0 + 3u) * 16u + row][c] = av.a.w;
            As[(k0 + 4u) * 16u + row][c] = av.b.x;
            As[(k0 + 5u) * 16u + row][c] = av.b.y;
            As[(k0 + 6u) * 16u + row][c] = av.b.z;
            As[(k0 + 7u) * 16u + row][c] = av.b.w;
            Bs[(k0 + 0u) * 16u + row][c] = wv.a.x;
            Bs[(k0 + 1u) * 16u + row][c] = wv.a.y;
            Bs[(k0 + 2u) * 16u + row][c] = wv.a.z;
            Bs[(k0 + 3u) * 16u + row][c] = wv.a.w;
            Bs[(k0 + 4u) * 16u + row][c] = wv.b.x;
            Bs[(k0 + 5u) * 16u + row][c] = wv.b.y;
            Bs[(k0 + 6u) * 16u + row][c] = wv.b.z;
            Bs[(k0 + 7u) * 16u + row][c] = wv.b.w;
            workgroupBarrier();
            var b0 = zero4;
            var b1 = zero4;
            var b2 = zero4;
            var b3 = zero4;
            if (live) {
                for (var kk = 0u; kk < 32u; kk++) {
                    let a = As[kk * 16u + ty];
                    let cw = Bs[kk * 16u + tx];
                    b0 = b0 + term4(a.x * cw);
                    b1 = b1 + term4(a.y * cw);
                    b2 = b2 + term4(a.z * cw);
                    b3 = b3 + term4(a.w * cw);
                }
            }
            workgroupBarrier();
            if (live) {
                s0 = s0 + (b0 * W_UNIT) * scale4(g, mi, nj, b);
                s1 = s1 + (b1 * W_UNIT) * scale4(g, mi + 1u, nj, b);
                s2 = s2 + (b2 * W_UNIT) * scale4(g, mi + 2u, nj, b);
                s3 = s3 + (b3 * W_UNIT) * scale4(g, mi + 3u, nj, b);
            }
        }
        t0 = t0 + s0;
        t1 = t1 + s1;
        t2 = t2 + s2;
        t3 = t3 + s3;
    }
    store4(g, mi, nj, t0);
    store4(g, mi + 1u, nj, t1);
    store4(g, mi + 2u, nj, t2);
    store4(g, mi + 3u, nj, t3);
}
