// MoE join per element: the row's routed outputs added to +0.0 by ascending expert id, then the shared output, each sum flushed, then bf16; = kernels::moe::join_row and round_bf16.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, k: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> routed: array<f32>;
@group(0) @binding(2) var<storage, read> slot_map: array<u32>;
@group(0) @binding(3) var<storage, read> ids: array<f32>;
@group(0) @binding(4) var<storage, read> shared_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.d) { return; }
    if (CONTROL == 3u && i == P.m * P.d - 1u) { return; }
    let row = i / P.d;
    let c = i - row * P.d;
    var mrow = row;
    if (CONTROL == 5u) { mrow = min(row + 1u, P.m - 1u); }
    let nk = select(P.k, P.k - 1u, CONTROL == 2u);
    var acc = 0.0;
    var prev = -1.0;
    for (var j = 0u; j < nk; j++) {
        var best = 0u;
        var bid = ls_inf();
        for (var p = 0u; p < P.k; p++) {
            let e = ids[row * P.k + p];
            if (e > prev && e < bid) {
                bid = e;
                best = p;
            }
        }
        if (CONTROL == 1u) { best = j; }
        prev = bid;
        acc = ls_add(acc, routed[slot_map[mrow * P.k + best] * P.d + c]);
    }
    acc = ls_add(acc, shared_out[i]);
    if (CONTROL != 4u) { acc = round_bf16(acc); }
    y[i] = acc;
}
