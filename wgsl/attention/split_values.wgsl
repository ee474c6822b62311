// Stage 4 of split attention, a workgroup per (8 heads, 32 output dims, row): each dim's weighted values a thread per block of 32 keys, read once for the 8 heads, then the blocks summed in segments of 8, so the bits equal the one-workgroup kernel.
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> nk: array<u32>;
@group(0) @binding(3) var<storage, read> s: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

const DIMS: u32 = 32u;
const HEADS: u32 = 8u;
const TILE: u32 = 256u;
var<workgroup> wt: array<f32, 2048>;
var<workgroup> blocks: array<f32, 1024>;
var<workgroup> n_keys: u32;

// One key's weighted value for the 8 heads (heads past the workgroup's are never read).
fn key_step(acc: array<vec4<f32>, 2>, j: u32, v: f32) -> array<vec4<f32>, 2> {
    let lo = vec4<f32>(wt[j], wt[TILE + j], wt[2u * TILE + j], wt[3u * TILE + j]);
    let hi = vec4<f32>(wt[4u * TILE + j], wt[5u * TILE + j], wt[6u * TILE + j], wt[7u * TILE + j]);
    if (CONTROL == 6u) { return array<vec4<f32>, 2>(acc[0] + lo * v, acc[1] + hi * v); }
    return array<vec4<f32>, 2>(acc[0] + ls_mul_term4(lo, vec4<f32>(v)), acc[1] + ls_mul_term4(hi, vec4<f32>(v)));
}

// Keys k..end (one block) of dim column `col` weighted for the 8 heads, ascending from +0.0; eight keys' values loaded before their products (past the end, the last key again).
fn block_values(col: u32, k: u32, end: u32, k0: u32) -> array<vec4<f32>, 2> {
    var acc = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var a = k; a < end; a += 8u) {
        let v0 = g[col + a * P.dim];
        let v1 = g[col + min(a + 1u, end - 1u) * P.dim];
        let v2 = g[col + min(a + 2u, end - 1u) * P.dim];
        let v3 = g[col + min(a + 3u, end - 1u) * P.dim];
        let v4 = g[col + min(a + 4u, end - 1u) * P.dim];
        let v5 = g[col + min(a + 5u, end - 1u) * P.dim];
        let v6 = g[col + min(a + 6u, end - 1u) * P.dim];
        let v7 = g[col + min(a + 7u, end - 1u) * P.dim];
        acc = key_step(acc, a - k0, v0);
        if (a + 1u < end) { acc = key_step(acc, a + 1u - k0, v1); }
        if (a + 2u < end) { acc = key_step(acc, a + 2u - k0, v2); }
        if (a + 3u < end) { acc = key_step(acc, a + 3u - k0, v3); }
        if (a + 4u < end) { acc = key_step(acc, a + 4u - k0, v4); }
        if (a + 5u < end) { acc = key_step(acc, a + 5u - k0, v5); }
        if (a + 6u < end) { acc = key_step(acc, a + 6u - k0, v6); }
        if (a + 7u < end) { acc = key_step(acc, a + 7u - k0, v7); }
    }
    return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h0 = wid.x * HEADS;
    let hn = min(HEADS, P.heads - h0);
    let row = P.row0 + wid.z;
    let lk = key_slots();
    if (lid == 0u) { n_keys = nk[count_at(row)]; }
    let n = workgroupUniformLoad(&n_keys);
    let nbk = (n + 31u) >> 5u;
    let d = lid % DIMS;
    let grp = lid / DIMS;
    let i = wid.y * DIMS + d;
    let gbase = local_row(row) * lk * P.dim;
    let tiles = (n + TILE - 1u) / TILE;
    // Each tile of 256 keys: its weights for the 8 heads staged, then a thread per (dim, block of 32 keys from +0.0), the 8 heads' sums in two vec4s, a tile's kept in its own pair.
    var r0 = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    var r1 = r0;
    var r2 = r0;
    var r3 = r0;
    for (var t = 0u; t < tiles; t++) {
        let k0 = t * TILE;
        for (var e = lid; e < HEADS * TILE; e += 256u) {
            let hh = e / TILE;
            let k = k0 + e % TILE;
            if (hh < hn && k < n) { wt[e] = s[(local_row(row) * P.heads + h0 + hh) * lk + k]; }
        }
        workgroupBarrier();
        let b = t * 8u + grp;
        if (i < P.dim && b < nbk) {
            let acc = block_values(gbase + i, b * 32u, min(b * 32u + 32u, n), k0);
            if (t == 0u) { r0 = acc; } else if (t == 1u) { r1 = acc; } else if (t == 2u) { r2 = acc; } else { r3 = acc; }
        }
        workgroupBarrier();
    }
    // A head at a time: its blocks to workgroup memory, then a thread per dim over the blocks in segments of 8.
    for (var hh = 0u; hh < hn; hh++) {
        let h = h0 + hh;
        for (var t = 0u; t < tiles; t++) {
            let b = t * 8u + grp;
            if (i < P.dim && b < nbk) {
                var r = r3;
                if (t == 0u) { r = r0; } else if (t == 1u) { r = r1; } else if (t == 2u) { r = r2; }
                blocks[b * DIMS + d] = select(r[0], r[1], hh >= 4u)[hh & 3u];
            }
        }
        workgroupBarrier();
        if (lid < DIMS && i < P.dim) {
            var seg = 0.0;
            var tot = 0.0;
            for (var b = 0u; b < nbk; b++) {
                seg = seg + blocks[b * DIMS + d];
                if ((b & 7u) == 7u || b + 1u == nbk) {
                    tot = tot + seg;
                    seg = 0.0;
                }
            }
            let sbase = (local_row(row) * P.heads + h) * lk;
            if (CONTROL == 2u) {
                tot = 0.0;
                for (var k = 0u; k < n; k++) { tot = tot + ls_mul_term(s[sbase + k], g[gbase + k * P.dim + i]); }
            }
            let den = bitcast<f32>(nk[count_at(row) + 1u + h]);
            if (!(CONTROL == 4u && row == 0u && h == 0u && i == 0u)) { o[(row * P.heads + h) * P.dim + i] = round_bf16(ls_div(tot, den)); }
        }
        workgroupBarrier();
    }
}
