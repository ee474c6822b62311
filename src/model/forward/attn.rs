//! The attention block of one layer: q and window kv paths, compressor and index keys at KV sources, indexer and top-k at index sources, sparse attention with sink, grouped output.
use super::batch::{concat, part, tap_parts, Part};
use super::{tap, CallCtx, ForwardError, Model};
use crate::model::LayerState;
use crate::exec::{AttnInputs, ExecError, Executor, Out, Qat};
use crate::model::taps::Taps;
use crate::model::{LayerPlan, RopeTable};

/// Attention of layer `l` on the normed input `x` `[S, D]` of all the round's rows, `layers` the sequences' states in batch order; returns `wo_b`'s output `[S, D]`.
pub(super) fn attention<E: Executor>(
    ex: &mut E,
    m: &Model,
    layers: &mut [&mut [LayerState<E::Tensor>]],
    l: usize,
    x: &E::Tensor,
    ctx: &mut CallCtx<E::Tensor>,
    taps: &mut Taps<f32>,
) -> Result<E::Tensor, ForwardError> {
    let cfg = &m.cfg;
    let plan = &m.plan[l];
    let a = format!("{}.attn", plan.prefix());
    let (eps, heads) = (m.eps(), cfg.num_attention_heads);
    let (qr, kv) = ex.normed_linears(x, [&format!("{a}.wq_a"), &format!("{a}.q_norm")], [&format!("{a}.wkv"), &format!("{a}.kv_norm")], eps)?;
    let q = ex.linear(&qr, &format!("{a}.wq_b"), Out::Bf16)?;
    let q = ex.rope(&q, ctx.cs(plan.rope), heads, false)?;
    tap(ex, taps, format!("L{l}.attn.q"), &q)?;
    let kv = ex.rope(&kv, ctx.cs(plan.rope), 1, false)?;
    let kv = ex.qat(&kv, Qat::Fp8)?;
    tap(ex, taps, format!("L{l}.attn.kv"), &kv)?;
    let mut sources = None;
    if plan.ratio > 0 {
        if layers.iter().all(|s| s.get(l).is_some_and(|st| st.comp.is_some())) {
            compress(ex, m, l, x, layers, ctx, taps)?;
        }
        if plan.is_index_source() {
            let topk = indexer(ex, m, plan, layers, x, &qr, ctx)?;
            tap_parts(ex, taps, format!("L{l}.attn.topk"), &topk.iter().collect::<Vec<_>>())?;
            for (c, t) in ctx.seqs.iter_mut().zip(topk) {
                c.topk[l] = Some(t);
            }
        }
        let missing = || ForwardError::Input(format!("layer {l}: no compressed KV or top-k source"));
        sources = Some((plan.kv_source.ok_or_else(missing)?, plan.index_source.ok_or_else(missing)?));
    }
    let sink = format!("{a}.attn_sink");
    let scale = (1.0 / (cfg.head_dim as f64).sqrt()) as f32;
    let mut outs = Vec::new();
    for (i, c) in ctx.seqs.iter().enumerate() {
        let st = &mut *layers[i];
        let (qi, kvi) = (part(ex, &q, c.row, c.len)?, part(ex, &kv, c.row, c.len)?);
        let unpacked = match sources {
            Some((src, isrc)) => {
                let missing = || ForwardError::Input(format!("layer {l}: source {src} / {isrc} published nothing this call"));
                let cache = st.get(src).and_then(|s| s.comp.as_ref()).ok_or_else(missing)?;
                let sel = c.topk.get(isrc).and_then(Option::as_ref).ok_or_else(missing)?;
                Some(compressed_rows(ex, &cache.kv, sel)?)
            }
            None => None,
        };
        let compressed = unpacked.as_ref().map(|(rows, sel)| (rows, sel.get()));
        let inputs = AttnInputs { kv: kvi.get(), ring: &st[l].window, compressed, sink: &sink, start: c.start, window: cfg.sliding_window, scale, block: false };
        outs.push(ex.sparse_attention(qi.get(), &inputs)?);
        ex.ring_write(&mut st[l].window, kvi.get(), c.start)?;
    }
    let o = concat(ex, outs, heads * cfg.head_dim)?;
    let o = ex.rope(&o, ctx.cs(plan.rope), heads, true)?;
    tap(ex, taps, format!("L{l}.attn.o"), &o)?;
    let z = ex.block_linear(&o, &format!("{a}.wo_a"), cfg.o_groups, cfg.o_lora_rank)?;
    let out = ex.linear(&z, &format!("{a}.wo_b"), Out::Bf16)?;
    tap(ex, taps, format!("L{l}.attn.out"), &out)?;
    Ok(out)
}

