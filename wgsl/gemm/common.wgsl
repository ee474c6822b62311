// GEMM shared pieces: parameters, controls, and the exact block dot (32 products ascending from +0.0).
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, n: u32, k: u32, n_base: u32, ldo: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;

fn block_dot(m: u32, b: u32, wv: array<f32, 32>) -> f32 {
    let base = (m * P.k + b * 32u) >> 2u;
    var s = 0.0;
    for (var q = 0u; q < 8u; q++) {
        let v = x[base + q];
        s = s + v.x * wv[4u * q];
        s = s + v.y * wv[4u * q + 1u];
        s = s + v.z * wv[4u * q + 2u];
        s = s + v.w * wv[4u * q + 3u];
    }
    return s;
}

fn block_scale(m: u32, n: u32, b: u32) -> f32 {
    let sc = xscale(m, b, P.k) * wscale(n, b, P.k);
    return select(sc, sc * 2.0, CONTROL == 5u && b == 0u);
}

fn x_row(m: u32, b: u32) -> u32 {
    return select(m, min(m + 1u, P.m - 1u), CONTROL == 3u && b + 1u == P.k >> 5u);
}

fn store_out(m: u32, n: u32, v: f32) {
    if (CONTROL == 4u && m == 0u && n == 0u) { return; }
    out[m * P.ldo + P.n_base + n] = v;
}
