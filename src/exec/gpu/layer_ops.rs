//! The GPU executor's ops on the hc, engram, rope, qat, compressor, indexer, attention and router kernel families.
use crate::exec::gpu::{GpuExecutor, GpuTensor};
use crate::exec::gpu::ops::values;
use crate::gpu::{Arg, Lang};
use crate::kernels::attention::{self, split, AttnDims};
use crate::kernels::{compressor, engram, hc, indexer, moe, qat as qat_op, rope as rope_op};
use crate::exec::{shapes, AttnInputs, EngramGate, ExecError, HcParams, HcSite, Qat, RouteParams};

/// mHC mixes of each row.
pub(super) fn hc_mixes(ex: &mut GpuExecutor, h: &GpuTensor, site: &HcSite, p: &HcParams) -> Result<GpuTensor, ExecError> {
    ex.need("hc_mixes", "hc_mixes")?;
    let (f, fl) = values(ex, &site.hc_fn)?;
    let (base, bl) = values(ex, &site.base)?;
    let (scale, sl) = values(ex, &site.scale)?;
    let md = p.mix_dim();
    shapes::hc_mixes(&site.hc_fn, (fl, bl, sl), p, (h.rows, h.cols))?;
    let mix = ex.out(h.rows, md)?;
    let seg = ex.scratch(4 * hc::hc_mixes_scratch_words(h.rows, h.cols, md + 1) as u64)?;
    hc::record_hc_mixes(&mut ex.rec, &h.buf, &f, &scale, &base, &mix.buf, &seg, h.rows, h.cols / p.hc, p, 0)?;
    Ok(mix)
}

/// Collapse of each row by the pre columns.
pub(super) fn hc_collapse(ex: &mut GpuExecutor, h: &GpuTensor, mix: &GpuTensor, hc_n: usize) -> Result<GpuTensor, ExecError> {
    shapes::hc_collapse((h.rows, h.cols), (mix.rows, mix.cols), hc_n)?;
    ex.need("hc_collapse", "hc_collapse")?;
    let d = h.cols / hc_n;
    let y = ex.out(h.rows, d)?;
    hc::record_hc_collapse(&mut ex.rec, &h.buf, &mix.buf, &y.buf, h.rows, hc_n, d, mix.cols, 0)?;
    Ok(y)
}

/// Expand of each row by the post and comb columns.
pub(super) fn hc_expand(ex: &mut GpuExecutor, out: &GpuTensor, h: &GpuTensor, mix: &GpuTensor, hc_n: usize) -> Result<GpuTensor, ExecError> {
    shapes::hc_expand((out.rows, out.cols), (h.rows, h.cols), (mix.rows, mix.cols), hc_n)?;
    ex.need("hc_expand", "hc_expand")?;
    let y = ex.out(h.rows, h.cols)?;
    hc::record_hc_expand(&mut ex.rec, &out.buf, &h.buf, &mix.buf, &y.buf, h.rows, hc_n, out.cols, 0)?;
    Ok(y)
}

/// Engram gate and add of each row.
pub(super) fn engram_gate(ex: &mut GpuExecutor, h: &GpuTensor, kv: &GpuTensor, qk: (&str, &str), p: &EngramGate, live: &[bool]) -> Result<GpuTensor, ExecError> {
    ex.need("engram_gate", "engram_gate")?;
    let ((q, ql), (k, kl)) = (values(ex, qk.0)?, values(ex, qk.1)?);
    shapes::engram_gate((h.rows, h.cols), (kv.rows, kv.cols), (ql, kl), p, live.len())?;
    let flags: Vec<u32> = live.iter().map(|&l| u32::from(l)).collect();
    let flags = ex.upload_pod(&flags)?;
    let y = ex.out(h.rows, h.cols)?;
    engram::record_engram_gate(&mut ex.rec, &h.buf, &kv.buf, &q, &k, &flags, &y.buf, h.rows, p, 0)?;
    Ok(y)
}

/// RoPE of each row.
pub(super) fn rope(ex: &mut GpuExecutor, x: &GpuTensor, cs: &GpuTensor, heads: usize, inverse: bool, pairs: rope_op::Pairs) -> Result<GpuTensor, ExecError> {
    shapes::rope((x.rows, x.cols), (cs.rows, cs.cols), heads)?;
    let name = match (pairs, inverse) {
        (rope_op::Pairs::Halves, _) => "rope_halves",
        (_, true) => "rope_inverse",
        _ => "rope",
    };
    ex.need("rope", name)?;
    let y = ex.out(x.rows, x.cols)?;
    rope_op::record_rope(&mut ex.rec, &x.buf, &cs.buf, &y.buf, x.rows, heads, x.cols / heads, cs.cols, inverse, pairs, 0)?;
    Ok(y)
}

