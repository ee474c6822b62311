// GEMM operand access for e4m3 weights [N,K] with e8m0 32x32 block scales and act_quant'd activations.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> ws: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The four bytes as their values times 2^-8 (W_UNIT undoes it): each byte's magnitude bits placed as an f16's exponent and top mantissa bits (subnormal codes become f16 subnormals), bytes 0 and 2 in one word, 1 and 3 in another; f16 to f32 is exact.
fn e4m3x4(word: u32) -> vec4<f32> {
    let even = unpack2x16float(((word << 7u) & 0x3f803f80u) | ((word << 8u) & 0x80008000u));
    let odd = unpack2x16float(((word >> 1u) & 0x3f803f80u) | (word & 0x80008000u));
    return vec4<f32>(even.x, odd.x, even.y, odd.y);
}

const W_UNIT: f32 = 256.0;

// Eight consecutive weights of row n starting at column b*32 + q*8.
fn wvals8(n: u32, b: u32, q: u32, k: u32) -> W8 {
    let v = w_at((n * k + b * 32u + q * 8u) >> 4u);
    let h = q & 1u;
    let lo = select(v.x, v.z, h == 1u);
    let hi = select(v.y, v.w, h == 1u);
    return W8(e4m3x4(lo), e4m3x4(hi));
}

fn wblock(n: u32, b: u32, k: u32) -> W32 {
    let base = (n * k + b * 32u) >> 4u;
    let v0 = w_at(base);
    let v1 = w_at(base + 1u);
    return W32(e4m3x4(v0.x), e4m3x4(v0.y), e4m3x4(v0.z), e4m3x4(v0.w), e4m3x4(v1.x), e4m3x4(v1.y), e4m3x4(v1.z), e4m3x4(v1.w));
}

fn wscale(n: u32, b: u32, k: u32) -> f32 {
    let idx = (n >> 5u) * (k >> 5u) + b + ws_base();
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

fn xscale(m: u32, b: u32, k: u32) -> f32 { return xs[m * (k >> 5u) + b]; }

// Products of these formats are never below 2^-18, and the loader keeps weight scales where no scaled sum goes below 2^-125 (N7).
fn term(p: f32) -> f32 { return p; }
fn term4(p: vec4<f32>) -> vec4<f32> { return p; }
