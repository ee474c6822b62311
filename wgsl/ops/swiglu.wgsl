// Clamped SwiGLU a = silu(min(g, L)) * clamp(u, -L, L) * weight[row], optionally rounded to bf16; = kernels::ops::swiglu.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, f: u32, limit: f32, bf16_out: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read> rw: array<f32>;
@group(0) @binding(4) var<storage, read_write> a: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.f) { return; }
    let row = i / P.f;
    var gv = min(g[i], P.limit);
    if (CONTROL == 2u) { gv = clamp(g[i], -P.limit, P.limit); }
    var uv = clamp(u[i], -P.limit, P.limit);
    if (CONTROL == 1u) { uv = u[i]; }
    var wr = rw[row];
    if (CONTROL == 4u) { wr = rw[min(row + 1u, P.m - 1u)]; }
    var v = mul_rn(mul_rn(ls_silu(gv), uv), wr);
    if (P.bf16_out != 0u && CONTROL != 5u) { v = round_bf16(v); }
    if (!(CONTROL == 3u && i == 0u)) { a[i] = v; }
}
