// Packs rows of QAT values into e2m1 codes and a scale byte per block, a thread per (row, block), four threads' scale bytes to a word: each block takes the first lead (6, 4, 3, 2, 1.5, 1, 0.5 times the scale is its largest magnitude) whose scale gives every value exactly; = kernels::state::pack_rows.
override KIND: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, rows: u32, cols: u32, row0: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<u32>;

const NO_SCALE: u32 = 0xffu;

fn lead(i: u32) -> f32 {
    switch i {
        case 0u: { return 6.0; }
        case 1u: { return 4.0; }
        case 2u: { return 3.0; }
        case 3u: { return 2.0; }
        case 4u: { return 1.5; }
        case 5u: { return 1.0; }
        default: { return 0.5; }
    }
}

// The scale byte of candidate t, or NO_SCALE when the format has none: e4m3 (KIND 0), a normal power of two as an e8m0 byte (KIND 1).
fn scale_byte(t: f32) -> u32 {
    if (KIND == 1u) {
        let b = bitcast<u32>(t);
        let e = i32((b >> 23u) & 0xffu) - 127;
        if ((b & 0x7fffffu) == 0u && e >= -126 && e <= 126 && t > 0.0) { return u32(e + 127); }
        return NO_SCALE;
    }
    let c = e4m3_code(t);
    if ((c & 0x7fu) == 0u || (c & 0x7fu) == 0x7fu) { return NO_SCALE; }
    return c;
}

fn scale_value(b: u32) -> f32 {
    if (KIND == 1u) { return pow2i(i32(b) - 127); }
    return e4m3_value(b);
}

// The e2m1 code whose value times s is exactly v (sign kept), or 16u when none is.
fn exact_code(v: f32, s: f32) -> u32 {
    let sign = (bitcast<u32>(v) >> 28u) & 8u;
    for (var k = 0u; k < 8u; k++) {
        if (e2m1_value(k) * s == abs(v)) { return sign | k; }
    }
    return 16u;
}

var<workgroup> bytes: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    ls_init(P.zero, CONTROL);
    let bs = select(16u, 32u, KIND == 1u);
    let nb = P.cols / bs;
    let groups = (nb + 3u) / 4u;
    let t = gid.x + gid.y * P.groups_x * 64u;
    let row = t / (groups * 4u);
    let grp = (t / 4u) % groups;
    let q = t % 4u;
    let b = grp * 4u + q;
    let rw = P.cols / 8u + groups;
    let out = (P.row0 + row) * rw;
    var byte = 0u;
    if (row < P.rows && b < nb) {
        let base = row * P.cols + b * bs;
        var amax = 0.0;
        for (var i = 0u; i < bs; i++) { amax = max(amax, abs(x[base + i])); }
        byte = NO_SCALE;
        var tries = 7u;
        if (amax == 0.0) { tries = 1u; }
        if (CONTROL == 2u) { tries = 1u; }
        for (var c = 0u; c < tries; c++) {
            var cand = 1u;
            if (amax != 0.0) { cand = scale_byte(ls_div(amax, lead(c))); }
            if (cand == NO_SCALE) { continue; }
            let s = scale_value(cand);
            var ok = true;
            for (var i = 0u; i < bs; i++) { if (exact_code(x[base + i], s) == 16u) { ok = false; break; } }
            if (ok) { byte = cand; break; }
        }
        if (CONTROL == 3u && b == 0u) { byte = byte ^ 1u; }
        let s = scale_value(byte);
        for (var w = 0u; w < bs / 8u; w++) {
            var word = 0u;
            for (var i = 0u; i < 8u; i++) {
                var code = 0u;
                if (byte != NO_SCALE) { code = exact_code(x[base + w * 8u + i], s) & 15u; }
                if (CONTROL == 1u) { code = code & 7u; }
                word = word | (code << (4u * i));
            }
            if (!(CONTROL == 4u && w == 0u && b == 0u)) { cache[out + (b * bs) / 8u + w] = word; }
        }
    }
    bytes[lid] = byte;
    workgroupBarrier();
    if (row < P.rows && q == 0u) {
        cache[out + P.cols / 8u + grp] = bytes[lid] | (bytes[lid + 1u] << 8u) | (bytes[lid + 2u] << 16u) | (bytes[lid + 3u] << 24u);
    }
}
