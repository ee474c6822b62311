// GEMM for 1-8 rows: a workgroup per R columns running the gemv core over all rows (N4).
override R: u32 = 4u;
var<workgroup> part: array<f32, 4096>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    rows_block(0u, P.m, 0u, (wid.x + wid.y * P.groups_x) * R, P.n, 0u, lid);
}
