// Row gather: dst[p, c] = src[idx[p], c], a copy; = slicing rows on the CPU.
override CONTROL: u32 = 0u;
struct Params { zero: u32, p: u32, c: u32, r: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read> idx: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.p * P.c) { return; }
    if (CONTROL == 2u && i == P.p * P.c - 1u) { return; }
    let p = i / P.c;
    let c = i - p * P.c;
    var pr = p;
    if (CONTROL == 3u) { pr = min(p + 1u, P.p - 1u); }
    var s = min(idx[pr], P.r - 1u);
    if (CONTROL == 1u) { s = min(s + 1u, P.r - 1u); }
    dst[i] = src[s * P.c + c];
}