/// A sequence's compressed rows for attention, unpacked: only the rows its selection `[S, k]` picks (the selection renumbered to them) while they are fewer than the cache's rows, else every row.
fn compressed_rows<'s, E: Executor>(ex: &mut E, cache: &E::Tensor, sel: &'s E::Tensor) -> Result<(E::Tensor, Part<'s, E::Tensor>), ExecError> {
    let (s, k) = ex.dims(sel);
    if s * k < ex.dims(cache).0 {
        let (rows, places) = ex.unpack_rows(cache, Some(sel))?;
        let places = places.ok_or_else(|| ExecError::Shape { op: "unpack_rows", problem: "no renumbered selection".into() })?;
        Ok((rows, Part::Rows(places)))
    } else {
        Ok((ex.unpack_rows(cache, None)?.0, Part::Whole(sel)))
    }
}

/// KV source: compresses each sequence's tokens (after its buffered partial group) and appends its index keys and compressed rows; the GEMMs run once over all rows.
fn compress<E: Executor>(
    ex: &mut E,
    m: &Model,
    l: usize,
    x: &E::Tensor,
    layers: &mut [&mut [LayerState<E::Tensor>]],
    ctx: &CallCtx<E::Tensor>,
    taps: &mut Taps<f32>,
) -> Result<(), ForwardError> {
    let eps = m.eps();
    let c = format!("{}.attn.compressor", m.plan[l].prefix());
    let i = format!("{}.attn.indexer", m.plan[l].prefix());
    let hd = m.cfg.head_dim;
    let buffered = layers.iter().all(|s| s[l].comp.as_ref().is_some_and(|cc| cc.partial.is_some()));
    let (mut pooled, mut groups, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    let all = if buffered {
        let (wkv, wgate) = (format!("{c}.wkv"), format!("{c}.wgate"));
        // One sequence that keeps no journal pools its rows in one op; otherwise the linears run once over every row.
        let alone = matches!(&ctx.seqs[..], [sc] if !sc.journal && sc.row == 0 && ex.dims(x).0 == sc.len);
        let kg = if alone { None } else { Some((ex.linear(x, &wkv, Out::F32)?, ex.linear(x, &wgate, Out::F32)?)) };
        for (st, sc) in layers.iter_mut().zip(&ctx.seqs) {
            let comp = st[l].comp.as_mut().ok_or_else(|| ForwardError::Input(format!("layer {l}: no compressed caches")))?;
            let (r, end) = (comp.ratio, sc.start + sc.len);
            let (first, n) = (sc.start / r, end / r - sc.start / r);
            let partial = comp.partial.as_mut().ok_or_else(|| ForwardError::Input(format!("layer {l}: no partial group")))?;
            let (p, journal) = match &kg {
                None => (ex.pooled_linears(x, [&wkv, &wgate], partial, comp.pending, r)?, None),
                Some((k, g)) => {
                    let (ki, gi) = (part(ex, k, sc.row, sc.len)?, part(ex, g, sc.row, sc.len)?);
                    let p = ex.compress_pool(ki.get(), gi.get(), partial, comp.pending, r)?;
                    (p, if sc.journal { Some((ki.owned(ex)?, gi.owned(ex)?)) } else { None })
                }
            };
            comp.pending = end % r;
            comp.journal = journal;
            if n > 0 {
                pooled.push(p);
            }
            groups.push(n);
            positions.extend((first..first + n).map(|j| j * r));
        }
        if pooled.is_empty() {
            return Ok(());
        }
        concat(ex, pooled, hd)?
    } else {
        for (st, sc) in layers.iter().zip(&ctx.seqs) {
            let r = st[l].comp.as_ref().map_or(1, |cc| cc.ratio);
            let (first, n) = (sc.start / r, (sc.start + sc.len) / r - sc.start / r);
            groups.push(n);
            positions.extend((first..first + n).map(|j| j * r));
        }
        ex.linear(x, &format!("{c}.wkv"), Out::Bf16)?
    };
    let total: usize = groups.iter().sum();
    if total == 0 {
        return Ok(());
    }
    let latent = ex.rmsnorm(&all, &format!("{c}.norm"), eps, Out::Bf16)?;
    let cs = ex.upload(total, m.cfg.qk_rope_head_dim, &m.rope_rows(RopeTable::Compress, positions.into_iter()))?;
    let keys = ex.linear(&latent, &format!("{i}.wk"), Out::Bf16)?;
    let keys = ex.rmsnorm(&keys, &format!("{i}.k_norm"), eps, Out::Bf16)?;
    let keys = ex.rope(&keys, &cs, 1, false)?;
    let keys = ex.qat(&keys, Qat::Fp4Index)?;
    tap(ex, taps, format!("L{l}.attn.index_keys"), &keys)?;
    let rows = ex.rope(&latent, &cs, 1, false)?;
    let rows = ex.qat(&rows, Qat::Fp4Rows)?;
    tap(ex, taps, format!("L{l}.attn.comp"), &rows)?;
    let mut at = 0;
    for (st, n) in layers.iter_mut().zip(groups) {
        let Some(comp) = st[l].comp.as_mut().filter(|_| n > 0) else { continue };
        let ki = part(ex, &keys, at, n)?;
        ex.append_rows(&mut comp.index_keys, ki.get())?;
        let ri = part(ex, &rows, at, n)?;
        ex.append_rows(&mut comp.kv, ri.get())?;
        comp.rows += n;
        at += n;
    }
    Ok(())
}

/// Index source: scores each sequence's queries against its KV source's index keys; returns each sequence's selected rows `[S_i, index_topk]`.
fn indexer<E: Executor>(
    ex: &mut E,
    m: &Model,
    plan: &LayerPlan,
    layers: &[&mut [LayerState<E::Tensor>]],
    x: &E::Tensor,
    qr: &E::Tensor,
    ctx: &mut CallCtx<E::Tensor>,
) -> Result<Vec<E::Tensor>, ForwardError> {
    let cfg = &m.cfg;
    let k = cfg.index_topk;
    let no_owner = || ForwardError::Input(format!("layer {}: no index-key owner", plan.layer_id));
    let caches = layers.iter().map(|st| plan.kv_source.and_then(|s| st.get(s)).and_then(|s| s.comp.as_ref()).ok_or_else(no_owner)).collect::<Result<Vec<_>, _>>()?;
    let qw = if caches.iter().any(|c| c.rows > 0) {
        let i = format!("{}.attn.indexer", plan.prefix());
        let q = ex.linear(qr, &format!("{i}.wq_b"), Out::Bf16)?;
        let q = ex.rope(&q, ctx.cs(plan.rope), cfg.index_n_heads, false)?;
        let q = ex.qat(&q, Qat::Fp4Index)?;
        let w = ex.linear(x, &format!("{i}.weights_proj"), Out::Bf16)?;
        let c = (cfg.index_head_dim as f64).powf(-0.5) * (cfg.index_n_heads as f64).powf(-0.5);
        Some((q, ex.scale(&w, c as f32, Out::Bf16)?))
    } else {
        None
    };
    let mut out = Vec::new();
    for (sc, cache) in ctx.seqs.iter_mut().zip(caches) {
        let Some((q, w)) = qw.as_ref().filter(|_| cache.rows > 0) else {
            out.push(ex.upload(sc.len, k, &vec![-1.0; sc.len * k])?);
            continue;
        };
        let visible: Vec<usize> = (0..sc.len).map(|t| (sc.start + t + 1) / plan.ratio).collect();
        let (qi, wi) = (part(ex, q, sc.row, sc.len)?, part(ex, w, sc.row, sc.len)?);
        let mut scores = ex.index_scores(qi.get(), wi.get(), &cache.index_keys, &visible)?;
        if plan.candidate_source {
            sc.candidates = Some(ex.candidate_mask(&scores, &visible, cfg.candidate_topk_blocks, cfg.candidate_block_size)?);
        } else if plan.candidate_mask {
            let mask = sc.candidates.as_ref().ok_or_else(|| ForwardError::Input(format!("layer {}: no candidate blocks published", plan.layer_id)))?;
            scores = ex.mask_scores(&scores, mask)?;
        }
        out.push(ex.index_topk(&scores, &visible, k)?);
    }
    Ok(out)
}
