// Grouped GEMM: table entries (weight row base, first x row, rows, output column base, columns), a workgroup per (R columns, entry) running the gemv core over the entry's rows in chunks that fit workgroup memory (N4).
override R: u32 = 4u;
const PART: u32 = 4091u;
var<workgroup> part: array<f32, 4091>;
var<workgroup> entry: array<u32, 5>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    if (lid == 0u) {
        let g = group_entry(wid.y);
        entry[0] = g.wbase;
        entry[1] = g.first;
        entry[2] = g.rows;
        entry[3] = g.cbase;
        entry[4] = g.cols;
    }
    let wbase = workgroupUniformLoad(&entry[0]);
    let first = workgroupUniformLoad(&entry[1]);
    let rows = workgroupUniformLoad(&entry[2]);
    let cbase = workgroupUniformLoad(&entry[3]);
    let cols = workgroupUniformLoad(&entry[4]);
    let n0 = wid.x * R;
    if (n0 >= cols) { return; }
    let mc = max(1u, PART / ((P.k >> 5u) * R));
    for (var m0 = 0u; m0 < rows; m0 += mc) {
        rows_block(first + m0, min(mc, rows - m0), wbase, n0, cols, cbase, lid);
        workgroupBarrier();
    }
}