/// Quantize-dequantize round trip of each block.
pub(super) fn qat(ex: &mut GpuExecutor, x: &GpuTensor, kind: Qat) -> Result<GpuTensor, ExecError> {
    shapes::qat((x.rows, x.cols), kind)?;
    ex.need("qat", qat_kernel(kind))?;
    let y = ex.out(x.rows, x.cols)?;
    qat_op::record_qat(&mut ex.rec, kind, &x.buf, &y.buf, x.rows, x.cols, 0)?;
    Ok(y)
}

/// The registered kernel of a QAT kind.
fn qat_kernel(kind: Qat) -> &'static str {
    match kind {
        Qat::Fp8 => "qat_fp8",
        Qat::Fp4Rows => "qat_fp4_rows",
        Qat::Fp4Index => "qat_fp4_index",
    }
}

/// Gated pooling over the buffered rows then this call's rows; the remainder goes back into `partial` (in place).
pub(super) fn compress_pool(ex: &mut GpuExecutor, k: &GpuTensor, g: &GpuTensor, partial: &mut GpuTensor, pending_rows: usize, ratio: usize) -> Result<GpuTensor, ExecError> {
    let hd = k.cols;
    shapes::compress_pool((k.rows, k.cols), (g.rows, g.cols), (partial.rows, partial.cols), pending_rows, ratio)?;
    pool_of(ex, [Arg::Whole(&k.buf), Arg::Whole(&g.buf)], (k.rows, hd), partial, pending_rows, ratio)
}

/// Records the gated pooling of the `[rows, hd]` k and g the two arguments bind (shapes already checked).
fn pool_of(ex: &mut GpuExecutor, kg: [Arg; 2], (rows, hd): (usize, usize), partial: &mut GpuTensor, pending_rows: usize, ratio: usize) -> Result<GpuTensor, ExecError> {
    ex.need("compress_pool", "compress_pool")?;
    let pooled = ex.out(compressor::pool_groups(rows, pending_rows, ratio), hd)?;
    compressor::record_compress_pool_args(&mut ex.rec, kg, &partial.buf, &pooled.buf, rows, hd, pending_rows, ratio, 0)?;
    Ok(pooled)
}

/// `pooled_linears` for one row: k and g from one GEMV over both weights (`ops::cat_gemv`), bound as ranges of its output; None where that does not apply.
pub(super) fn pooled_linears(ex: &mut GpuExecutor, x: &GpuTensor, m: [&str; 2], partial: &mut GpuTensor, pending_rows: usize, ratio: usize) -> Result<Option<GpuTensor>, ExecError> {
    let Some((y, hd)) = super::ops::cat_gemv(ex, x, m[0], m[1], false)? else { return Ok(None) };
    if y.cols != 2 * hd {
        return Err(ExecError::BadWeight { name: format!("{}.weight", m[1]), problem: format!("{} outputs, {} has {hd}", y.cols - hd, m[0]) });
    }
    shapes::compress_pool((1, hd), (1, hd), (partial.rows, partial.cols), pending_rows, ratio)?;
    let b = 4 * hd as u64;
    pool_of(ex, [Arg::Range(&y.buf, 0, b), Arg::Range(&y.buf, b, b)], (1, hd), partial, pending_rows, ratio).map(Some)
}

/// Visible key counts as u32 words.
fn visible_words(ex: &mut GpuExecutor, visible: &[usize]) -> Result<crate::gpu::Buf, ExecError> {
    let v: Vec<u32> = visible.iter().map(|&n| n.min(u32::MAX as usize) as u32).collect();
    Ok(ex.upload_pod(&v)?)
}

/// Indexer scores of each query row.
pub(super) fn index_scores(ex: &mut GpuExecutor, q: &GpuTensor, w: &GpuTensor, keys: &GpuTensor, visible: &[usize]) -> Result<GpuTensor, ExecError> {
    shapes::index_scores((q.rows, q.cols), (w.rows, w.cols), (keys.rows, keys.cols), visible.len())?;
    ex.need("index_scores", "index_scores")?;
    let vis = visible_words(ex, visible)?;
    let y = ex.out(q.rows, keys.rows)?;
    indexer::record_index_scores(&mut ex.rec, &q.buf, &w.buf, &keys.buf, &vis, &y.buf, q.rows, keys.rows, w.cols, keys.cols, keys.pack, 0)?;
    Ok(y)
}

