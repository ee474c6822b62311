#include <metal_stdlib>
#if __METAL_VERSION__ < 320
#error "exact kernels need MSL 3.2"
#endif
#pragma METAL fp math_mode(safe)
#pragma METAL fp contract(off)
// Dense GEMM for many rows on Apple GPUs (bf16 weights: the vision tower's MLP and the aligner): a threadgroup per 64x64 output tile running the tile core (msl/gemm/tile.metal) over the whole [m, n] output.
using namespace metal;

[[max_total_threads_per_threadgroup(256)]]
kernel void gemm_dense_tiled(
  constant LsGemmParams& P [[buffer(0)]]
, const device float4* x [[buffer(1)]]
, const device uint4* w [[buffer(2)]]
, device float* out [[buffer(3)]]
, uint tid [[thread_index_in_threadgroup]]
, uint3 wid [[threadgroup_position_in_grid]]
) {
    LS_THREADGROUP_VAR float4 As[512];
    LS_THREADGROUP_VAR float4 Bs[512];
    const LsGemmParams p = P;
    ls_tile(p, x, nullptr, w, nullptr, out, As, Bs, 0u, wid.y * 64u, p.m, 0u, p.n, wid.x * 64u, tid);
}
