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

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let h0 = wid.x * HEADS;
    let hn = min(HEADS, P.heads - h0);
    let row = P.row0 + wid.z;
    let lk = key_slots();
    if (lid == 0u) { n_keys = nk[row]; }
    let n = workgroupUniformLoad(&n_keys);
    let nbk = (n + 31u) >> 5u;
    let d = lid % DIMS;
    let grp = lid / DIMS;
    let i = wid.y * DIMS + d;
    let gbase = row * lk * P.dim;
    let tiles = (n + TILE - 1u) / TILE;
    // Each tile of 256 keys: its weights for the 8 heads staged, then a thread per (dim, block of 32 keys from +0.0).
    var accs: array<f32, 32>;
    for (var t = 0u; t < tiles; t++) {
        let k0 = t * TILE;
        for (var e = lid; e < HEADS * TILE; e += 256u) {
            let hh = e / TILE;
            let k = k0 + e % TILE;
            if (hh < hn && k < n) { wt[e] = s[(row * P.heads + h0 + hh) * lk + k]; }
        }
        workgroupBarrier();
        let b = t * 8u + grp;
        if (i < P.dim && b < nbk) {
            var acc: array<f32, 8>;
            for (var hh = 0u; hh < HEADS; hh++) { acc[hh] = 0.0; }
            for (var k = b * 32u; k < min(b * 32u + 32u, n); k++) {
                let v = g[gbase + k * P.dim + i];
                for (var hh = 0u; hh < hn; hh++) {
                    let p = wt[hh * TILE + k - k0];
                    if (CONTROL == 6u) { acc[hh] = acc[hh] + p * v; } else { acc[hh] = acc[hh] + ls_mul_term(p, v); }
                }
            }
            for (var hh = 0u; hh < HEADS; hh++) { accs[t * 8u + hh] = acc[hh]; }
        }
        workgroupBarrier();
    }
    // A head at a time: its blocks to workgroup memory, then a thread per dim over the blocks in segments of 8.
    for (var hh = 0u; hh < hn; hh++) {
        let h = h0 + hh;
        for (var t = 0u; t < tiles; t++) {
            let b = t * 8u + grp;
            if (i < P.dim && b < nbk) { blocks[b * DIMS + d] = accs[t * 8u + hh]; }
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
            let sbase = (row * P.heads + h) * lk;
            if (CONTROL == 2u) {
                tot = 0.0;
                for (var k = 0u; k < n; k++) { tot = tot + ls_mul_term(s[sbase + k], g[gbase + k * P.dim + i]); }
            }
            let den = bitcast<f32>(nk[P.m + row * P.heads + h]);
            if (!(CONTROL == 4u && row == 0u && h == 0u && i == 0u)) { o[(row * P.heads + h) * P.dim + i] = round_bf16(ls_div(tot, den)); }
        }
        workgroupBarrier();
    }
}
