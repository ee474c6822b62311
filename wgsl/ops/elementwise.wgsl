// Elementwise y = a + b (OP 0), y = a * s[row] (OP 1), y = round_bf16(a) (OP 2); each one correctly rounded op, flushed (N7).
override OP: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.d) { return; }
    let row = i / P.d;
    var nrow = row;
    if (CONTROL == 2u) { nrow = min(row + 1u, P.m - 1u); }
    var v = 0.0;
    if (OP == 0u) {
        v = ls_add(a[i], b[nrow * P.d + i - row * P.d]);
    } else if (OP == 1u) {
        v = mul_rn(a[i], b[nrow]);
    } else {
        let av = a[nrow * P.d + i - row * P.d];
        v = bf16_value(select(bf16_bits(av), bitcast<u32>(av) >> 16u, CONTROL == 3u));
    }
    if (CONTROL == 4u && OP != 2u) { v = round_bf16(v); }
    if (!(CONTROL == 1u && i == P.m * P.d - 1u)) { y[i] = v; }
}
