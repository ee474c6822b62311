// Level-one candidate blocks per row: block score = max of its positions (order-free), the block of position visible-1 pinned to +inf, the top min(blocks, finite) by (score desc, block asc) through the radix selection above, expanded to a 1/0 mask; = kernels::indexer::candidate_mask_row.
override CONTROL: u32 = 0u;
const RS_TIES_HIGH: u32 = 1u;
struct Params { zero: u32, m: u32, n: u32, blocks: u32, block: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> scores: array<f32>;
@group(0) @binding(2) var<storage, read> visible: array<u32>;
@group(0) @binding(3) var<storage, read_write> mask: array<f32>;

// Score of block b of the row: its maximum, +inf for the block holding the newest visible position.
fn sel_value(row: u32, b: u32) -> f32 {
    var r = row;
    if (CONTROL == 5u) { r = min(row + 1u, P.m - 1u); }
    let vis = min(visible[row], P.n);
    if (vis > 0u && b == (vis - 1u) / P.block && CONTROL != 3u) { return ls_inf(); }
    let lo = b * P.block;
    var hi = min(lo + P.block, P.n);
    if (CONTROL == 2u && hi - lo > 1u) { hi -= 1u; }
    var m = -ls_inf();
    for (var t = lo; t < hi; t++) { m = max(m, scores[r * P.n + t]); }
    return m;
}

// Writes block b's positions: 1 kept, 0 not.
fn sel_emit(row: u32, b: u32, kept: bool, slot: u32) {
    let lo = b * P.block;
    for (var t = lo; t < min(lo + P.block, P.n); t++) {
        if (!(CONTROL == 4u && row * P.n + t == P.m * P.n - 1u)) { mask[row * P.n + t] = select(0.0, 1.0, kept); }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.x + wid.y * 32768u;
    if (row >= P.m) { return; }
    let nb = (P.n + P.block - 1u) / P.block;
    let t = rs_threshold(row, nb, min(P.blocks, nb), true, lid);
    rs_walk(row, nb, t, lid);
}
