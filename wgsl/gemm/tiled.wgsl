// GEMM for many rows: a workgroup per 64x64 output tile running the tile core over the whole [m, n] output (N4).
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    tile(Entry(0u, P.m, 0u, P.n), wid.y * 64u, wid.x * 64u, tid);
}