/// Level-one candidate mask of each row.
pub(super) fn candidate_mask(ex: &mut GpuExecutor, scores: &GpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<GpuTensor, ExecError> {
    shapes::candidate_mask((scores.rows, scores.cols), visible.len(), block)?;
    ex.need("candidate_mask", "candidate_mask")?;
    let vis = visible_words(ex, visible)?;
    let y = ex.out(scores.rows, scores.cols)?;
    indexer::record_candidate_mask(&mut ex.rec, &scores.buf, &vis, &y.buf, scores.rows, scores.cols, blocks, block, 0)?;
    Ok(y)
}

/// Scores outside the mask set to -inf.
pub(super) fn mask_scores(ex: &mut GpuExecutor, scores: &GpuTensor, mask: &GpuTensor) -> Result<GpuTensor, ExecError> {
    shapes::same_dims("mask_scores", (scores.rows, scores.cols), (mask.rows, mask.cols))?;
    ex.need("mask_scores", "mask_scores")?;
    let y = ex.out(scores.rows, scores.cols)?;
    indexer::record_mask_scores(&mut ex.rec, &scores.buf, &mask.buf, &y.buf, scores.rows, scores.cols, 0)?;
    Ok(y)
}

/// Top-k of each row over its visible scores: indices ascending as f32, -1 for none.
pub(super) fn index_topk(ex: &mut GpuExecutor, scores: &GpuTensor, visible: &[usize], k: usize) -> Result<GpuTensor, ExecError> {
    shapes::index_topk((scores.rows, scores.cols), visible.len())?;
    ex.need("index_topk", "index_topk")?;
    let vis = visible_words(ex, visible)?;
    let y = ex.out(scores.rows, k)?;
    indexer::record_index_topk(&mut ex.rec, &scores.buf, &vis, &y.buf, scores.rows, scores.cols, k, 0)?;
    Ok(y)
}

/// Sparse attention with sink over each row's window then its selected compressed rows.
pub(super) fn sparse_attention(ex: &mut GpuExecutor, q: &GpuTensor, a: &AttnInputs<'_, GpuTensor>) -> Result<GpuTensor, ExecError> {
    ex.need("sparse_attention", "sparse_attention")?;
    let (sink, heads) = values(ex, a.sink)?;
    let hd = a.kv.cols;
    let compressed = a.compressed.map(|(c, s)| ((c.rows, c.cols), (s.rows, s.cols)));
    shapes::sparse_attention((q.rows, q.cols), (a.kv.rows, hd), (a.ring.rows, a.ring.cols), a.window, heads, compressed, None)?;
    let (comp, sel, topk) = match a.compressed {
        Some((comp, sel)) => (&comp.buf, &sel.buf, sel.cols),
        None => (&a.ring.buf, &a.ring.buf, 0),
    };
    let o = ex.out(q.rows, q.cols)?;
    let d = AttnDims { rows: q.rows, heads, dim: hd, start: a.start, window: a.window, topk, scale: a.scale, block: if a.block { a.kv.rows } else { 0 } };
    if ex.gpu.native_msl() {
        attention::record_sparse_attention(&mut ex.rec, &q.buf, &a.kv.buf, &a.ring.buf, comp, sel, &sink, &o.buf, &d, Lang::Msl, 0)?;
        return Ok(o);
    }
    let rows = split::chunk_rows(&d);
    let [kb, cb, sb] = split::scratch_bytes(&d, rows);
    let (keys, counts, scores) = (ex.scratch(kb)?, ex.scratch(cb)?, ex.scratch(sb)?);
    let scratch = split::SplitScratch { keys: &keys, counts: &counts, scores: &scores, rows };
    split::record_split(&mut ex.rec, &q.buf, &a.kv.buf, &a.ring.buf, comp, sel, &sink, &o.buf, &d, &scratch, 0)?;
    Ok(o)
}

/// Router of each row, with `bias_vl` on image rows.
pub(super) fn moe_route(ex: &mut GpuExecutor, logits: &GpuTensor, biases: (&str, Option<&str>), image: &[bool], p: &RouteParams) -> Result<(GpuTensor, GpuTensor), ExecError> {
    ex.need("moe_route", "moe_route")?;
    let (name, vl_name) = biases;
    let (b, bl) = values(ex, name)?;
    let (vl, vll) = match vl_name {
        Some(n) if image.iter().any(|&i| i) => values(ex, n)?,
        _ => (b.clone(), bl),
    };
    shapes::moe_route(name, (bl, vll), (logits.rows, logits.cols), p.k, image.len())?;
    let flags: Vec<u32> = image.iter().map(|&i| u32::from(i)).collect();
    let flags = ex.upload_pod(&flags)?;
    let (ids, w) = (ex.out(logits.rows, p.k)?, ex.out(logits.rows, p.k)?);
    moe::record_moe_route(&mut ex.rec, &logits.buf, &b, &vl, &flags, &ids.buf, &w.buf, logits.rows, logits.cols, p, 0)?;
    Ok((ids, w))
}
