// GEMM operand access for e2m1 expert weights [N,K/2] (low nibble = even column) with one e8m0 scale per 32 along K.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> ws: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

fn wword(i: u32) -> u32 { return w[i >> 2u][i & 3u]; }

fn wvals8(n: u32, b: u32, q: u32, k: u32) -> array<f32, 8> {
    let word = wword((n * k + b * 32u + q * 8u) >> 3u);
    var r: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) { r[i] = e2m1_value((word >> (4u * i)) & 15u); }
    return r;
}

fn wblock(n: u32, b: u32, k: u32) -> array<f32, 32> {
    let v = w[(n * k + b * 32u) >> 5u];
    var r: array<f32, 32>;
    for (var j = 0u; j < 4u; j++) {
        for (var i = 0u; i < 8u; i++) { r[8u * j + i] = e2m1_value((v[j] >> (4u * i)) & 15u); }
    }
    return r;
}

fn wscale(n: u32, b: u32, k: u32) -> f32 {
    let idx = n * (k >> 5u) + b;
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

fn xscale(m: u32, b: u32, k: u32) -> f32 { return xs[m * (k >> 5u) + b]; }
