//! The attention block of one layer: q and window kv paths, compressor and index keys at KV sources, indexer and top-k at index sources, sparse attention with sink, grouped output.
use super::{tap, CallCtx, ForwardError, Model};
use crate::engine::{CompCache, LayerState};
use crate::exec::{AttnInputs, Executor, Out, Qat};
use crate::model::taps::Taps;
use crate::model::{LayerPlan, RopeTable};

/// Attention of layer `l` on the normed input `x` `[S, D]`; returns `wo_b`'s output `[S, D]`.
pub(super) fn attention<E: Executor>(
    ex: &mut E,
    m: &Model,
    layers: &mut [LayerState<E::Tensor>],
    l: usize,
    x: &E::Tensor,
    ctx: &mut CallCtx<E::Tensor>,
    taps: &mut Taps<f32>,
) -> Result<E::Tensor, ForwardError> {
    let cfg = &m.cfg;
    let plan = &m.plan[l];
    let a = format!("{}.attn", plan.prefix());
    let (eps, heads) = (m.eps(), cfg.num_attention_heads);
    let qr = ex.linear(x, &format!("{a}.wq_a"), Out::Bf16)?;
    let qr = ex.rmsnorm(&qr, &format!("{a}.q_norm"), eps, Out::Bf16)?;
    let q = ex.linear(&qr, &format!("{a}.wq_b"), Out::Bf16)?;
    let q = ex.rope(&q, ctx.cs(plan.rope), heads, false)?;
    tap(ex, taps, format!("L{l}.attn.q"), &q)?;
    let kv = ex.linear(x, &format!("{a}.wkv"), Out::Bf16)?;
    let kv = ex.rmsnorm(&kv, &format!("{a}.kv_norm"), eps, Out::Bf16)?;
    let kv = ex.rope(&kv, ctx.cs(plan.rope), 1, false)?;
    let kv = ex.qat(&kv, Qat::Fp8)?;
    tap(ex, taps, format!("L{l}.attn.kv"), &kv)?;
    let mut sources = None;
    if plan.ratio > 0 {
        if let Some(comp) = layers[l].comp.as_mut() {
            compress(ex, m, l, x, comp, ctx, taps)?;
        }
        if plan.is_index_source() {
            let topk = indexer(ex, m, plan, layers, x, &qr, ctx)?;
            tap(ex, taps, format!("L{l}.attn.topk"), &topk)?;
            ctx.topk[l] = Some(topk);
        }
        let missing = || ForwardError::Input(format!("layer {l}: no compressed KV or top-k source"));
        let (src, isrc) = (plan.kv_source.ok_or_else(missing)?, plan.index_source.ok_or_else(missing)?);
        sources = Some((src, isrc));
    }
    let compressed = match sources {
        Some((src, isrc)) => {
            let missing = || ForwardError::Input(format!("layer {l}: source {src} / {isrc} published nothing this call"));
            let cache = layers.get(src).and_then(|s| s.comp.as_ref()).ok_or_else(missing)?;
            let sel = ctx.topk.get(isrc).and_then(Option::as_ref).ok_or_else(missing)?;
            Some((&cache.kv, sel))
        }
        None => None,
    };
    let sink = format!("{a}.attn_sink");
    let inputs = AttnInputs {
        kv: &kv,
        ring: &layers[l].window,
        compressed,
        sink: &sink,
        start: ctx.start,
        window: cfg.sliding_window,
        scale: (1.0 / (cfg.head_dim as f64).sqrt()) as f32,
    };
    let o = ex.sparse_attention(&q, &inputs)?;
    ex.ring_write(&mut layers[l].window, &kv, ctx.start)?;
    let o = ex.rope(&o, ctx.cs(plan.rope), heads, true)?;
    tap(ex, taps, format!("L{l}.attn.o"), &o)?;
    let z = ex.grouped_linear(&o, &format!("{a}.wo_a"), cfg.o_groups)?;
    let out = ex.linear(&z, &format!("{a}.wo_b"), Out::Bf16)?;
    tap(ex, taps, format!("L{l}.attn.out"), &out)?;
    Ok(out)
}

