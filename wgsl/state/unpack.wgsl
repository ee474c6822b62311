// Unpacks rows of a packed cache to f32 values, a thread per output value: every row (PICK 0), or the rows sel names (PICK 1; -1 gives a zero row) with each pick's place in the output; = kernels::state::unpack_rows.
override KIND: u32 = 0u;
override PICK: u32 = 0u;
override CONTROL: u32 = 0u;
struct Params { zero: u32, n: u32, cols: u32, rows: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> cache: array<u32>;
@group(0) @binding(2) var<storage, read> sel: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> places: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= P.n * P.cols) { return; }
    let j = i / P.cols;
    let col = i - j * P.cols;
    let bs = select(16u, 32u, KIND == 1u);
    let rw = P.cols / 8u + (P.cols / bs + 3u) / 4u;
    var r = j;
    var live = true;
    if (PICK == 1u) {
        let v = sel[j];
        live = v >= 0.0;
        r = min(u32(max(v, 0.0)), P.rows - 1u);
        if (col == 0u) { places[j] = select(-1.0, f32(j), live); }
    }
    if (CONTROL == 3u) { r = min(r + 1u, P.rows - 1u); }
    var code = (cache[r * rw + col / 8u] >> (4u * (col % 8u))) & 15u;
    if (CONTROL == 1u) { code = code & 7u; }
    let b = col / bs;
    let byte = byte_of(cache[r * rw + P.cols / 8u + b / 4u], b);
    var s = e4m3_value(byte);
    if (KIND == 1u) { s = pow2i(i32(byte) - 127); }
    if (CONTROL == 2u) { s = 1.0; }
    var v = e2m1_value(code) * s;
    if (byte == 0xffu) { v = ls_nan(); }
    if (!live) { v = 0.0; }
    if (!(CONTROL == 4u && i == P.n * P.cols - 1u)) { y[i] = v; }
}
