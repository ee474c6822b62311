// Cell unfold: a thread per output; y[cell][c*a + ky*cell + kx] = x[row (cy*cell+ky, cx*cell+kx)][c], 0 past the grid (torch F.unfold order); exact copies; = kernels::vision::unfold.
override CONTROL: u32 = 0u;
struct Params { zero: u32, gh: u32, gw: u32, channels: u32, cell: u32, groups_x: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    ls_init(P.zero, CONTROL);
    let a = P.cell * P.cell;
    let width = P.channels * a;
    let ch = (P.gh + P.cell - 1u) / P.cell;
    let cw = (P.gw + P.cell - 1u) / P.cell;
    let i = gid.x + gid.y * P.groups_x * 64u;
    if (i >= ch * cw * width) { return; }
    let cell = i / width;
    let e = i - cell * width;
    var c = e / a;
    var kk = e - c * a;
    if (CONTROL == 2u) {
        kk = e / P.channels;
        c = e - kk * P.channels;
    }
    let ky = kk / P.cell;
    let kx = kk - ky * P.cell;
    let cy = cell / cw;
    let cx = cell - cy * cw;
    let r = cy * P.cell + ky;
    var col = cx * P.cell + kx;
    if (CONTROL == 3u) { col = min(col, P.gw - 1u); }
    var v = 0.0;
    if (r < P.gh && col < P.gw) { v = x[(r * P.gw + col) * P.channels + c]; }
    if (!(CONTROL == 1u && i == ch * cw * width - 1u)) { y[i] = v; }
}
