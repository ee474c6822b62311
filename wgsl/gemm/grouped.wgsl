// Grouped GEMM: table entries (weight row base, first x row, rows, output column base, columns), a workgroup per (R columns, entry) running the gemv core over the entry's rows in chunks that fit workgroup memory (N4).
override R: u32 = 4u;
const PART: u32 = 4091u;
var<workgroup> part: array<f32, 4091>;
var<workgroup> entry: GroupRow;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    // One thread reads the entry; one uniform load hands it to all.
    if (lid == 0u) { entry = group_entry(wid.y); }
    let g = workgroupUniformLoad(&entry);
    W_HI = g.hi != 0u;
    let n0 = wid.x * R;
    if (n0 >= g.cols) { return; }
    let mc = max(1u, PART / ((P.k >> 5u) * R));
    for (var m0 = 0u; m0 < g.rows; m0 += mc) {
        rows_block(g.first + m0, min(mc, g.rows - m0), g.wbase, n0, g.cols, g.cbase, lid);
        workgroupBarrier();
    }
}
