// Row ops: y = ls_add(x, b[col]) (OP 0, the bias add) or y = mul_rn(mul_rn(x, 0.5), ls_add(1, ls_erf(mul_rn(x, 1/sqrt 2)))) (OP 1, the erf GELU), rounded to bf16 when asked; = kernels::vision::row_op.
override OP: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, bf16_out: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const INV_SQRT2: f32 = 0.70710677;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.m * P.d) { return; }
    let col = i - (i / P.d) * P.d;
    var v = 0.0;
    if (OP == 0u) {
        var c = col;
        if (CONTROL == 2u) { c = min(col + 1u, P.d - 1u); }
        v = ls_add(x[i], b[c]);
    } else {
        let a = x[i];
        var t = mul_rn(a, INV_SQRT2);
        if (CONTROL == 2u) { t = a; }
        var half = mul_rn(a, 0.5);
        if (CONTROL == 3u) { half = a; }
        v = mul_rn(half, ls_add(1.0, ls_erf(t)));
    }
    if ((P.bf16_out != 0u) != (CONTROL == 5u)) { v = round_bf16(v); }
    if (!(CONTROL == 1u && i == P.m * P.d - 1u)) { y[i] = v; }
}
