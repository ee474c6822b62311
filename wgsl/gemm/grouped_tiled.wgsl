// Grouped GEMM for many rows: table entries (weight row base, first x row, rows <= 64, output column base, columns), a workgroup per (64 columns, entry) running the tile core (N4).
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let te = wid.y * 5u;
    tile(Entry(table[te], table[te + 1u] + table[te + 2u], table[te + 3u], table[te + 4u]), table[te + 1u], wid.x * 64u, tid);
}
