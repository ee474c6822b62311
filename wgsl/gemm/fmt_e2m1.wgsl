// GEMM operand access for e2m1 expert weights [N,K/2] (low nibble = even column) with one e8m0 scale per 32 along K.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> ws: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The four low nibbles as their values times 2^-2 (W_UNIT undoes it): magnitude bits under a bias of 2^-3, codes 0 and 1 by min(f, 2f - 2^-2), all normal.
fn e2m1x4(word: u32) -> vec4<f32> {
    let v = vec4<u32>(word);
    let f = bitcast<vec4<f32>>(((v << vec4<u32>(22u, 18u, 14u, 10u)) & vec4<u32>(0x01c00000u)) | vec4<u32>(0x3e000000u));
    let sign = (v << vec4<u32>(28u, 24u, 20u, 16u)) & vec4<u32>(0x80000000u);
    return bitcast<vec4<f32>>(bitcast<vec4<u32>>(min(f, f * 2.0 - 0.25)) | sign);
}

const W_UNIT: f32 = 4.0;

// Eight consecutive weights of row n starting at column b*32 + q*8.
fn wvals8(n: u32, b: u32, q: u32, k: u32) -> W8 {
    let word = w[(n * k + b * 32u) >> 5u][q];
    return W8(e2m1x4(word), e2m1x4(word >> 16u));
}

fn wblock(n: u32, b: u32, k: u32) -> W32 {
    let v = w[(n * k + b * 32u) >> 5u];
    return W32(e2m1x4(v.x), e2m1x4(v.x >> 16u), e2m1x4(v.y), e2m1x4(v.y >> 16u), e2m1x4(v.z), e2m1x4(v.z >> 16u), e2m1x4(v.w), e2m1x4(v.w >> 16u));
}

fn wscale(n: u32, b: u32, k: u32) -> f32 {
    let idx = n * (k >> 5u) + b;
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

fn xscale(m: u32, b: u32, k: u32) -> f32 { return xs[m * (k >> 5u) + b]; }

// Products of these formats are never below 2^-18, and the loader keeps weight scales where no scaled sum goes below 2^-125 (N7).
fn term(p: f32) -> f32 { return p; }
fn term4(p: vec4<f32>) -> vec4<f32> { return p; }
