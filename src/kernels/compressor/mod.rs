//! Compressor pooling oracle (spec 2.5, ratio > 1): per channel, a softmax over the group's gate values weights the group's k values.
pub mod contract;

use crate::kernels::dispatch::grid64;
use crate::gpu::{Arg, Buf, GpuError, PipelineKey, Recorder, Shader};
use crate::numerics::edge::{pos_zero, sub};
use crate::numerics::math::{exp, mul_rn, recip};
use crate::numerics::round_bf16;
use crate::numerics::sum::canonical_sum;

/// One complete group: `k[t]`, `g[t]` for the `ratio` members in position order, each [hd] f32. Canonical order, per channel c: M = max_t g_t[c], a zero +0; e_t = exp(sub(g_t[c], M)); p_t = mul_rn(e_t, recip(sum_t e_t)), t ascending from +0.0; latent[c] = bf16(sum_t mul_rn(p_t, k_t[c]), sums flushed), t ascending from +0.0.
pub fn pool_group(k: &[&[f32]], g: &[&[f32]]) -> Vec<f32> {
    let r = k.len();
    let hd = k.first().map_or(0, |v| v.len());
    (0..hd)
        .map(|c| {
            let mx = pos_zero(g.iter().fold(f32::NEG_INFINITY, |a, gt| a.max(gt[c])));
            let e: Vec<f32> = g.iter().map(|gt| exp(sub(gt[c], mx))).collect();
            let inv = recip(canonical_sum(r, |t| e[t], |_| 1.0));
            round_bf16(canonical_sum(r, |t| mul_rn(mul_rn(e[t], inv), k[t][c]), |_| 1.0))
        })
        .collect()
}

/// The pooling kernel (CARRY 0: latents; CARRY 1: the carried remainder).
pub(crate) const COMPRESS_POOL: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "compress_pool", variant: "ref", source: include_str!("../../../wgsl/compressor/compress_pool.wgsl") };

/// Complete groups of a call: (pending + s) / ratio.
pub fn pool_groups(s: usize, pending: usize, ratio: usize) -> usize {
    (pending + s) / ratio.max(1)
}

/// Records ratio-r gated pooling of one call: k, g [s, hd] f32 this call's rows; partial [ratio-1, 2*hd] (k then g per buffered row, the first `pending` valid) is updated in place to the remainder (rest zero); pooled [pool_groups(s, pending, ratio), hd] gets the complete groups' latents (bf16 values); with ratio 1 partial is unused (any buffer).
#[allow(clippy::too_many_arguments)]
pub fn record_compress_pool(rec: &mut Recorder, k: &Buf, g: &Buf, partial: &Buf, pooled: &Buf, s: usize, hd: usize, pending: usize, ratio: usize, control: u32) -> Result<(), GpuError> {
    record_compress_pool_args(rec, [Arg::Whole(k), Arg::Whole(g)], partial, pooled, s, hd, pending, ratio, control)
}

/// `record_compress_pool` with k and g bound as given (ranges of one buffer).
#[allow(clippy::too_many_arguments)]
pub fn record_compress_pool_args(rec: &mut Recorder, [k, g]: [Arg; 2], partial: &Buf, pooled: &Buf, s: usize, hd: usize, pending: usize, ratio: usize, control: u32) -> Result<(), GpuError> {
    if ratio == 0 || pending >= ratio || hd == 0 {
        return Err(GpuError::Shader { kernel: "compress_pool/ref".into(), message: format!("ratio {ratio}, pending {pending}, hd {hd}") });
    }
    let groups = pool_groups(s, pending, ratio);
    let params = |g0: u32| [s as u32, hd as u32, pending as u32, ratio as u32, groups as u32, g0];
    let args = [k, g, Arg::Whole(partial), Arg::Whole(pooled)];
    if groups > 0 {
        let grid = grid64(groups * hd);
        let key = PipelineKey::new(COMPRESS_POOL, &[("CARRY", 0.0), ("CONTROL", f64::from(control))]);
        rec.dispatch(&key, &params(grid[0]), &args, grid)?;
    }
    if ratio > 1 {
        let grid = grid64((ratio - 1) * 2 * hd);
        let key = PipelineKey::new(COMPRESS_POOL, &[("CARRY", 1.0), ("CONTROL", f64::from(control))]);
        rec.dispatch(&key, &params(grid[0]), &args, grid)?;
    }
    Ok(())
}

/// One call on the CPU, as exec::cpu's compress_pool: (latents [groups, hd], partial after the call).
pub fn pool_call(k: &[f32], g: &[f32], partial: &[f32], hd: usize, pending: usize, ratio: usize) -> (Vec<f32>, Vec<f32>) {
    let row = |t: &[f32], r: usize, off: usize, w: usize| t[r * w + off..r * w + off + hd].to_vec();
    let mut ks: Vec<Vec<f32>> = (0..pending).map(|t| row(partial, t, 0, 2 * hd)).collect();
    let mut gs: Vec<Vec<f32>> = (0..pending).map(|t| row(partial, t, hd, 2 * hd)).collect();
    ks.extend((0..k.len() / hd).map(|t| row(k, t, 0, hd)));
    gs.extend((0..g.len() / hd).map(|t| row(g, t, 0, hd)));
    let groups = ks.len() / ratio;
    let mut out = Vec::with_capacity(groups * hd);
    for j in 0..groups {
        let kr: Vec<&[f32]> = ks[j * ratio..(j + 1) * ratio].iter().map(|v| v.as_slice()).collect();
        let gr: Vec<&[f32]> = gs[j * ratio..(j + 1) * ratio].iter().map(|v| v.as_slice()).collect();
        out.extend(pool_group(&kr, &gr));
    }
    let mut rest = vec![0.0f32; partial.len()];
    for t in 0..ks.len() - groups * ratio {
        rest[t * 2 * hd..t * 2 * hd + hd].copy_from_slice(&ks[groups * ratio + t]);
        rest[t * 2 * hd + hd..(t + 1) * 2 * hd].copy_from_slice(&gs[groups * ratio + t]);
    }
    (out, rest)
}
