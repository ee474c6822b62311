// Indexer scores per (row, key), a workgroup per (row, chunk of keys): the chunk's keys decoded once into workgroup memory, a thread per (head, lane) taking PER keys with each query block loaded once; dot_h = bf16(canonical sum over dim of q_h*k), term_h = bf16(relu(dot_h)*w_h), products as terms below 2^-103 dropped, score = bf16(canonical sum of term_h over heads ascending); keys as f32 values or (PACKED 1) as packed rows of e2m1 codes and e8m0 scales, unpacked as unpack_rows does; = kernels::indexer::scores_row.
override CONTROL: u32 = 0u;
override PACKED: u32 = 0u;
// Keys a thread takes at most; the host's `scores_layout` picks `per` (at most this) and `lanes`.
const IS_PER: u32 = 4u;
struct Params { zero: u32, s: u32, t: u32, heads: u32, dim: u32, lanes: u32, per: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> keys: array<u32>;
@group(0) @binding(4) var<storage, read> visible: array<u32>;
@group(0) @binding(5) var<storage, read_write> scores: array<f32>;
// q again, four elements a load (used where head dims are multiples of 4).
@group(0) @binding(6) var<storage, read> q4: array<vec4<f32>>;

// The chunk's key values [lanes * per, dim] and head terms [lanes * per, heads].
var<workgroup> is_keys: array<f32, 2048>;
var<workgroup> terms: array<f32, 1024>;

// Element i of key t: its f32 bits, or its e2m1 code times its block's power-of-two scale (NaN for the no-scale byte).
fn key_value(t: u32, i: u32) -> f32 {
    if (PACKED == 0u) { return bitcast<f32>(keys[t * P.dim + i]); }
    let rw = P.dim / 8u + (P.dim / 32u + 3u) / 4u;
    let code = (keys[t * rw + i / 8u] >> (4u * (i % 8u))) & 15u;
    let b = i / 32u;
    let byte = byte_of(keys[t * rw + P.dim / 8u + b / 4u], b);
    var v = e2m1_value(code) * pow2i(i32(byte) - 127);
    if (byte == 0xffu) { v = ls_nan(); }
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.y;
    let kw = P.lanes * P.per;
    let t0 = wid.x * kw;
    let seen = min(P.t, visible[row]);
    for (var e = lid; e < kw * P.dim; e += 256u) {
        let kl = e / P.dim;
        if (t0 + kl < seen) { is_keys[e] = key_value(t0 + kl, e - kl * P.dim); }
    }
    workgroupBarrier();
    let lane = lid / P.heads;
    let h = lid - lane * P.heads;
    let nb = (P.dim + 31u) >> 5u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    let qo = (row * P.heads + h) * P.dim;
    // Key j of this thread is chunk key lane + j * lanes; each keeps its own segment and total sums.
    var seg: array<f32, IS_PER>;
    var total: array<f32, IS_PER>;
    for (var j = 0u; j < IS_PER; j++) {
        seg[j] = 0.0;
        total[j] = 0.0;
    }
    if (lane < P.lanes) {
        for (var jb = 0u; jb < last; jb++) {
            var b = jb;
            if (CONTROL == 2u) { let s0 = jb & ~7u; b = s0 + min(s0 + 8u, nb) - 1u - jb; }
            let lo = b * 32u;
            let len = min(32u, P.dim - lo);
            var qv: array<f32, 32>;
            if ((P.dim & 3u) == 0u && len == 32u) {
                let a = (qo + lo) >> 2u;
                for (var v = 0u; v < 8u; v++) { ls_put4(&qv, v, q4[a + v]); }
            } else {
                for (var i = 0u; i < 32u; i++) { qv[i] = q[qo + lo + min(i, len - 1u)]; }
            }
            for (var j = 0u; j < IS_PER; j++) {
                let kl = lane + j * P.lanes;
                if (j < P.per && t0 + kl < seen) {
                    let ko = kl * P.dim + lo;
                    var acc = 0.0;
                    for (var i = 0u; i < 32u; i++) {
                        if (i < len) { acc = acc + ls_mul_term(qv[i], is_keys[ko + i]); }
                    }
                    seg[j] = seg[j] + acc;
                    if ((jb & 7u) == 7u || jb + 1u == last) {
                        total[j] = total[j] + seg[j];
                        seg[j] = 0.0;
                    }
                }
            }
        }
        var wrow = row;
        if (CONTROL == 3u) { wrow = min(row + 1u, P.s - 1u); }
        var wh = w[wrow * P.heads + h];
        if (CONTROL == 6u && h == 0u) { wh = 1.0; }
        for (var j = 0u; j < IS_PER; j++) {
            let kl = lane + j * P.lanes;
            if (j < P.per && t0 + kl < seen) {
                var dot = total[j];
                if (CONTROL != 5u) { dot = round_bf16(dot); }
                terms[kl * P.heads + h] = round_bf16(ls_mul_term(ls_relu(dot), wh));
            }
        }
    }
    workgroupBarrier();
    let tk = t0 + lid;
    if (lid >= kw || tk >= P.t) { return; }
    let o = row * P.t + tk;
    if (CONTROL == 4u && o == P.s * P.t - 1u) { return; }
    if (tk >= visible[row]) {
        scores[o] = -ls_inf();
        return;
    }
    var tot = 0.0;
    var sg = 0.0;
    var acc = 0.0;
    for (var hh = 0u; hh < P.heads; hh++) {
        acc = acc + terms[lid * P.heads + hh];
        if ((hh & 31u) == 31u || hh + 1u == P.heads) {
            sg = sg + acc;
            acc = 0.0;
            if (((hh >> 5u) & 7u) == 7u || hh + 1u == P.heads) {
                tot = tot + sg;
                sg = 0.0;
            }
        }
    }
    scores[o] = round_bf16(tot);
}
