// act_quant: per block of 32, amax (order-free), scale 2^ceil(log2(max(amax,1e-4)/448)) from bits, e4m3 RNE; = kernels::ops::act_quant.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, k: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    LS_ZERO = P.zero;
    let nb = P.k >> 5u;
    let blk = gid.x + gid.y * P.groups_x * 64u;
    if (blk >= P.m * nb) { return; }
    var src = blk;
    if (CONTROL == 4u && blk + nb < P.m * nb) { src = blk + nb; }
    var amax = 0.0;
    let count = select(32u, 31u, CONTROL == 1u);
    for (var i = 0u; i < count; i++) { amax = max(amax, abs(x[src * 32u + i])); }
    var e = act_scale_exp(amax);
    if (CONTROL == 2u) { e = e - 1; }
    for (var i = 0u; i < 32u; i++) {
        let v = x[blk * 32u + i];
        var c = act_quant_code(v, e);
        if (CONTROL == 5u) { c = e4m3_code(bitcast<f32>(bitcast<u32>(clamp(v * pow2i(-e), -448.0, 448.0)) & 0xfff00000u)); }
        if (!(CONTROL == 3u && blk == 0u && i == 0u)) { q[blk * 32u + i] = e4m3_value(c); }
    }
    s[blk] = pow2i(e);
}
