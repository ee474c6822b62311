// RoPE, one thread per output: pair i of the last rd dims of each head (dims 2i, 2i+1; with HALVES, dims i and i + rd/2) becomes (mul_rn(a, c) - mul_rn(b, s), mul_rn(a, s) + mul_rn(b, c)), sums flushed, s negated for the inverse; every output rounded to bf16; = kernels::rope::rotate.
override HALVES: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, heads: u32, head_dim: u32, rd: u32, inverse: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> cs: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let width = P.heads * P.head_dim;
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * width) { return; }
    let row = i / width;
    let col = i - row * width;
    let p = col - (col / P.head_dim) * P.head_dim;
    let off = P.head_dim - P.rd;
    var v = x[i];
    if (p >= off) {
        let q = p - off;
        let hr = P.rd >> 1u;
        var pair = q >> 1u;
        var second = (q & 1u) == 1u;
        var ia = i - (q & 1u);
        var ib = ia + 1u;
        if (HALVES != 0u) {
            second = q >= hr;
            pair = select(q, q - hr, second);
            ia = i - q + pair;
            ib = ia + hr;
        }
        let a = x[ia];
        let b = x[ib];
        var trow = row;
        if (CONTROL == 2u) { trow = min(row + 1u, P.m - 1u); }
        let c = cs[trow * P.rd + pair];
        var s = cs[trow * P.rd + (P.rd >> 1u) + pair];
        if ((P.inverse != 0u) != (CONTROL == 1u)) { s = -s; }
        if (!second) {
            v = ls_sub(mul_rn(a, c), mul_rn(b, s));
            if (CONTROL == 3u) { v = a * c - b * s; }
        } else {
            v = ls_add(mul_rn(a, s), mul_rn(b, c));
            if (CONTROL == 3u) { v = a * s + b * c; }
        }
    }
    if (CONTROL != 5u) { v = round_bf16(v); }
    if (!(CONTROL == 4u && i == P.m * width - 1u)) { y[i] = v; }
}
