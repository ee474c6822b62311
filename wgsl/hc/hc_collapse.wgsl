// mHC collapse y[k] = bf16(sum_i mul_rn(pre_i, h_i[k])), i ascending from +0.0, every sum flushed, one thread per output; = kernels::hc::collapse.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, hc: u32, d: u32, mix_cols: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> h: array<f32>;
@group(0) @binding(2) var<storage, read> mix: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.d) { return; }
    let row = i / P.d;
    let k = i - row * P.d;
    var mrow = row;
    if (CONTROL == 4u) { mrow = min(row + 1u, P.m - 1u); }
    let count = select(P.hc, P.hc - 1u, CONTROL == 1u);
    var acc = 0.0;
    for (var s = 0u; s < count; s++) {
        let c = select(s, P.hc - 1u - s, CONTROL == 2u);
        let pre = mix[mrow * P.mix_cols + c];
        let v = h[(row * P.hc + c) * P.d + k];
        if (CONTROL == 3u) { acc = acc + pre * v; } else { acc = ls_add(acc, mul_rn(pre, v)); }
    }
    var o = round_bf16(acc);
    if (CONTROL == 6u) { o = acc; }
    if (!(CONTROL == 5u && i == P.m * P.d - 1u)) { y[i] = o; }
}
