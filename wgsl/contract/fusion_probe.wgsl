// Fusion probe: out[2i] = x*y+z as written, out[2i+1] = mul_rn(x,y)+z; compared with unfused and fused results on the host.
struct Params { zero: u32, n: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> xyz: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    LS_ZERO = P.zero;
    let i = gid.x;
    if (i >= P.n) { return; }
    let x = xyz[3u * i];
    let y = xyz[3u * i + 1u];
    let z = xyz[3u * i + 2u];
    out[2u * i] = x * y + z;
    out[2u * i + 1u] = mul_rn(x, y) + z;
}
