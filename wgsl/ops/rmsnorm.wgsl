// RMSNorm y = w * (x * rsqrt(mean(x^2) + eps)): squares unfused, canonical sum (a thread per block of 32, then per segment of 8 blocks), times host 1/D; = kernels::ops::rmsnorm.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, inv_d: f32, eps: f32, bf16_out: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x;
    let nb = (P.d + 31u) >> 5u;
    var src = row;
    if (CONTROL == 5u) { src = min(row + 1u, P.m - 1u); }
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let chunks = (nb + 255u) >> 8u;
    // A thread's full block of the row's one chunk stays in registers for the output.
    var v: array<f32, 32>;
    let held = chunks == 1u && CONTROL != 5u && lid < last && lid * 32u + 32u <= P.d;
    for (var c = 0u; c < chunks; c++) {
        let b = c * 256u + lid;
        var acc = 0.0;
        if (b < last && b * 32u + 32u <= P.d) {
            // A full block: every load issued before the ascending sum.
            for (var q = 0u; q < 32u; q++) { v[q] = x[src * P.d + b * 32u + q]; }
            for (var q = 0u; q < 32u; q++) {
                if (CONTROL == 3u) { acc = acc + v[q] * v[q]; } else { acc = acc + mul_rn(v[q], v[q]); }
            }
        } else if (b < last) {
            for (var i = b * 32u; i < P.d; i++) {
                let xi = x[src * P.d + i];
                if (CONTROL == 3u) { acc = acc + xi * xi; } else { acc = acc + mul_rn(xi, xi); }
            }
        }
        red_max[lid] = acc;
        workgroupBarrier();
        let s = c * 32u + lid;
        if (lid < 32u && s < nseg) {
            var seg = 0.0;
            for (var t = lid * 8u; t < min(lid * 8u + 8u, last - c * 256u); t++) { seg = seg + red_max[t]; }
            red[s] = seg;
        }
        workgroupBarrier();
    }
    let total = canonical_total(nseg, lid, CONTROL == 2u);
    let r = ls_rsqrt(mul_rn(total, P.inv_d) + P.eps);
    if (held) {
        var wv: array<f32, 32>;
        for (var q = 0u; q < 32u; q++) { wv[q] = w[lid * 32u + q]; }
        for (var q = 0u; q < 32u; q++) { store_y(row, lid * 32u + q, wv[q], v[q], r); }
    }
    // Every other element, a thread per element.
    let covered = select(0u, min(last, P.d >> 5u), chunks == 1u && CONTROL != 5u);
    for (var i = lid; i < P.d; i += 256u) {
        if ((i >> 5u) >= covered) { store_y(row, i, w[i], x[row * P.d + i], r); }
    }
}

fn store_y(row: u32, i: u32, w_i: f32, x_i: f32, r: f32) {
    var wi = w_i;
    if (CONTROL == 6u && i == 0u) { wi = wi * 2.0; }
    var v = mul_rn(wi, mul_rn(x_i, r));
    if (P.bf16_out != 0u) { v = round_bf16(v); }
    if (!(CONTROL == 4u && row == 0u && i == 0u)) { y[row * P.d + i] = v; }
}
