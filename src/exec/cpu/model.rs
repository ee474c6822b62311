//! The CPU executor's model ops: each row through its oracle in src/kernels (hc, engram_op, rope, compressor, indexer, attention, moe).
use crate::exec::cpu::{bf16_valued, check, CpuExecutor, CpuTensor};
use crate::exec::{AttnInputs, EngramGate, ExecError, HcParams, HcSite, RouteParams};
use crate::kernels::gemm::{self, WeightFormat};
use crate::kernels::ops;
use crate::kernels::{attention, compressor, engram, hc, indexer, moe, rope as rope_op};
use crate::weights::Dtype;
use crate::numerics::round_bf16;

/// Block-diagonal grouped GEMM of `wo_a`: per group, the fp8 weight rows times x's group columns, scales on block sums, bf16 out.
pub(super) fn grouped_linear(ex: &CpuExecutor, x: &CpuTensor, module: &str, groups: usize) -> Result<CpuTensor, ExecError> {
    let name = format!("{module}.weight");
    let w = ex.view(&name)?;
    let bad = |problem: String| ExecError::BadWeight { name: name.clone(), problem };
    let [n, dg] = *w.shape else { return Err(bad("not 2-D".into())) };
    if groups == 0 || !n.is_multiple_of(groups) || x.cols != groups * dg {
        return Err(bad(format!("[{n}, {dg}] does not split into {groups} groups over {} inputs", x.cols)));
    }
    bf16_valued("grouped_linear", &x.data)?;
    let r = n / groups;
    let mut y = vec![0.0f32; x.rows * n];
    for g in 0..groups {
        let xg: Vec<f32> = (0..x.rows).flat_map(|i| x.row(i)[g * dg..(g + 1) * dg].to_vec()).collect();
        let part = match w.dtype {
            Dtype::BF16 => gemm::oracle(WeightFormat::Bf16, x.rows, r, dg, &xg, &[], &w.bytes[g * r * dg * 2..(g + 1) * r * dg * 2], &[]),
            Dtype::F8E4M3 => {
                if !r.is_multiple_of(32) || !dg.is_multiple_of(32) {
                    return Err(bad(format!("group rows {r} and inputs {dg} must be multiples of 32")));
                }
                let ws = ex.view(&format!("{module}.scale"))?;
                let nb = dg / 32;
                if ws.bytes.len() != (n / 32) * nb {
                    return Err(bad(format!("scale has {} bytes, expected {}", ws.bytes.len(), (n / 32) * nb)));
                }
                let ones = vec![1.0f32; x.rows * nb];
                let wg = &w.bytes[g * r * dg..(g + 1) * r * dg];
                let sg = &ws.bytes[(g * r / 32) * nb..((g + 1) * r / 32) * nb];
                gemm::oracle(WeightFormat::E4m3, x.rows, r, dg, &xg, &ones, wg, sg)
            }
            d => return Err(bad(format!("dtype {d} is not BF16 or F8_E4M3"))),
        };
        for i in 0..x.rows {
            for j in 0..r {
                y[i * n + g * r + j] = round_bf16(part[i * r + j]);
            }
        }
    }
    Ok(CpuTensor { rows: x.rows, cols: n, data: y })
}

/// mHC mixes of each row.
pub(super) fn hc_mixes(ex: &CpuExecutor, h: &CpuTensor, site: &HcSite, p: &HcParams) -> Result<CpuTensor, ExecError> {
    let (f, base, scale) = (ex.values(&site.hc_fn)?, ex.values(&site.base)?, ex.values(&site.scale)?);
    let md = p.mix_dim();
    check(f.len() == md * h.cols && base.len() == md && scale.len() == 3, "hc_mixes", || {
        format!("{}: {} / {} / {} values for mix {md} over {}", site.hc_fn, f.len(), base.len(), scale.len(), h.cols)
    })?;
    Ok(CpuTensor::from_rows(h.rows, md, |i| hc::mixes(h.row(i), &f, &scale, &base, p)))
}

/// Collapse of each row by the pre columns.
pub(super) fn hc_collapse(h: &CpuTensor, mix: &CpuTensor, hc_n: usize) -> Result<CpuTensor, ExecError> {
    check(h.rows == mix.rows && hc_n > 0 && h.cols.is_multiple_of(hc_n) && mix.cols >= hc_n, "hc_collapse", || format!("h [{}, {}], mix [{}, {}]", h.rows, h.cols, mix.rows, mix.cols))?;
    let d = h.cols / hc_n;
    Ok(CpuTensor::from_rows(h.rows, d, |i| hc::collapse(h.row(i), &mix.row(i)[..hc_n], hc_n, d)))
}

