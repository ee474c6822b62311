// Row copy as 32-bit words, exact: src row src_row0 + i goes to dst row dst_row0 + i (or ring slot (dst_row0 + i) mod ring), repeated `repeat` times along the dst row: bit-identical to exec::cpu's slice_rows, hc_repeat, append_rows and ring_write.
override CONTROL: u32 = 0u;
struct Params { zero: u32, rows: u32, cols: u32, src_row0: u32, dst_row0: u32, ring: u32, repeat: u32, grid_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let idx = gid.x + gid.y * P.grid_x * 64u;
    let width = P.cols * P.repeat;
    if (idx >= P.rows * width) { return; }
    let i = idx / width;
    let rest = idx - i * width;
    let j = rest / P.cols;
    let c = rest - j * P.cols;
    var sr = P.src_row0 + i;
    if (CONTROL == 2u) { sr = P.src_row0 + min(i + 1u, P.rows - 1u); }
    var dr = P.dst_row0 + i;
    if (P.ring > 0u) { dr = dr % P.ring; }
    if (CONTROL == 3u && P.ring > 0u) { dr = (dr + 1u) % P.ring; }
    if (CONTROL == 1u && idx + 1u == P.rows * width) { return; }
    if (CONTROL == 4u && j + 1u == P.repeat && P.repeat > 1u) { return; }
    dst[dr * width + rest] = src[sr * P.cols + c];
}
