// Stage 2 of split attention, a workgroup per (8 heads, 32 key slots, row): each key's score as attention.wgsl computes it (a thread per (key, block of 32 dims) holding its key block across the heads, a thread per (head, key) over the blocks in segments of 8), into s [rows, heads, LK].
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read> nk: array<u32>;
@group(0) @binding(4) var<storage, read_write> s: array<f32>;
// q and g again, four elements a load (used where head dims are multiples of 32).
@group(0) @binding(5) var<storage, read> q4: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> g4: array<vec4<f32>>;

const CHUNK: u32 = 32u;
const HEADS: u32 = 8u;
var<workgroup> part: array<f32, 2048>;
var<workgroup> n_keys: u32;

// s plus the four products of a and b in order, each a flushed term.
fn dot_terms(s: f32, a: vec4<f32>, b: vec4<f32>) -> f32 {
    var t = s + ls_mul_term(a.x, b.x);
    t = t + ls_mul_term(a.y, b.y);
    t = t + ls_mul_term(a.z, b.z);
    return t + ls_mul_term(a.w, b.w);
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
    let c0 = wid.y * CHUNK;
    if (c0 >= n) { return; }
    let c1 = min(c0 + CHUNK, n);
    let nb = (P.dim + 31u) >> 5u;
    let kpp = min(256u / nb, CHUNK);
    let mk = lid / nb;
    let mb = lid - mk * nb;
    let blen = min(32u, P.dim - min(mb * 32u, P.dim));
    let rh = lid / kpp;
    let rk = lid - rh * kpp;
    for (var k0 = c0; k0 < c1; k0 += kpp) {
        let k = k0 + mk;
        if (mk < kpp && k < c1 && (P.dim & 31u) == 0u) {
            // Full blocks: the key block in eight vec4s, each head's q block likewise, products ascending.
            let at = ((local_row(row) * lk + k) * P.dim + mb * 32u) >> 2u;
            let kv = array<vec4<f32>, 8>(g4[at], g4[at + 1u], g4[at + 2u], g4[at + 3u], g4[at + 4u], g4[at + 5u], g4[at + 6u], g4[at + 7u]);
            for (var hh = 0u; hh < hn; hh++) {
                let qa = ((row * P.heads + h0 + hh) * P.dim + mb * 32u) >> 2u;
                var acc = 0.0;
                acc = dot_terms(acc, q4[qa], kv[0]);
                acc = dot_terms(acc, q4[qa + 1u], kv[1]);
                acc = dot_terms(acc, q4[qa + 2u], kv[2]);
                acc = dot_terms(acc, q4[qa + 3u], kv[3]);
                acc = dot_terms(acc, q4[qa + 4u], kv[4]);
                acc = dot_terms(acc, q4[qa + 5u], kv[5]);
                acc = dot_terms(acc, q4[qa + 6u], kv[6]);
                acc = dot_terms(acc, q4[qa + 7u], kv[7]);
                part[hh * 256u + lid] = acc;
            }
        } else if (mk < kpp && k < c1) {
            var kb: array<f32, 32>;
            let at = (local_row(row) * lk + k) * P.dim + mb * 32u;
            for (var j = 0u; j < 32u; j++) {
                if (j < blen) { kb[j] = g[at + j]; }
            }
            for (var hh = 0u; hh < hn; hh++) {
                let qa = (row * P.heads + h0 + hh) * P.dim + mb * 32u;
                var acc = 0.0;
                for (var j = 0u; j < 32u; j++) {
                    if (j < blen) { acc = acc + ls_mul_term(q[qa + j], kb[j]); }
                }
                part[hh * 256u + lid] = acc;
            }
        }
        workgroupBarrier();
        if (rh < hn && k0 + rk < c1) {
            var seg = 0.0;
            var tot = 0.0;
            for (var b = 0u; b < nb; b++) {
                seg = seg + part[rh * 256u + rk * nb + b];
                if ((b & 7u) == 7u || b + 1u == nb) {
                    tot = tot + seg;
                    seg = 0.0;
                }
            }
            s[(local_row(row) * P.heads + h0 + rh) * lk + k0 + rk] = mul_rn(tot, P.scale);
        }
        workgroupBarrier();
    }
}
