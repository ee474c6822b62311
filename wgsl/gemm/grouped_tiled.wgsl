// Grouped GEMM for many rows: table entries (weight row base, first x row, rows <= 64, output column base, columns), a workgroup per (64 columns, entry) running the tile core (N4).
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let g = group_entry(wid.y);
    if (g.cols == 0u) { return; }
    W_HI = g.hi != 0u;
    tile(Entry(g.wbase, g.first + g.rows, g.cbase, g.cols), g.first, wid.x * 64u, tid);
}
