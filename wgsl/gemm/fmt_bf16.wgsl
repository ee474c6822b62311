// GEMM operand access for bf16 weights [N,K] (two per word, low half first) with bf16-valued activations; unit scales.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn wword(i: u32) -> u32 { return w[i >> 2u][i & 3u]; }

fn wvals8(n: u32, b: u32, q: u32, k: u32) -> array<f32, 8> {
    let v = w[(n * k + b * 32u + q * 8u) >> 3u];
    var r: array<f32, 8>;
    for (var j = 0u; j < 4u; j++) {
        r[2u * j] = bitcast<f32>(v[j] << 16u);
        r[2u * j + 1u] = bitcast<f32>(v[j] & 0xffff0000u);
    }
    return r;
}

fn wblock(n: u32, b: u32, k: u32) -> array<f32, 32> {
    let base = (n * k + b * 32u) >> 3u;
    var r: array<f32, 32>;
    for (var h = 0u; h < 4u; h++) {
        let v = w[base + h];
        for (var j = 0u; j < 4u; j++) {
            r[8u * h + 2u * j] = bitcast<f32>(v[j] << 16u);
            r[8u * h + 2u * j + 1u] = bitcast<f32>(v[j] & 0xffff0000u);
        }
    }
    return r;
}

fn wscale(n: u32, b: u32, k: u32) -> f32 { return 1.0; }

fn xscale(m: u32, b: u32, k: u32) -> f32 { return 1.0; }
