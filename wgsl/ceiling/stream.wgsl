// Bandwidth instrument (bench only, never in the engine): MODE 0 reads every vec4 once, MODE 1 copies it.
override MODE: u32 = 0u;
struct Params { zero: u32, n: u32, stride: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    var acc = vec4<u32>(0u);
    for (var i = gid.x; i < P.n; i += P.stride) {
        let v = src[i];
        if (MODE == 1u) { dst[i] = v; } else { acc = acc ^ v; }
    }
    if (MODE == 0u && acc.x == 0x9e3779b9u && acc.y == P.zero) { dst[gid.x] = acc; }
}
