// Level-two masking, elementwise: y = s where mask != 0, else -inf; = kernels::indexer::mask_row.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, n: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> s: array<f32>;
@group(0) @binding(2) var<storage, read> mask: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.n) { return; }
    if (CONTROL == 1u && i == P.m * P.n - 1u) { return; }
    let row = i / P.n;
    var mi = i;
    if (CONTROL == 2u) { mi = min(row + 1u, P.m - 1u) * P.n + i - row * P.n; }
    var keep = mask[mi] != 0.0;
    if (CONTROL == 3u) { keep = !keep; }
    y[i] = select(-ls_inf(), s[i], keep);
}
