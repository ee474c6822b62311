// Stage 1 of split attention, a workgroup per (32 key slots, row): the row's key list as attention.wgsl gathers it, its key count (workgroup 0), and its keys' rows copied to g [rows, LK, dim] in list order.
@group(0) @binding(1) var<storage, read> kv: array<f32>;
@group(0) @binding(2) var<storage, read> ring: array<f32>;
@group(0) @binding(3) var<storage, read> comp: array<f32>;
@group(0) @binding(4) var<storage, read> sel: array<f32>;
@group(0) @binding(5) var<storage, read_write> g: array<f32>;
@group(0) @binding(6) var<storage, read_write> nk: array<u32>;

const KEY_COMP: u32 = 0x80000000u;
const KEY_RING: u32 = 0x40000000u;
const KEY_ROW: u32 = 0x3fffffffu;
var<workgroup> keys: array<u32, 1024>;
var<workgroup> counts: array<u32, 256>;
var<workgroup> n_keys: u32;

fn key_elem(e: u32, i: u32) -> f32 {
    let at = (e & KEY_ROW) * P.dim + i;
    if ((e & KEY_COMP) != 0u) { return comp[at]; }
    if ((e & KEY_RING) != 0u) { return ring[at]; }
    return kv[at];
}

// Element e of the keys from list slot k0 on, rows of P.dim one after another.
fn elem_at(k0: u32, e: u32) -> f32 {
    let k = e / P.dim;
    return key_elem(keys[k0 + k], e - k * P.dim);
}

fn gather(row: u32, lid: u32) {
    let p = P.start + row;
    var lo = select(0u, p + 1u - P.window, p + 1u >= P.window);
    var nw = p + 1u - lo;
    if (P.block > 0u && CONTROL != 8u) {
        lo = select(0u, P.start - P.window, P.start >= P.window);
        nw = P.start + P.block - lo;
    }
    for (var j = lid; j < nw; j += 256u) {
        let pos = lo + j;
        var slot = pos % P.window;
        if (CONTROL == 7u) { slot = (pos + 1u) % P.window; }
        keys[j] = select(KEY_RING | slot, pos - P.start, pos >= P.start);
    }
    var srow = row;
    if (CONTROL == 3u) { srow = min(row + 1u, P.m - 1u); }
    let per = (P.topk + 255u) >> 8u;
    let c0 = min(lid * per, P.topk);
    let c1 = min(c0 + per, P.topk);
    let base = srow * P.topk;
    var cnt = 0u;
    for (var c = c0; c < c1; c++) { if (sel[base + c] >= 0.0) { cnt++; } }
    // Inclusive scan of the counts, a doubling step at a time.
    counts[lid] = cnt;
    workgroupBarrier();
    for (var off = 1u; off < 256u; off <<= 1u) {
        let add = select(0u, counts[lid - min(off, lid)], lid >= off);
        workgroupBarrier();
        counts[lid] += add;
        workgroupBarrier();
    }
    if (lid == 255u) { n_keys = min(nw + counts[255], MAX_KEYS); }
    var at = nw + counts[lid] - cnt;
    workgroupBarrier();
    for (var c = c0; c < c1; c++) {
        let v = sel[base + c];
        if (v >= 0.0 && at < MAX_KEYS) {
            keys[at] = KEY_COMP | u32(v);
            at++;
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = P.row0 + wid.y;
    gather(row, lid);
    var n = workgroupUniformLoad(&n_keys);
    if (CONTROL == 1u) { n = max(n, 2u) - 1u; }
    if (wid.x == 0u && lid == 0u) { nk[count_at(row)] = n; }
    let k0 = wid.x * 32u;
    let k1 = min(k0 + 32u, n);
    let lk = key_slots();
    // The keys' rows are consecutive in g: eight elements a thread loaded before any is stored (past the end, the last again).
    let total = select(0u, (k1 - k0) * P.dim, k1 > k0);
    let dst = (local_row(row) * lk + k0) * P.dim;
    for (var e0 = lid; e0 < total; e0 += 2048u) {
        let a0 = elem_at(k0, e0);
        let a1 = elem_at(k0, min(e0 + 256u, total - 1u));
        let a2 = elem_at(k0, min(e0 + 512u, total - 1u));
        let a3 = elem_at(k0, min(e0 + 768u, total - 1u));
        let a4 = elem_at(k0, min(e0 + 1024u, total - 1u));
        let a5 = elem_at(k0, min(e0 + 1280u, total - 1u));
        let a6 = elem_at(k0, min(e0 + 1536u, total - 1u));
        let a7 = elem_at(k0, min(e0 + 1792u, total - 1u));
        g[dst + e0] = a0;
        if (e0 + 256u < total) { g[dst + e0 + 256u] = a1; }
        if (e0 + 512u < total) { g[dst + e0 + 512u] = a2; }
        if (e0 + 768u < total) { g[dst + e0 + 768u] = a3; }
        if (e0 + 1024u < total) { g[dst + e0 + 1024u] = a4; }
        if (e0 + 1280u < total) { g[dst + e0 + 1280u] = a5; }
        if (e0 + 1536u < total) { g[dst + e0 + 1536u] = a6; }
        if (e0 + 1792u < total) { g[dst + e0 + 1792u] = a7; }
    }
}