/// KV source: compresses this call's tokens (after any buffered partial group) and appends index keys and compressed rows.
fn compress<E: Executor>(
    ex: &mut E,
    m: &Model,
    l: usize,
    x: &E::Tensor,
    comp: &mut CompCache<E::Tensor>,
    ctx: &CallCtx<E::Tensor>,
    taps: &mut Taps<f32>,
) -> Result<(), ForwardError> {
    let (eps, r) = (m.eps(), comp.ratio);
    let c = format!("{}.attn.compressor", m.plan[l].prefix());
    let i = format!("{}.attn.indexer", m.plan[l].prefix());
    let end = ctx.start + ctx.len;
    let first = ctx.start / r;
    let groups = end / r - first;
    let pooled = match comp.partial.as_mut() {
        None => Some(ex.linear(x, &format!("{c}.wkv"), Out::Bf16)?),
        Some(partial) => {
            let k = ex.linear(x, &format!("{c}.wkv"), Out::F32)?;
            let g = ex.linear(x, &format!("{c}.wgate"), Out::F32)?;
            let pooled = ex.compress_pool(&k, &g, partial, comp.pending, r)?;
            comp.pending = end % r;
            (groups > 0).then_some(pooled)
        }
    };
    if let Some(pooled) = pooled.filter(|_| groups > 0) {
        let latent = ex.rmsnorm(&pooled, &format!("{c}.norm"), eps, Out::Bf16)?;
        let cs = ex.upload(groups, m.cfg.qk_rope_head_dim, &m.rope_rows(RopeTable::Compress, (first..first + groups).map(|j| j * r)))?;
        let keys = ex.linear(&latent, &format!("{i}.wk"), Out::Bf16)?;
        let keys = ex.rmsnorm(&keys, &format!("{i}.k_norm"), eps, Out::Bf16)?;
        let keys = ex.rope(&keys, &cs, 1, false)?;
        let keys = ex.qat(&keys, Qat::Fp4Index)?;
        tap(ex, taps, format!("L{l}.attn.index_keys"), &keys)?;
        ex.append_rows(&mut comp.index_keys, &keys)?;
        let rows = ex.rope(&latent, &cs, 1, false)?;
        let rows = ex.qat(&rows, Qat::Fp4Rows)?;
        tap(ex, taps, format!("L{l}.attn.comp"), &rows)?;
        ex.append_rows(&mut comp.kv, &rows)?;
        comp.rows += groups;
    }
    Ok(())
}

/// Index source: scores this call's queries against the KV source's index keys; returns the selected rows `[S, index_topk]`.
fn indexer<E: Executor>(
    ex: &mut E,
    m: &Model,
    plan: &LayerPlan,
    layers: &[LayerState<E::Tensor>],
    x: &E::Tensor,
    qr: &E::Tensor,
    ctx: &mut CallCtx<E::Tensor>,
) -> Result<E::Tensor, ForwardError> {
    let cfg = &m.cfg;
    let k = cfg.index_topk;
    let src = plan.kv_source.and_then(|s| layers.get(s)).and_then(|s| s.comp.as_ref());
    let cache = src.ok_or_else(|| ForwardError::Input(format!("layer {}: no index-key owner", plan.layer_id)))?;
    if cache.rows == 0 {
        return Ok(ex.upload(ctx.len, k, &vec![-1.0; ctx.len * k])?);
    }
    let i = format!("{}.attn.indexer", plan.prefix());
    let visible: Vec<usize> = (0..ctx.len).map(|t| (ctx.start + t + 1) / plan.ratio).collect();
    let q = ex.linear(qr, &format!("{i}.wq_b"), Out::Bf16)?;
    let q = ex.rope(&q, ctx.cs(plan.rope), cfg.index_n_heads, false)?;
    let q = ex.qat(&q, Qat::Fp4Index)?;
    let w = ex.linear(x, &format!("{i}.weights_proj"), Out::Bf16)?;
    let c = (cfg.index_head_dim as f64).powf(-0.5) * (cfg.index_n_heads as f64).powf(-0.5);
    let w = ex.scale(&w, c as f32, Out::Bf16)?;
    let mut scores = ex.index_scores(&q, &w, &cache.index_keys, &visible)?;
    if plan.candidate_source {
        ctx.candidates = Some(ex.candidate_mask(&scores, &visible, cfg.candidate_topk_blocks, cfg.candidate_block_size)?);
    } else if plan.candidate_mask {
        let mask = ctx.candidates.as_ref().ok_or_else(|| ForwardError::Input(format!("layer {}: no candidate blocks published", plan.layer_id)))?;
        scores = ex.mask_scores(&scores, mask)?;
    }
    Ok(ex.index_topk(&scores, k)?)
}
