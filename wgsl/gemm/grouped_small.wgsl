// Grouped GEMM for entries of few rows: table entries (weight row base, first x row, rows <= 16, output column base, columns), a workgroup per (128 columns, entry) running the small-tile core (N4).
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let g = group_entry(wid.y);
    if (g.cols == 0u) { return; }
    W_HI = g.hi != 0u;
    tile_small(Entry(g.wbase, g.first + g.rows, g.cbase, g.cols), g.first, wid.x * 128u, tid);
}
