// GEMM small-tile core: 16x128 tiles of an entry for entries of few rows, K staged 16 at a time, 4x2 outputs per thread, per-output block sums in the canonical order (N4).
var<workgroup> As: array<vec4<f32>, 64>;
var<workgroup> Bs: array<vec2<f32>, 1024>;

// Scales of block b for row m and the entry's two columns n0, n0+1 (clamped into range).
fn scale2(g: Entry, m: u32, n0: u32, b: u32) -> vec2<f32> {
    let mm = x_row(min(m, g.end - 1u), b);
    let l = g.cols - 1u;
    return vec2<f32>(block_scale(mm, g.wbase + min(n0, l), b), block_scale(mm, g.wbase + min(n0 + 1u, l), b));
}

fn store2(g: Entry, m: u32, n0: u32, v: vec2<f32>) {
    if (m >= g.end) { return; }
    if (n0 < g.cols) { store_out(m, g.cbase + n0, v.x); }
    if (n0 + 1u < g.cols) { store_out(m, g.cbase + n0 + 1u, v.y); }
}

// One 16x128 output tile at x rows m0.. (below g.end) and the entry's columns n0..; every thread calls it.
fn tile_small(g: Entry, m0: u32, n0: u32, tid: u32) {
    let tx = tid & 63u;
    let ty = tid >> 6u;
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let zero2 = vec2<f32>(0.0);
    var t0 = zero2;
    var t1 = zero2;
    var t2 = zero2;
    var t3 = zero2;
    let mi = m0 + ty * 4u;
    let nj = n0 + tx * 2u;
    // Threads whose four rows or two columns all lie past the entry skip the products and scales.
    let live = mi < g.end && nj < g.cols;
    let bn = n0 + (tid >> 1u);
    let am = m0 + (tid >> 1u);
    for (var si = 0u; si < nseg; si++) {
        let s = select(si, nseg - 1u - si, CONTROL == 2u);
        var s0 = zero2;
        var s1 = zero2;
        var s2 = zero2;
        var s3 = zero2;
        for (var b = s * 8u; b < min(s * 8u + 8u, last); b++) {
            var b01 = vec4<f32>(0.0);
            var b23 = vec4<f32>(0.0);
            for (var h = 0u; h < 2u; h++) {
                let q = h * 2u + (tid & 1u);
                let k0 = (tid & 1u) * 8u;
                var wv = W8(vec4<f32>(0.0), vec4<f32>(0.0));
                if (bn < g.cols) { wv = wvals8(g.wbase + bn, b, q, P.k); }
                let bc = (tid >> 1u) & 1u;
                let bt = (tid >> 2u);
                Bs[(k0 + 0u) * 64u + bt][bc] = wv.a.x;
                Bs[(k0 + 1u) * 64u + bt][bc] = wv.a.y;
                Bs[(k0 + 2u) * 64u + bt][bc] = wv.a.z;
                Bs[(k0 + 3u) * 64u + bt][bc] = wv.a.w;
                Bs[(k0 + 4u) * 64u + bt][bc] = wv.b.x;
                Bs[(k0 + 5u) * 64u + bt][bc] = wv.b.y;
                Bs[(k0 + 6u) * 64u + bt][bc] = wv.b.z;
                Bs[(k0 + 7u) * 64u + bt][bc] = wv.b.w;
                if (tid < 32u) {
                    var av = W8(vec4<f32>(0.0), vec4<f32>(0.0));
                    if (am < g.end) {
                        let base = (x_row(am, b) * P.k + b * 32u + q * 8u) >> 2u;
                        av = W8(x[base], x[base + 1u]);
                    }
                    let ar = (tid >> 1u) & 3u;
                    let at = tid >> 3u;
                    As[(k0 + 0u) * 4u + at][ar] = av.a.x;
                    As[(k0 + 1u) * 4u + at][ar] = av.a.y;
                    As[(k0 + 2u) * 4u + at][ar] = av.a.z;
                    As[(k0 + 3u) * 4u + at][ar] = av.a.w;
                    As[(k0 + 4u) * 4u + at][ar] = av.b.x;
                    As[(k0 + 5u) * 4u + at][ar] = av.b.y;
                    As[(k0 + 6u) * 4u + at][ar] = av.b.z;
                    As[(k0 + 7u) * 4u + at][ar] = av.b.w;
                }
                workgroupBarrier();
                if (live) {
                    for (var kk = 0u; kk < 16u; kk++) {
                        let a = As[kk * 4u + ty];
                        let c = Bs[kk * 64u + tx];
                        b01 = b01 + term4(vec4<f32>(a.x * c.x, a.x * c.y, a.y * c.x, a.y * c.y));
                        b23 = b23 + term4(vec4<f32>(a.z * c.x, a.z * c.y, a.w * c.x, a.w * c.y));
                    }
                }
                workgroupBarrier();
            }
            if (live) {
                s0 = s0 + (vec2<f32>(b01.x, b01.y) * W_UNIT) * scale2(g, mi, nj, b);
                s1 = s1 + (vec2<f32>(b01.z, b01.w) * W_UNIT) * scale2(g, mi + 1u, nj, b);
                s2 = s2 + (vec2<f32>(b23.x, b23.y) * W_UNIT) * scale2(g, mi + 2u, nj, b);
                s3 = s3 + (vec2<f32>(b23.z, b23.w) * W_UNIT) * scale2(g, mi + 3u, nj, b);
            }
        }
        t0 = t0 + s0;
        t1 = t1 + s1;
        t2 = t2 + s2;
        t3 = t3 + s3;
    }
    store2(g, mi, nj, t0);
    store2(g, mi + 1u, nj, t1);
    store2(g, mi + 2u, nj, t2);
    store2(g, mi + 3u, nj, t3);
}
