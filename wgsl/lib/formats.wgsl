// Storage formats (bf16, e4m3fn, e2m1, e8m0) by bit manipulation; identical to src/numerics/formats.rs.

fn rne_shift(m: u32, shift: u32) -> u32 {
    if (shift == 0u) { return m; }
    if (shift > 24u) { return 0u; }
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    return q + select(0u, 1u, rem > half || (rem == half && (q & 1u) == 1u));
}

fn minifloat_code(x: f32, mbits: u32, emin: i32, max_code: u32) -> u32 {
    let b = bitcast<u32>(x) & 0x7fffffffu;
    if (b >= 0x7f800000u) { return max_code; }
    let exp_bits = i32(b >> 23u);
    var mant = (b & 0x7fffffu) | 0x800000u;
    var e = exp_bits - 127;
    if (exp_bits == 0) { mant = b & 0x7fffffu; e = -126; }
    let shift = u32(23 - i32(mbits) + max(emin - e, 0));
    let code = rne_shift(mant, shift) + (u32(max(e - emin, 0)) << mbits);
    return min(code, max_code);
}

fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

fn bf16_value(h: u32) -> f32 {
    return bitcast<f32>(h << 16u);
}

fn round_bf16(x: f32) -> f32 {
    return bf16_value(bf16_bits(x));
}

fn e4m3_code(x: f32) -> u32 {
    let sign = (bitcast<u32>(x) >> 24u) & 0x80u;
    return sign | minifloat_code(x, 3u, -6, 0x7eu);
}

fn e4m3_value(c: u32) -> f32 {
    let mag = bitcast<f32>(((c & 0x7fu) << 20u) + 0x3c000000u);
    let v = select(mag, mag * 2.0 - 0.015625, (c & 0x78u) == 0u);
    return bitcast<f32>(bitcast<u32>(v) | ((c & 0x80u) << 24u));
}

fn e2m1_code(x: f32) -> u32 {
    let sign = (bitcast<u32>(x) >> 28u) & 0x8u;
    return sign | minifloat_code(x, 1u, 0, 7u);
}

fn e2m1_value(c: u32) -> f32 {
    let mag = bitcast<f32>(((c & 7u) << 22u) + 0x3f000000u);
    let v = select(mag, select(0.0, 0.5, (c & 1u) == 1u), (c & 6u) == 0u);
    return bitcast<f32>(bitcast<u32>(v) | ((c & 8u) << 28u));
}

fn e8m0_value(b: u32) -> f32 {
    if (b == 0u) { return bitcast<f32>(0x00400000u); }
    return bitcast<f32>(b << 23u);
}

fn pow2i(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

fn ceil_log2_bits(t: f32) -> i32 {
    let b = bitcast<u32>(t);
    return i32((b >> 23u) & 0xffu) - 127 + select(0, 1, (b & 0x7fffffu) != 0u);
}

fn act_scale_exp(amax: f32) -> i32 {
    let b = bitcast<u32>(max(amax, 1e-4));
    return i32((b >> 23u) & 0xffu) - 127 - 8 + select(0, 1, (b & 0x7fffffu) > 0x600000u);
}

fn act_quant_code(x: f32, e: i32) -> u32 {
    return e4m3_code(clamp(x * pow2i(-e), -448.0, 448.0));
}

fn byte_of(word: u32, i: u32) -> u32 {
    return (word >> (8u * (i & 3u))) & 0xffu;
}
