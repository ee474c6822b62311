// Indexer top-k per row: of the row's visible scores, the top min(k, visible) by (value desc, index asc), -inf ties by lower index, through the radix selection above; indices written ascending, padded with -1; = kernels::indexer::select_row.
override CONTROL: u32 = 0u;
const RS_TIES_HIGH: u32 = 1u;
const RS_DROP_NEG_INF: u32 = 5u;
struct Params { zero: u32, m: u32, n: u32, k: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> scores: array<f32>;
@group(0) @binding(2) var<storage, read> visible: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

// Element i of the row being selected.
fn sel_value(row: u32, i: u32) -> f32 {
    var r = row;
    if (CONTROL == 4u) { r = min(row + 1u, P.m - 1u); }
    return scores[r * P.n + i];
}

// Writes a kept element's index at its slot.
fn sel_emit(row: u32, i: u32, kept: bool, slot: u32) {
    if (kept && slot < P.k) { out[row * P.k + slot] = f32(i); }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x + wid.y * 32768u;
    if (row >= P.m) { return; }
    var n = select(min(visible[row], P.n), P.n, CONTROL == 6u);
    if (CONTROL == 2u && n > 0u) { n -= 1u; }
    let t = rs_threshold(row, n, min(P.k, n), CONTROL == RS_DROP_NEG_INF, lid);
    rs_walk(row, n, t, lid);
    for (var j = t.kept + lid; j < P.k; j += 256u) {
        if (!(CONTROL == 3u && row == 0u && j == P.k - 1u)) { out[row * P.k + j] = -1.0; }
    }
}
