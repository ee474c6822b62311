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
    counts[lid] = cnt;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0u;
        for (var t = 0u; t < 256u; t++) {
            let ct = counts[t];
            counts[t] = acc;
            acc += ct;
        }
        n_keys = min(nw + acc, MAX_KEYS);
    }
    workgroupBarrier();
    var at = nw + counts[lid];
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
    if (wid.x == 0u && lid == 0u) { nk[row] = n; }
    let k0 = wid.x * 32u;
    let k1 = min(k0 + 32u, n);
    let lk = key_slots();
    for (var k = k0; k < k1; k++) {
        let e = keys[k];
        let dst = (row * lk + k) * P.dim;
        for (var i = lid; i < P.dim; i += 256u) { g[dst + i] = key_elem(e, i); }
    }
}
