// QAT round trips, one thread per block, amax order-free: Fp8 (KIND 0) e4m3 per 32, Fp4Rows (KIND 1) e2m1 per 16 with scale e4m3(ls_div(amax, 6)), Fp4Index (KIND 2) e2m1 per 32 with a power-of-two scale; = kernels::qat::qat.
override KIND: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, n: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

// Floors of amax: 6 * 2^-9 (Fp4Rows) and 6 * 2^-126 (Fp4Index).
const QAT_FLOOR_ROWS: f32 = 0x1.8p-7f;
const QAT_FLOOR_INDEX: f32 = 0x1.8p-124f;

// e2m1 code of v, RNE (truncated to one mantissa bit for control 5).
fn qat_e2m1(v: f32) -> u32 {
    if (CONTROL == 5u) { return e2m1_code(bitcast<f32>(bitcast<u32>(v) & 0xffc00000u)); }
    return e2m1_code(v);
}

// e2m1 round trip of v (clamped to +-6) times the scale s; the product is exact.
fn qat_e2m1_round(v: f32, s: f32) -> f32 {
    return e2m1_value(qat_e2m1(clamp(v, -6.0, 6.0))) * s;
}

// Exponent of 2^ceil(log2(a / 6)) for a normal a, from its bits.
fn qat_fp4_scale_exp(a: f32) -> i32 {
    let b = bitcast<u32>(a);
    return i32((b >> 23u) & 0xffu) - 129 + select(0, 1, (b & 0x7fffffu) > 0x400000u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let bs = select(32u, 16u, KIND == 1u);
    let nb = P.n / bs;
    let blk = gid.x + gid.y * P.groups_x * 64u;
    if (blk >= P.m * nb) { return; }
    var src = blk;
    if (CONTROL == 4u && blk + nb < P.m * nb) { src = blk + nb; }
    let count = select(bs, bs - 1u, CONTROL == 1u);
    var amax = 0.0;
    for (var i = 0u; i < count; i++) { amax = max(amax, abs(x[src * bs + i])); }
    for (var i = 0u; i < bs; i++) {
        let v = x[blk * bs + i];
        var o = 0.0;
        if (KIND == 0u) {
            let e = act_scale_exp(amax);
            var c = act_quant_code(v, e);
            if (CONTROL == 5u) { c = e4m3_code(bitcast<f32>(bitcast<u32>(clamp(v * pow2i(-e), -448.0, 448.0)) & 0xfff00000u)); }
            o = e4m3_value(c) * select(pow2i(e), 1.0, CONTROL == 2u);
        } else if (KIND == 1u) {
            let s = e4m3_value(e4m3_code(ls_div(max(amax, QAT_FLOOR_ROWS), 6.0)));
            o = qat_e2m1_round(ls_div(v, s), select(s, 1.0, CONTROL == 2u));
        } else {
            let e = clamp(qat_fp4_scale_exp(max(amax, QAT_FLOOR_INDEX)), -126, 126);
            o = qat_e2m1_round(v * pow2i(-e), select(pow2i(e), 1.0, CONTROL == 2u));
        }
        if (!(CONTROL == 3u && blk == 0u && i == 0u)) { y[blk * bs + i] = o; }
    }
}
