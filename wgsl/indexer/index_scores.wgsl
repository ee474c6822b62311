// Indexer scores per (row, key), a thread per (key, head) then a thread per key over heads: dot_h = bf16(canonical sum over dim of q_h*k), term_h = bf16(relu(dot_h)*w_h), products as terms below 2^-103 dropped, score = bf16(canonical sum of term_h over heads ascending); keys as f32 values or (PACKED 1) as packed rows of e2m1 codes and e8m0 scales, unpacked as unpack_rows does; = kernels::indexer::scores_row.
override CONTROL: u32 = 0u;
override PACKED: u32 = 0u;
struct Params { zero: u32, s: u32, t: u32, heads: u32, dim: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> keys: array<u32>;
@group(0) @binding(4) var<storage, read> visible: array<u32>;
@group(0) @binding(5) var<storage, read_write> scores: array<f32>;

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

// Canonical dot of one head's query (at qo) with key t: exact bf16 products as terms (below 2^-103 dropped), blocks of 32 from +0.0, segments of 8 blocks.
fn head_dot(qo: u32, t: u32) -> f32 {
    let nb = (P.dim + 31u) >> 5u;
    let last = select(nb, nb - 1u, CONTROL == 1u);
    var total = 0.0;
    var seg = 0.0;
    for (var j = 0u; j < last; j++) {
        var b = j;
        if (CONTROL == 2u) { let s0 = j & ~7u; b = s0 + min(s0 + 8u, nb) - 1u - j; }
        var acc = 0.0;
        for (var i = b * 32u; i < min(b * 32u + 32u, P.dim); i++) {
            acc = acc + ls_mul_term(q[qo + i], key_value(t, i));
        }
        seg = seg + acc;
        if ((j & 7u) == 7u || j + 1u == last) {
            total = total + seg;
            seg = 0.0;
        }
    }
    return total;
}

var<workgroup> terms: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let row = wid.y;
    let kpw = 256u / P.heads;
    let kl = lid / P.heads;
    let h = lid - kl * P.heads;
    let t = wid.x * kpw + kl;
    var wrow = row;
    if (CONTROL == 3u) { wrow = min(row + 1u, P.s - 1u); }
    if (kl < kpw && t < P.t && t < visible[row]) {
        var dot = head_dot((row * P.heads + h) * P.dim, t);
        if (CONTROL != 5u) { dot = round_bf16(dot); }
        var wh = w[wrow * P.heads + h];
        if (CONTROL == 6u && h == 0u) { wh = 1.0; }
        terms[lid] = round_bf16(ls_mul_term(ls_relu(dot), wh));
    }
    workgroupBarrier();
    let tk = wid.x * kpw + lid;
    if (lid >= kpw || tk >= P.t) { return; }
    let o = row * P.t + tk;
    if (CONTROL == 4u && o == P.s * P.t - 1u) { return; }
    if (tk >= visible[row]) {
        scores[o] = -ls_inf();
        return;
    }
    var total = 0.0;
    var seg = 0.0;
    var acc = 0.0;
    for (var hh = 0u; hh < P.heads; hh++) {
        acc = acc + terms[lid * P.heads + hh];
        if ((hh & 31u) == 31u || hh + 1u == P.heads) {
            seg = seg + acc;
            acc = 0.0;
            if (((hh >> 5u) & 7u) == 7u || hh + 1u == P.heads) {
                total = total + seg;
                seg = 0.0;
            }
        }
    }
    scores[o] = round_bf16(total);
}
