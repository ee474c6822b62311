//! The GPU executor's model ops on the hc, rope, qat, compressor, indexer, attention and MoE kernel families.
use super::cpu::check;
use super::gpu::{GpuExecutor, GpuTensor};
use super::gpu_rows::pending;
use super::{AttnInputs, EngramGate, ExecError, HcParams, HcSite, Qat, RouteParams};

/// mHC mixes of each row.
pub(super) fn hc_mixes(ex: &mut GpuExecutor, h: &GpuTensor, site: &HcSite, p: &HcParams) -> Result<GpuTensor, ExecError> {
    let _ = (ex, h, site, p);
    Err(pending("hc_mixes"))
}

/// Collapse of each row by the pre columns.
pub(super) fn hc_collapse(ex: &mut GpuExecutor, h: &GpuTensor, mix: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
    check(h.rows == mix.rows && hc > 0 && h.cols.is_multiple_of(hc) && mix.cols >= hc, "hc_collapse", || format!("h [{}, {}], mix [{}, {}]", h.rows, h.cols, mix.rows, mix.cols))?;
    let _ = ex;
    Err(pending("hc_collapse"))
}

/// Expand of each row by the post and comb columns.
pub(super) fn hc_expand(ex: &mut GpuExecutor, out: &GpuTensor, h: &GpuTensor, mix: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
    let ok = h.rows == mix.rows && out.rows == h.rows && h.cols == hc * out.cols && mix.cols == (2 + hc) * hc;
    check(ok, "hc_expand", || format!("out [{}, {}], h [{}, {}], mix [{}, {}]", out.rows, out.cols, h.rows, h.cols, mix.rows, mix.cols))?;
    let _ = ex;
    Err(pending("hc_expand"))
}

/// Engram gate and add of each row.
pub(super) fn engram_gate(ex: &mut GpuExecutor, h: &GpuTensor, kv: &GpuTensor, qk: (&str, &str), p: &EngramGate, live: &[bool]) -> Result<GpuTensor, ExecError> {
    let _ = (ex, h, kv, qk, p, live);
    Err(pending("engram_gate"))
}

/// RoPE of each row.
pub(super) fn rope(ex: &mut GpuExecutor, x: &GpuTensor, cs: &GpuTensor, heads: usize, inverse: bool) -> Result<GpuTensor, ExecError> {
    let ok = cs.rows == x.rows && heads > 0 && x.cols.is_multiple_of(heads) && cs.cols.is_multiple_of(2) && cs.cols <= x.cols / heads;
    check(ok, "rope", || format!("x [{}, {}] with {heads} heads, table [{}, {}]", x.rows, x.cols, cs.rows, cs.cols))?;
    let _ = (ex, inverse);
    Err(pending("rope"))
}

/// Quantize-dequantize round trip of each block.
pub(super) fn qat(ex: &mut GpuExecutor, x: &GpuTensor, kind: Qat) -> Result<GpuTensor, ExecError> {
    check(x.cols.is_multiple_of(kind.block()), "qat", || format!("{} columns are not a multiple of the {kind:?} block", x.cols))?;
    let _ = ex;
    Err(pending("qat"))
}

/// Gated pooling over the buffered rows then this call's rows; the remainder goes back into `partial`.
pub(super) fn compress_pool(ex: &mut GpuExecutor, k: &GpuTensor, g: &GpuTensor, partial: &mut GpuTensor, pending_rows: usize, ratio: usize) -> Result<GpuTensor, ExecError> {
    let hd = k.cols;
    let ok = ratio > 1 && (k.rows, k.cols) == (g.rows, g.cols) && partial.cols == 2 * hd && partial.rows + 1 >= ratio && pending_rows < ratio;
    check(ok, "compress_pool", || format!("k [{}, {hd}], partial [{}, {}], pending {pending_rows}, ratio {ratio}", k.rows, partial.rows, partial.cols))?;
    let _ = ex;
    Err(pending("compress_pool"))
}

/// Indexer scores of each query row.
pub(super) fn index_scores(ex: &mut GpuExecutor, q: &GpuTensor, w: &GpuTensor, keys: &GpuTensor, visible: &[usize]) -> Result<GpuTensor, ExecError> {
    let ok = q.rows == w.rows && visible.len() == q.rows && keys.cols > 0 && q.cols == w.cols * keys.cols;
    check(ok, "index_scores", || format!("q [{}, {}], w [{}, {}], keys [{}, {}]", q.rows, q.cols, w.rows, w.cols, keys.rows, keys.cols))?;
    let _ = ex;
    Err(pending("index_scores"))
}

/// Level-one candidate mask of each row.
pub(super) fn candidate_mask(ex: &mut GpuExecutor, scores: &GpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<GpuTensor, ExecError> {
    check(visible.len() == scores.rows && block > 0, "candidate_mask", || format!("{} rows, {} visible counts, block {block}", scores.rows, visible.len()))?;
    let _ = (ex, blocks);
    Err(pending("candidate_mask"))
}

/// Scores outside the mask set to -inf.
pub(super) fn mask_scores(ex: &mut GpuExecutor, scores: &GpuTensor, mask: &GpuTensor) -> Result<GpuTensor, ExecError> {
    check((scores.rows, scores.cols) == (mask.rows, mask.cols), "mask_scores", || format!("[{}, {}] vs [{}, {}]", scores.rows, scores.cols, mask.rows, mask.cols))?;
    let _ = ex;
    Err(pending("mask_scores"))
}

/// Top-k of each row: indices ascending as f32, -1 for none.
pub(super) fn index_topk(ex: &mut GpuExecutor, scores: &GpuTensor, k: usize) -> Result<GpuTensor, ExecError> {
    let _ = (ex, scores, k);
    Err(pending("index_topk"))
}

/// Sparse attention with sink over each row's window then its selected compressed rows.
pub(super) fn sparse_attention(ex: &mut GpuExecutor, q: &GpuTensor, a: &AttnInputs<'_, GpuTensor>) -> Result<GpuTensor, ExecError> {
    let _ = (ex, q, a);
    Err(pending("sparse_attention"))
}

/// Router of each row, with `bias_vl` on image rows.
pub(super) fn moe_route(ex: &mut GpuExecutor, logits: &GpuTensor, biases: (&str, Option<&str>), image: &[bool], p: &RouteParams) -> Result<(GpuTensor, GpuTensor), ExecError> {
    let _ = (ex, logits, biases, image, p);
    Err(pending("moe_route"))
}

/// Routed experts of each row, joined by ascending expert id.
pub(super) fn routed_experts(ex: &mut GpuExecutor, x: &GpuTensor, ids: &GpuTensor, w: &GpuTensor, prefix: &str, limit: f32) -> Result<GpuTensor, ExecError> {
    let _ = (ex, x, ids, w, prefix, limit);
    Err(pending("moe_join"))
}
