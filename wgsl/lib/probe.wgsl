// Numerics library probe: y[i] = f(a[i]) (or f(a[i], b[i]) for div) for the function FUNC; = numerics::math and numerics::formats.
override FUNC: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, n: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;

fn apply(a: f32, b: f32) -> f32 {
    switch FUNC {
        case 0u: { return ls_exp2(a); }
        case 1u: { return ls_exp(a); }
        case 2u: { return ls_log2(a); }
        case 3u: { return ls_log(a); }
        case 4u: { return ls_log1p(a); }
        case 5u: { return ls_rsqrt(a); }
        case 6u: { return ls_recip(a); }
        case 7u: { return ls_sqrt(a); }
        case 8u: { return ls_div(a, b); }
        case 9u: { return ls_sigmoid(a); }
        case 10u: { return ls_silu(a); }
        case 11u: { return ls_softplus(a); }
        default: { return ls_erf(a); }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.n) { return; }
    var v = x[i];
    if (CONTROL == 2u) { v = x[min(i + 1u, P.n - 1u)]; }
    if (FUNC == 100u) {
        let a = v.x;
        var h = bf16_bits(a);
        var c = e4m3_code(a);
        if (CONTROL == 1u) { h = bitcast<u32>(a) >> 16u; c = e4m3_code(bitcast<f32>(bitcast<u32>(a) & 0xfff00000u)); }
        let words = vec4<u32>(h, c, e2m1_code(a), bitcast<u32>(act_scale_exp(abs(a))));
        for (var j = 0u; j < 4u; j++) {
            if (!(CONTROL == 3u && i == 0u && j == 1u)) { y[4u * i + j] = words[j]; }
        }
        return;
    }
    var r = apply(v.x, v.y);
    if (CONTROL == 1u) { r = round_bf16(r); }
    if (!(CONTROL == 3u && i == 0u)) { y[i] = bitcast<u32>(r); }
}
