// Row softmax of s*x: max (order-free), e = exp(s*x - max) with the product unfused, canonical sum, times recip(sum).
override CONTROL: u32 = 0u;
struct Params { zero: u32, m: u32, d: u32, scale: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn scaled(i: u32) -> f32 { return mul_rn(x[i], P.scale); }

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x;
    let base = row * P.d;
    var src = base;
    if (CONTROL == 4u) { src = min(row + 1u, P.m - 1u) * P.d; }
    var mx = -3.4028235e38;
    for (var i = lid; i < P.d; i += 256u) { mx = max(mx, scaled(src + i)); }
    mx = workgroup_max(mx, lid);
    let nb = (P.d + 31u) >> 5u;
    let nseg = (nb + 7u) >> 3u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    for (var s = lid; s < nseg; s += 256u) {
        var seg = 0.0;
        for (var b = s * 8u; b < min(s * 8u + 8u, last); b++) {
            var acc = 0.0;
            for (var i = b * 32u; i < min(b * 32u + 32u, P.d); i++) {
                var d = ls_sub(scaled(base + i), mx);
                if (CONTROL == 3u) { d = x[base + i] * P.scale - mx; }
                acc = acc + ls_exp(d);
            }
            seg = seg + acc;
        }
        red[s] = seg;
    }
    let r = ls_recip(canonical_total(nseg, lid, CONTROL == 2u));
    for (var i = lid; i < P.d; i += 256u) {
        let v = mul_rn(ls_exp(ls_sub(scaled(base + i), mx)), r);
        if (!(CONTROL == 5u && row == 0u && i == 0u)) { y[base + i] = v; }
    }
}
