// GEMM operand access for e2m1 expert weights [N,K/2] (low nibble = even column) with one e8m0 scale per 32 along K.
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> ws: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

// The eight nibbles as their values times 2^-14 (W_UNIT undoes it): each nibble's magnitude bits placed as an f16's low exponent and top mantissa bits (code 1 becomes an f16 subnormal), nibbles i and i+4 in one word; f16 to f32 is exact.
fn e2m1x8(word: u32) -> W8 {
    let p04 = unpack2x16float(((word << 9u) & 0x0e000e00u) | ((word << 12u) & 0x80008000u));
    let p15 = unpack2x16float(((word << 5u) & 0x0e000e00u) | ((word << 8u) & 0x80008000u));
    let p26 = unpack2x16float(((word << 1u) & 0x0e000e00u) | ((word << 4u) & 0x80008000u));
    let p37 = unpack2x16float(((word >> 3u) & 0x0e000e00u) | (word & 0x80008000u));
    return W8(vec4<f32>(p04.x, p15.x, p26.x, p37.x), vec4<f32>(p04.y, p15.y, p26.y, p37.y));
}

const W_UNIT: f32 = 16384.0;

// Eight consecutive weights of row n starting at column b*32 + q*8.
fn wvals8(n: u32, b: u32, q: u32, k: u32) -> W8 {
    return e2m1x8(w_at((n * k + b * 32u) >> 5u)[q]);
}

fn wblock(n: u32, b: u32, k: u32) -> W32 {
    let v = w_at((n * k + b * 32u) >> 5u);
    let a = e2m1x8(v.x);
    let c = e2m1x8(v.y);
    let d = e2m1x8(v.z);
    let e = e2m1x8(v.w);
    return W32(a.a, a.b, c.a, c.b, d.a, d.b, e.a, e.b);
}

fn wscale(n: u32, b: u32, k: u32) -> f32 {
    let idx = n * (k >> 5u) + b + ws_base();
    return e8m0_value(byte_of(ws[idx >> 2u], idx));
}

fn xscale(m: u32, b: u32, k: u32) -> f32 { return xs[m * (k >> 5u) + b]; }

// Products of these formats are never below 2^-18, and the loader keeps weight scales where no scaled sum goes below 2^-125 (N7).
fn term(p: f32) -> f32 { return p; }
fn term4(p: vec4<f32>) -> vec4<f32> { return p; }
