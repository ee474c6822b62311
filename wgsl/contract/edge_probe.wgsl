// Edge probe: products, sums and fma of values read from storage (nothing folds), max of signed zeros, a NaN self-comparison and NaN x 0; each result's bits for the host to classify.
struct Params { zero: u32, n: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> v: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    LS_ZERO = P.zero;
    if (gid.x != 0u) { return; }
    // v: 0 = 2^-130, 1 = 1, 2 = 2^-70, 3 = 2^-60, 4 = 2^100, 5 = +0, 6 = -0, 7 = NaN, 8 = 2^-63, 9 = (1 - 2^-24) 2^-63
    out[0] = bitcast<u32>(v[0] * v[1]);
    out[1] = bitcast<u32>(v[2] * v[3]);
    out[2] = bitcast<u32>(-(v[2] * v[3]));
    out[3] = bitcast<u32>((v[2] * v[3]) * v[4]);
    out[4] = bitcast<u32>(v[0] + v[0]);
    out[5] = bitcast<u32>(fma(v[2], v[3], v[5]));
    out[6] = bitcast<u32>(fma(v[0], v[4], v[5]));
    out[7] = bitcast<u32>(v[8] * v[9]);
    out[8] = bitcast<u32>(max(v[5], v[6]));
    out[9] = bitcast<u32>(max(v[6], v[5]));
    out[10] = select(0u, 1u, v[7] != v[P.n]);
    out[11] = bitcast<u32>(v[7] * v[5]);
}
