//! The CPU executor's family ops: each row through its oracle in src/kernels (hc, engram, rope, compressor, indexer, attention, moe).
use crate::exec::cpu::{round_out, CpuExecutor, CpuTensor};
use crate::exec::shapes::{self, check};
use crate::exec::{AttnInputs, EngramGate, ExecError, HcParams, HcSite, Out, RouteParams, Stack};
use crate::kernels::{attention, compressor, engram, hc, indexer, moe, rope as rope_op};
use crate::numerics::round_bf16;

/// mHC mixes of each row.
pub(super) fn hc_mixes(ex: &CpuExecutor, h: &CpuTensor, site: &HcSite, p: &HcParams) -> Result<CpuTensor, ExecError> {
    let (f, base, scale) = (ex.values(&site.hc_fn)?, ex.values(&site.base)?, ex.values(&site.scale)?);
    let md = p.mix_dim();
    shapes::hc_mixes(&site.hc_fn, (f.len(), base.len(), scale.len()), p, (h.rows, h.cols))?;
    Ok(CpuTensor::from_rows(h.rows, md, |i| hc::mixes(h.row(i), &f, &scale, &base, p)))
}

/// Collapse of each row by the pre columns.
pub(super) fn hc_collapse(h: &CpuTensor, mix: &CpuTensor, hc_n: usize) -> Result<CpuTensor, ExecError> {
    shapes::hc_collapse((h.rows, h.cols), (mix.rows, mix.cols), hc_n)?;
    let d = h.cols / hc_n;
    Ok(CpuTensor::from_rows(h.rows, d, |i| hc::collapse(h.row(i), &mix.row(i)[..hc_n], hc_n, d)))
}

/// Expand of each row by the post and comb columns.
pub(super) fn hc_expand(out: &CpuTensor, h: &CpuTensor, mix: &CpuTensor, hc_n: usize) -> Result<CpuTensor, ExecError> {
    shapes::hc_expand((out.rows, out.cols), (h.rows, h.cols), (mix.rows, mix.cols), hc_n)?;
    Ok(CpuTensor::from_rows(h.rows, h.cols, |i| {
        let mr = mix.row(i);
        hc::expand(out.row(i), h.row(i), &mr[hc_n..2 * hc_n], &mr[2 * hc_n..], hc_n, out.cols)
    }))
}

/// Engram gate and add of each row.
pub(super) fn engram_gate(ex: &CpuExecutor, h: &CpuTensor, kv: &CpuTensor, qk: (&str, &str), p: &EngramGate, live: &[bool]) -> Result<CpuTensor, ExecError> {
    let (q, k) = (ex.values(qk.0)?, ex.values(qk.1)?);
    let n = p.hc * p.d;
    shapes::engram_gate((h.rows, h.cols), (kv.rows, kv.cols), (q.len(), k.len()), p, live.len())?;
    let w = engram::gate_weight(&q, &k);
    Ok(CpuTensor::from_rows(h.rows, n, |i| engram::gate_row(h.row(i), kv.row(i), &w, p, live[i])))
}

/// RoPE of each row.
pub(super) fn rope(x: &CpuTensor, cs: &CpuTensor, heads: usize, inverse: bool, pairs: rope_op::Pairs) -> Result<CpuTensor, ExecError> {
    shapes::rope((x.rows, x.cols), (cs.rows, cs.cols), heads)?;
    Ok(CpuTensor::from_rows(x.rows, x.cols, |i| rope_op::rotate(x.row(i), cs.row(i), heads, x.cols / heads, inverse, pairs)))
}

/// Gated pooling over the buffered rows then this call's rows; the remainder goes back into `partial`.
pub(super) fn compress_pool(k: &CpuTensor, g: &CpuTensor, partial: &mut CpuTensor, pending: usize, ratio: usize) -> Result<CpuTensor, ExecError> {
    let hd = k.cols;
    shapes::compress_pool((k.rows, k.cols), (g.rows, g.cols), (partial.rows, partial.cols), pending, ratio)?;
    let mut ks: Vec<&[f32]> = (0..pending).map(|t| &partial.row(t)[..hd]).collect();
    let mut gs: Vec<&[f32]> = (0..pending).map(|t| &partial.row(t)[hd..]).collect();
    ks.extend((0..k.rows).map(|t| k.row(t)));
    gs.extend((0..g.rows).map(|t| g.row(t)));
    let groups = ks.len() / ratio;
    let out = CpuTensor::from_rows(groups, hd, |j| compressor::pool_group(&ks[j * ratio..(j + 1) * ratio], &gs[j * ratio..(j + 1) * ratio]));
    let mut rest = vec![0.0f32; partial.rows * partial.cols];
    for t in 0..ks.len() - groups * ratio {
        rest[t * 2 * hd..t * 2 * hd + hd].copy_from_slice(ks[groups * ratio + t]);
        rest[t * 2 * hd + hd..(t + 1) * 2 * hd].copy_from_slice(gs[groups * ratio + t]);
    }
    partial.data = rest;
    Ok(out)
}

/// Indexer scores of each query row.
pub(super) fn index_scores(q: &CpuTensor, w: &CpuTensor, keys: &CpuTensor, visible: &[usize]) -> Result<CpuTensor, ExecError> {
    shapes::index_scores((q.rows, q.cols), (w.rows, w.cols), (keys.rows, keys.cols), visible.len())?;
    Ok(CpuTensor::from_rows(q.rows, keys.rows, |i| indexer::scores_row(q.row(i), w.row(i), &keys.data, keys.cols, visible[i])))
}

