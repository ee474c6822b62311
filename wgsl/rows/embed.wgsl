// Embedding gather: y[r, c] = the bf16 at table[id[r], c] widened to f32 (exact); = the CPU executor's embed.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, v: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.d) { return; }
    if (CONTROL == 3u && i == P.m * P.d - 1u) { return; }
    let row = i / P.d;
    let c = i - row * P.d;
    var r = row;
    if (CONTROL == 2u) { r = min(row + 1u, P.m - 1u); }
    let id = min(tok[r], P.v - 1u);
    let e = id * P.d + c;
    var half = e & 1u;
    if (CONTROL == 1u) { half = half ^ 1u; }
    y[i] = bf16_value((table[e >> 1u] >> (16u * half)) & 0xffffu);
}