/// Expand of each row by the post and comb columns.
pub(super) fn hc_expand(out: &CpuTensor, h: &CpuTensor, mix: &CpuTensor, hc_n: usize) -> Result<CpuTensor, ExecError> {
    let ok = h.rows == mix.rows && out.rows == h.rows && h.cols == hc_n * out.cols && mix.cols == (2 + hc_n) * hc_n;
    check(ok, "hc_expand", || format!("out [{}, {}], h [{}, {}], mix [{}, {}]", out.rows, out.cols, h.rows, h.cols, mix.rows, mix.cols))?;
    Ok(CpuTensor::from_rows(h.rows, h.cols, |i| {
        let mr = mix.row(i);
        hc::expand(out.row(i), h.row(i), &mr[hc_n..2 * hc_n], &mr[2 * hc_n..], hc_n, out.cols)
    }))
}

/// Engram gate and add of each row.
pub(super) fn engram_gate(ex: &CpuExecutor, h: &CpuTensor, kv: &CpuTensor, qk: (&str, &str), p: &EngramGate, live: &[bool]) -> Result<CpuTensor, ExecError> {
    let (q, k) = (ex.values(qk.0)?, ex.values(qk.1)?);
    let n = p.hc * p.d;
    let ok = q.len() == n && k.len() == n && h.cols == n && kv.cols == n + p.d && h.rows == kv.rows && live.len() == h.rows;
    check(ok, "engram_gate", || format!("h [{}, {}], kv [{}, {}], weights {} / {}", h.rows, h.cols, kv.rows, kv.cols, q.len(), k.len()))?;
    let w: Vec<f32> = q.iter().zip(&k).map(|(a, b)| a * b).collect();
    Ok(CpuTensor::from_rows(h.rows, n, |i| engram::gate_row(h.row(i), kv.row(i), &w, p, live[i])))
}

/// RoPE of each row.
pub(super) fn rope(x: &CpuTensor, cs: &CpuTensor, heads: usize, inverse: bool) -> Result<CpuTensor, ExecError> {
    let ok = cs.rows == x.rows && heads > 0 && x.cols.is_multiple_of(heads) && cs.cols.is_multiple_of(2) && cs.cols <= x.cols / heads;
    check(ok, "rope", || format!("x [{}, {}] with {heads} heads, table [{}, {}]", x.rows, x.cols, cs.rows, cs.cols))?;
    Ok(CpuTensor::from_rows(x.rows, x.cols, |i| rope_op::rotate(x.row(i), cs.row(i), heads, x.cols / heads, inverse)))
}

/// Gated pooling over the buffered rows then this call's rows; the remainder goes back into `partial`.
pub(super) fn compress_pool(k: &CpuTensor, g: &CpuTensor, partial: &mut CpuTensor, pending: usize, ratio: usize) -> Result<CpuTensor, ExecError> {
    let hd = k.cols;
    let ok = ratio > 1 && (k.rows, k.cols) == (g.rows, g.cols) && partial.cols == 2 * hd && partial.rows + 1 >= ratio && pending < ratio;
    check(ok, "compress_pool", || format!("k [{}, {hd}], partial [{}, {}], pending {pending}, ratio {ratio}", k.rows, partial.rows, partial.cols))?;
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
    let ok = q.rows == w.rows && visible.len() == q.rows && keys.cols > 0 && q.cols == w.cols * keys.cols;
    check(ok, "index_scores", || format!("q [{}, {}], w [{}, {}], keys [{}, {}]", q.rows, q.cols, w.rows, w.cols, keys.rows, keys.cols))?;
    Ok(CpuTensor::from_rows(q.rows, keys.rows, |i| indexer::scores_row(q.row(i), w.row(i), &keys.data, keys.cols, visible[i])))
}