/// Level-one candidate mask of each row.
pub(super) fn candidate_mask(scores: &CpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<CpuTensor, ExecError> {
    shapes::candidate_mask((scores.rows, scores.cols), visible.len(), block)?;
    Ok(CpuTensor::from_rows(scores.rows, scores.cols, |i| indexer::candidate_mask_row(scores.row(i), visible[i], blocks, block)))
}

/// Sparse attention of each query row over its window then its selected compressed rows.
pub(super) fn sparse_attention(ex: &CpuExecutor, q: &CpuTensor, a: &AttnInputs<'_, CpuTensor>) -> Result<CpuTensor, ExecError> {
    let sink = ex.values(a.sink)?;
    let hd = a.kv.cols;
    let compressed = a.compressed.map(|(c, s)| ((c.rows, c.cols), (s.rows, s.cols)));
    shapes::sparse_attention((q.rows, q.cols), (a.kv.rows, hd), (a.ring.rows, a.ring.cols), a.window, sink.len(), compressed, a.compressed.map(|(_, s)| s.data.as_slice()))?;
    let empty = CpuTensor { rows: 0, cols: hd, data: Vec::new(), pack: None };
    let mut out = Vec::with_capacity(q.rows * q.cols);
    for i in 0..q.rows {
        let (comp, sel) = match a.compressed {
            Some((comp, sel)) => (comp, sel.row(i)),
            None => (&empty, &[][..]),
        };
        let keys = attention::call_keys(&a.kv.data, &a.ring.data, &comp.data, sel, hd, a.start, a.window, i, a.block);
        out.extend(attention::attend_row(q.row(i), &keys, &sink, hd, a.scale));
    }
    Ok(CpuTensor { rows: q.rows, cols: q.cols, data: out, pack: None })
}

/// Router of each row, with `bias_vl` on image rows.
pub(super) fn moe_route(ex: &CpuExecutor, logits: &CpuTensor, biases: (&str, Option<&str>), image: &[bool], p: &RouteParams) -> Result<(CpuTensor, CpuTensor), ExecError> {
    let (name, vl_name) = biases;
    let b = ex.values(name)?;
    let vl = match vl_name {
        Some(n) if image.iter().any(|&i| i) => ex.values(n)?,
        _ => b.clone(),
    };
    shapes::moe_route(name, (b.len(), vl.len()), (logits.rows, logits.cols), p.k, image.len())?;
    let routes: Vec<(Vec<u32>, Vec<f32>)> = (0..logits.rows).map(|i| moe::route_row(logits.row(i), if image[i] { &vl } else { &b }, p)).collect();
    let ids = routes.iter().flat_map(|(i, _)| i.iter().map(|&e| e as f32)).collect();
    let w = routes.iter().flat_map(|(_, w)| w.iter().copied()).collect();
    Ok((CpuTensor { rows: logits.rows, cols: p.k, data: ids, pack: None }, CpuTensor { rows: logits.rows, cols: p.k, data: w, pack: None }))
}

/// `x W_e^T` of packed rows by table entry: rows `first..first+n` through `stack`'s matrix e (each entry is `linear` of its rows); a one-column table is an expert per row.
pub(super) fn grouped_linear(ex: &CpuExecutor, x: &CpuTensor, stack: &Stack<'_>, table: &CpuTensor, out: Out) -> Result<CpuTensor, ExecError> {
    let repeated;
    let x = if table.cols == 1 && table.rows != x.rows {
        shapes::grouped_picks((x.rows, x.cols), x.cols, (table.rows, table.cols))?;
        let r = table.rows / x.rows;
        repeated = CpuTensor::from_rows(table.rows, x.cols, |g| x.row(g / r).to_vec());
        &repeated
    } else {
        x
    };
    let words: Vec<u32> = if table.cols == 1 { shapes::pick_entries(&table.data)? } else { table.data.iter().map(|&v| v as u32).collect() };
    let (_, n, k) = shapes::gemm_shape(ex.ckpt(), &stack.module(0))?;
    let entries = shapes::grouped_linear((x.rows, x.cols), k, &words)?;
    let mut y = vec![f32::NAN; x.rows * n];
    for e in entries {
        let (module, first, rows) = (stack.module(e.expert), e.first, e.rows);
        let (part, pn) = ex.linear_rows(&x.data[first * k..(first + rows) * k], rows, k, &module)?;
        check(pn == n, "grouped_linear", || format!("{module}.weight gives {pn} outputs, matrix 0 gives {n}"))?;
        y[first * n..(first + rows) * n].copy_from_slice(&part);
    }
    Ok(CpuTensor { rows: x.rows, cols: n, data: round_out(y, out), pack: None })
}

/// Each row's packed outputs by ascending expert id then the shared output (`moe::join_row`), rounded to bf16.
pub(super) fn moe_join(routed: &CpuTensor, slots: &CpuTensor, ids: &CpuTensor, shared: &CpuTensor) -> Result<CpuTensor, ExecError> {
    shapes::moe_join((routed.rows, routed.cols), (slots.rows, slots.cols), (ids.rows, ids.cols), (shared.rows, shared.cols))?;
    Ok(CpuTensor::from_rows(ids.rows, shared.cols, |i| {
        let picks: Vec<(u32, &[f32])> = (0..ids.cols).map(|j| (ids.row(i)[j] as u32, routed.row(slots.row(i)[j] as usize))).collect();
        moe::join_row(&picks, shared.row(i)).into_iter().map(round_bf16).collect()
    }))
}
