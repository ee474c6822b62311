// GEMM for many rows: 64x64 tiles, 4x4 outputs per thread, per-output block sums in the canonical order (N4).
var<workgroup> As: array<f32, 2048>;
var<workgroup> Bs: array<f32, 2048>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    LS_ZERO = P.zero;
    let m0 = wid.y * 64u;
    let n0 = wid.x * 64u;
    let tx = tid & 15u;
    let ty = tid >> 4u;
    let lr = tid >> 2u;
    let q = tid & 3u;
    let nb = P.k >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    var total: array<f32, 16>;
    var seg: array<f32, 16>;
    var bs: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) { total[i] = 0.0; }
    for (var si = 0u; si < nseg; si++) {
        let s = select(si, nseg - 1u - si, CONTROL == 2u);
        for (var i = 0u; i < 16u; i++) { seg[i] = 0.0; }
        for (var b = s * 8u; b < min(s * 8u + 8u, last); b++) {
            let am = m0 + lr;
            var av: array<f32, 8>;
            if (am < P.m) {
                let base = (x_row(am, b) * P.k + b * 32u + q * 8u) >> 2u;
                let v0 = x[base];
                let v1 = x[base + 1u];
                av = array<f32, 8>(v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w);
            } else {
                av = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            }
            let bn = n0 + lr;
            var wv = array<f32, 8>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            if (bn < P.n) { wv = wvals8(bn, b, q, P.k); }
            for (var i = 0u; i < 8u; i++) {
                As[(q * 8u + i) * 64u + lr] = av[i];
                Bs[(q * 8u + i) * 64u + lr] = wv[i];
            }
            workgroupBarrier();
            for (var i = 0u; i < 16u; i++) { bs[i] = 0.0; }
            for (var kk = 0u; kk < 32u; kk++) {
                var a: array<f32, 4>;
                var c: array<f32, 4>;
                for (var i = 0u; i < 4u; i++) {
                    a[i] = As[kk * 64u + ty + 16u * i];
                    c[i] = Bs[kk * 64u + tx + 16u * i];
                }
                for (var i = 0u; i < 4u; i++) {
                    for (var j = 0u; j < 4u; j++) { bs[4u * i + j] = bs[4u * i + j] + a[i] * c[j]; }
                }
            }
            workgroupBarrier();
            for (var i = 0u; i < 4u; i++) {
                let m = min(m0 + ty + 16u * i, P.m - 1u);
                for (var j = 0u; j < 4u; j++) {
                    let n = min(n0 + tx + 16u * j, P.n - 1u);
                    seg[4u * i + j] = seg[4u * i + j] + bs[4u * i + j] * block_scale(x_row(m, b), n, b);
                }
            }
        }
        for (var i = 0u; i < 16u; i++) { total[i] = total[i] + seg[i]; }
    }
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + ty + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + tx + 16u * j;
            if (m < P.m && n < P.n) { store_out(m, n, total[4u * i + j]); }
        }
    }
}
