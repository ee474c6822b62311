// act_quant: per block of 32, amax (order-free), scale 2^ceil(log2(max(amax,1e-4)/448)) from bits, e4m3 RNE; a thread per element, 8 blocks per workgroup; = kernels::ops::act_quant.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, k: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;

var<workgroup> aq_max: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let nb = P.k >> 5u;
    let total = P.m * nb;
    let blk = (wid.x + wid.y * P.groups_x) * 8u + (lid >> 5u);
    let i = lid & 31u;
    let live = blk < total;
    var src = blk;
    if (CONTROL == 4u && blk + nb < total) { src = blk + nb; }
    var a = 0.0;
    if (live && !(CONTROL == 1u && i == 31u)) { a = abs(x[src * 32u + i]); }
    aq_max[lid] = a;
    workgroupBarrier();
    for (var h = 16u; h > 0u; h >>= 1u) {
        if (i < h) { aq_max[lid] = max(aq_max[lid], aq_max[lid + h]); }
        workgroupBarrier();
    }
    if (!live) { return; }
    var e = act_scale_exp(aq_max[lid & ~31u]);
    if (CONTROL == 2u) { e = e - 1; }
    let v = x[blk * 32u + i];
    var c = act_quant_code(v, e);
    if (CONTROL == 5u) { c = e4m3_code(bitcast<f32>(bitcast<u32>(clamp(v * pow2i(-e), -448.0, 448.0)) & 0xfff00000u)); }
    if (!(CONTROL == 3u && blk == 0u && i == 0u)) { q[blk * 32u + i] = e4m3_value(c); }
    if (i == 0u) { s[blk] = pow2i(e); }
}
