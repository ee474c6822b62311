// FMA instrument (bench only, never in the engine): eight independent vec4 fp32 FMA chains per thread, no memory traffic in the loop.
struct Params { zero: u32, iters: u32, seed: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = f32(gid.x & 255u) * 0.001;
    var a0 = vec4<f32>(s, s + 0.1, s + 0.2, s + 0.3);
    var a1 = a0 + vec4<f32>(0.01);
    var a2 = a0 + vec4<f32>(0.02);
    var a3 = a0 + vec4<f32>(0.03);
    var a4 = a0 + vec4<f32>(0.04);
    var a5 = a0 + vec4<f32>(0.05);
    var a6 = a0 + vec4<f32>(0.06);
    var a7 = a0 + vec4<f32>(0.07);
    let m = vec4<f32>(0.9999) + vec4<f32>(f32(P.zero));
    let c = vec4<f32>(0.0001);
    for (var i = 0u; i < P.iters; i++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    let r = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    if (bitcast<u32>(r.x) == P.seed) { dst[gid.x] = r; }
}