/// Level-one candidate mask of each row.
pub(super) fn candidate_mask(scores: &CpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<CpuTensor, ExecError> {
    check(visible.len() == scores.rows && block > 0, "candidate_mask", || format!("{} rows, {} visible counts, block {block}", scores.rows, visible.len()))?;
    Ok(CpuTensor::from_rows(scores.rows, scores.cols, |i| indexer::candidate_mask_row(scores.row(i), visible[i], blocks, block)))
}

/// Sparse attention of each query row over its window then its selected compressed rows.
pub(super) fn sparse_attention(ex: &CpuExecutor, q: &CpuTensor, a: &AttnInputs<'_, CpuTensor>) -> Result<CpuTensor, ExecError> {
    let sink = ex.values(a.sink)?;
    let hd = a.kv.cols;
    let ok = q.rows == a.kv.rows && q.cols == sink.len() * hd && a.ring.cols == hd && a.ring.rows == a.window && a.window > 0;
    check(ok, "sparse_attention", || format!("q [{}, {}], kv [{}, {hd}], ring [{}, {}], {} sinks", q.rows, q.cols, a.kv.rows, a.ring.rows, a.ring.cols, sink.len()))?;
    if let Some((comp, sel)) = a.compressed {
        let bad = sel.data.iter().find(|&&v| v >= 0.0 && v as usize >= comp.rows);
        check(comp.cols == hd && sel.rows == q.rows && bad.is_none(), "sparse_attention", || format!("selection {bad:?} outside {} compressed rows", comp.rows))?;
    }
    let mut out = Vec::with_capacity(q.rows * q.cols);
    for i in 0..q.rows {
        let p = a.start + i;
        let mut keys: Vec<&[f32]> = (p.saturating_sub(a.window - 1)..=p)
            .map(|pos| if pos >= a.start { a.kv.row(pos - a.start) } else { a.ring.row(pos % a.window) })
            .collect();
        if let Some((comp, sel)) = a.compressed {
            keys.extend(sel.row(i).iter().filter(|&&v| v >= 0.0).map(|&v| comp.row(v as usize)));
        }
        out.extend(attention::attend_row(q.row(i), &keys, &sink, hd, a.scale));
    }
    Ok(CpuTensor { rows: q.rows, cols: q.cols, data: out })
}

/// Router of each row, with `bias_vl` on image rows.
pub(super) fn moe_route(ex: &CpuExecutor, logits: &CpuTensor, biases: (&str, Option<&str>), image: &[bool], p: &RouteParams) -> Result<(CpuTensor, CpuTensor), ExecError> {
    let (name, vl_name) = biases;
    let b = ex.values(name)?;
    let vl = match vl_name {
        Some(n) if image.iter().any(|&i| i) => ex.values(n)?,
        _ => b.clone(),
    };
    let ok = b.len() == logits.cols && vl.len() == b.len() && p.k <= logits.cols && image.len() == logits.rows;
    check(ok, "moe_route", || format!("{name} has {} values for {} experts, k {}, {} image flags for {} rows", b.len(), logits.cols, p.k, image.len(), logits.rows))?;
    let routes: Vec<(Vec<u32>, Vec<f32>)> = (0..logits.rows).map(|i| moe::route_row(logits.row(i), if image[i] { &vl } else { &b }, p)).collect();
    let ids = routes.iter().flat_map(|(i, _)| i.iter().map(|&e| e as f32)).collect();
    let w = routes.iter().flat_map(|(_, w)| w.iter().copied()).collect();
    Ok((CpuTensor { rows: logits.rows, cols: p.k, data: ids }, CpuTensor { rows: logits.rows, cols: p.k, data: w }))
}

/// Routed experts: rows gathered per expert, `w2(swiglu(w1 x, w3 x) * weight)` (bf16 at each reference rounding point), accumulated per row by ascending expert id from +0.0 (`moe::join_row`'s order).
pub(super) fn routed_experts(ex: &CpuExecutor, x: &CpuTensor, ids: &CpuTensor, w: &CpuTensor, prefix: &str, limit: f32) -> Result<CpuTensor, ExecError> {
    check(ids.rows == x.rows && (w.rows, w.cols) == (ids.rows, ids.cols), "routed_experts", || format!("x rows {}, ids [{}, {}]", x.rows, ids.rows, ids.cols))?;
    let mut y = vec![0.0f32; x.rows * x.cols];
    let mut experts: Vec<usize> = ids.data.iter().map(|&e| e as usize).collect();
    experts.sort_unstable();
    experts.dedup();
    for e in experts {
        let picks: Vec<(usize, f32)> = (0..x.rows)
            .filter_map(|i| ids.row(i).iter().position(|&v| v as usize == e).map(|s| (i, w.row(i)[s])))
            .collect();
        let xg: Vec<f32> = picks.iter().flat_map(|&(i, _)| x.row(i).to_vec()).collect();
        let m = picks.len();
        let module = format!("{prefix}.{e}");
        let (g, f) = ex.linear_rows(&xg, m, x.cols, &format!("{module}.w1"))?;
        let (u, _) = ex.linear_rows(&xg, m, x.cols, &format!("{module}.w3"))?;
        let rw: Vec<f32> = picks.iter().map(|&(_, v)| v).collect();
        let (g, u) = (g.into_iter().map(round_bf16).collect::<Vec<_>>(), u.into_iter().map(round_bf16).collect::<Vec<_>>());
        let a = ops::swiglu(&g, &u, &rw, f, limit, true);
        let (o, n) = ex.linear_rows(&a, m, f, &format!("{module}.w2"))?;
        check(n == x.cols, "routed_experts", || format!("{module}.w2 gives {n} outputs for rows of {}", x.cols))?;
        for (r, &(i, _)) in picks.iter().enumerate() {
            for c in 0..n {
                y[i * n + c] += round_bf16(o[r * n + c]);
            }
        }
    }
    Ok(CpuTensor { rows: x.rows, cols: x.cols, data: y })
}
