#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Grouped GEMM for prefill shapes on Apple GPUs: a threadgroup per (64 columns, entry of at most 64 rows) running the tile core (msl/gemm/tile.metal).
using namespace metal;

[[max_total_threads_per_threadgroup(256)]]
kernel void gemm_grouped_tiled(
  constant LsGemmParams& P [[buffer(0)]]
, const device float4* x [[buffer(1)]]
, const device float* xs [[buffer(2)]]
, const device uint4* w [[buffer(3)]]
, const device uint* ws [[buffer(4)]]
, device float* out [[buffer(5)]]
, const device uint* table [[buffer(6)]]
, const device float* picks [[buffer(7)]]
, uint tid [[thread_index_in_threadgroup]]
, uint3 wid [[threadgroup_position_in_grid]]
) {
    LS_THREADGROUP_VAR float4 As[512];
    LS_THREADGROUP_VAR float4 Bs[512];
    const LsGemmParams p = P;
    const LsGroupRow g = ls_group_entry(table, picks, wid.y);
    if (g.cols == 0u) { return; }
    ls_tile(p, x, xs, w, ws, out, As, Bs, g.wbase, g.first, g.first + g.rows, g.cbase, g.cols, wid.x * 64u, tid);
}
