// RMSNorm y = w * (x * rsqrt(mean(x^2) + eps)): squares unfused, canonical sum (a thread per block of 32, then per segment of 8 blocks), times host 1/D; = kernels::ops::rmsnorm.
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, inv_d: f32, eps: f32, bf16_out: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
// x again, four elements a load (used where rows start on 16 bytes).
@group(0) @binding(4) var<storage, read> x4: array<vec4<f32>>;

// Output elements a thread loads before it stores any (a thread per element, 256 apart).
const RN_BATCH: u32 = 16u;

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
    let wide = (P.d & 3u) == 0u;
    // The first output batch's x and w, loaded before the sums so their latency overlaps them.
    var xs: array<f32, RN_BATCH>;
    var ws: array<f32, RN_BATCH>;
    rn_load(&xs, &ws, row, 0u, lid);
    for (var c = 0u; c < chunks; c++) {
        let b = c * 256u + lid;
        var acc = 0.0;
        if (b < last && b * 32u + 32u <= P.d) {
            // A full block: every load issued before the ascending sum.
            var v: array<f32, 32>;
            if (wide) {
                let b4 = (src * P.d + b * 32u) >> 2u;
                for (var q = 0u; q < 8u; q++) { ls_put4(&v, q, x4[b4 + q]); }
            } else {
                for (var q = 0u; q < 32u; q++) { v[q] = x[src * P.d + b * 32u + q]; }
            }
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
    for (var i0 = 0u; i0 < P.d; i0 += RN_BATCH * 256u) {
        if (i0 > 0u) { rn_load(&xs, &ws, row, i0, lid); }
        for (var k = 0u; k < RN_BATCH; k++) {
            let i = i0 + k * 256u + lid;
            if (i < P.d) { store_y(row, i, ws[k], xs[k], r); }
        }
    }
}

// A thread's x and w for output elements i0 + k * 256 + lid (past the row's end, its last element).
fn rn_load(xs: ptr<function, array<f32, RN_BATCH>>, ws: ptr<function, array<f32, RN_BATCH>>, row: u32, i0: u32, lid: u32) {
    for (var k = 0u; k < RN_BATCH; k++) {
        let i = min(i0 + k * 256u + lid, P.d - 1u);
        (*xs)[k] = x[row * P.d + i];
        (*ws)[k] = w[i];
    }
}

fn store_y(row: u32, i: u32, w_i: f32, x_i: f32, r: f32) {
    var wi = w_i;
    if (CONTROL == 6u && i == 0u) { wi = wi * 2.0; }
    var v = mul_rn(wi, mul_rn(x_i, r));
    if (P.bf16_out != 0u) { v = round_bf16(v); }
    if (!(CONTROL == 4u && row == 0u && i == 0u)) { y[row * P.d + i] = v; }
}
