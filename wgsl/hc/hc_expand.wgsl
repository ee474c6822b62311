// mHC expand y_j[k] = bf16(mul_rn(post_j, out[k]) + sum_i mul_rn(comb[i][j], h_i[k])), every sum flushed, i ascending from +0.0, one thread per output; = kernels::hc::expand.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, hc: u32, d: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> o: array<f32>;
@group(0) @binding(2) var<storage, read> h: array<f32>;
@group(0) @binding(3) var<storage, read> mix: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let width = P.hc * P.d;
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * width) { return; }
    let row = i / width;
    let j = (i - row * width) / P.d;
    let k = i - row * width - j * P.d;
    let mc = (2u + P.hc) * P.hc;
    var mrow = row;
    if (CONTROL == 4u) { mrow = min(row + 1u, P.m - 1u); }
    let count = select(P.hc, P.hc - 1u, CONTROL == 1u);
    var acc = 0.0;
    for (var s = 0u; s < count; s++) {
        let c = select(s, P.hc - 1u - s, CONTROL == 2u);
        let w = mix[mrow * mc + 2u * P.hc + c * P.hc + j];
        let v = h[(row * P.hc + c) * P.d + k];
        if (CONTROL == 3u) { acc = acc + w * v; } else { acc = ls_add(acc, mul_rn(w, v)); }
    }
    var post = mix[mrow * mc + P.hc + j];
    if (CONTROL == 6u) { post = post * 2.0; }
    let r = round_bf16(ls_add(mul_rn(post, o[row * P.d + k]), acc));
    if (!(CONTROL == 5u && i == P.m * width - 1u)) { y[i] = r; }
}
