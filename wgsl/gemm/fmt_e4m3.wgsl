// GEMM operand access for e4m3 weights [N,K] with e8m0 32x32 block scales and act_quant'd activations.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> ws: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

fn wword(i: u32) -> u32 { return w[i >> 2u][i & 3u]; }

fn wvals8(n: u32, b: u32, q: u32, k: u32) -> array<f32, 8> {
    let wi = (n * k + b * 32u + q * 8u) >> 2u;
    var r: array<f32, 8>;
    for (var j = 0u; j < 2u; j++) {
        let word = wword(wi + j);
        for (var i = 0u; i < 4u; i++) { r[4u * j + i] = e4m3_value(byte_of(word, i)); }
    }
    return r;
}

fn wblock(n: u32, b: u32, k: u32) -> array<f32, 32> {
    let base = (n * k + b * 32u) >> 4u;
    var r: array<f32, 32>;
    for (var h = 0u; h < 2u; h++) {
        let v = w[base + h];
        for (var j = 0u; j < 4u; j++) {
            for (var i = 0u; i < 4u; i++) { r[16u * h + 4u * j + i] = e4m3_value(byte_of(v[j], i)); }
        }
    }
    return r;
}

fn wscale(n: u32, b: u32, k: u32) -> f32 {
    let idx = (n >> 5u) * (k >> 5u) + b;
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

fn xscale(m: u32, b: u32, k: u32) -> f32 { return xs[m * (k >> 5u) + b]; }
