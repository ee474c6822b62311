// GEMM shared pieces: parameters, controls, and the exact block dot (32 products ascending from +0.0, each through the format's term rule).
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, n: u32, k: u32, n_base: u32, ldo: u32, groups_x: u32, round: u32 }
@group(0) @binding(0) var<uniform> P: Params;

// Eight decoded weights, columns ascending.
struct W8 { a: vec4<f32>, b: vec4<f32> }

// A decoded block of 32 weights, columns ascending.
struct W32 { v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>, v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32> }

fn dot4(s: f32, a: vec4<f32>, c: vec4<f32>) -> f32 {
    var t = s + term(a.x * c.x);
    t = t + term(a.y * c.y);
    t = t + term(a.z * c.z);
    return t + term(a.w * c.w);
}

fn x_block(m: u32, b: u32) -> W32 {
    let base = (m * P.k + b * 32u) >> 2u;
    return W32(x[base], x[base + 1u], x[base + 2u], x[base + 3u], x[base + 4u], x[base + 5u], x[base + 6u], x[base + 7u]);
}

// The block dot with the x block already loaded, back in the weights' own units.
fn block_dot_x(xv: W32, wv: W32) -> f32 {
    var s = dot4(0.0, xv.v0, wv.v0);
    s = dot4(s, xv.v1, wv.v1);
    s = dot4(s, xv.v2, wv.v2);
    s = dot4(s, xv.v3, wv.v3);
    s = dot4(s, xv.v4, wv.v4);
    s = dot4(s, xv.v5, wv.v5);
    s = dot4(s, xv.v6, wv.v6);
    return dot4(s, xv.v7, wv.v7) * W_UNIT;
}

fn block_dot(m: u32, b: u32, wv: W32) -> f32 {
    return block_dot_x(x_block(m, b), wv);
}

fn block_scale(m: u32, n: u32, b: u32) -> f32 {
    let sc = xscale(m, b, P.k) * wscale(n, b, P.k);
    return select(sc, sc * 2.0, CONTROL == 5u && b == 0u);
}

fn x_row(m: u32, b: u32) -> u32 {
    return select(m, min(m + 1u, P.m - 1u), CONTROL == 3u && b + 1u == P.k >> 5u);
}

// Stores one output, rounded to bf16 when the parameters ask for it.
fn store_out(m: u32, n: u32, v: f32) {
    if (CONTROL == 4u && m == 0u && n == 0u) { return; }
    let keep = CONTROL == 6u && m == 0u && n == 0u;
    out[m * P.ldo + P.n_base + n] = select(v, round_bf16(v), P.round != 0u && !keep);
}
