//! The GPU executor's routed experts: every expert of a matrix stacked in a few buffers, the routed rows packed by expert, one grouped GEMM per matrix and part, then the join with the shared output.
use crate::exec::cpu::check;
use crate::exec::gpu::{GpuExecutor, GpuTensor, Weight};
use crate::exec::gpu::ops::{act_quant, cached, gemm_kernel, round_out, swiglu_weighted};
use crate::exec::gpu::rows::gather_rows;
use crate::exec::{ExecError, Out};
use crate::gpu::Buf;
use crate::kernels::gemm::{self, WeightFormat};
use crate::kernels::gemm::GEMV_MAX_ROWS;
use crate::kernels::gemm::grouped::{self as gemm_grouped, GroupEntry, GroupedArgs, TILE_ROWS};
use crate::kernels::moe;
use crate::kernels::moe::pack_routes;
use crate::weights::Dtype;
use std::sync::Arc;

/// Experts `e0..e1` of a stack in one buffer (and their scales).
pub(crate) struct StackPart {
    pub e0: usize,
    pub e1: usize,
    pub w: Buf,
    pub ws: Option<Buf>,
}

/// One matrix of every routed expert: `experts` weights `[n, k]` of one format, stacked by expert id into parts below the binding limit.
pub(crate) struct ExpertStack {
    pub fmt: WeightFormat,
    pub n: usize,
    pub k: usize,
    pub experts: usize,
    pub parts: Vec<StackPart>,
}

/// Format, n and k of the stored `module.weight`.
fn shape_of(ex: &GpuExecutor, module: &str) -> Result<(WeightFormat, usize, usize), ExecError> {
    let name = format!("{module}.weight");
    let w = ex.ckpt.get(&name).ok_or_else(|| ExecError::MissingWeight(name.clone()))?;
    let [n, stored_k] = *w.shape else { return Err(ExecError::BadWeight { name, problem: format!("shape {:?} is not 2-D", w.shape) }) };
    match w.dtype {
        Dtype::BF16 => Ok((WeightFormat::Bf16, n, stored_k)),
        Dtype::F8E4M3 => Ok((WeightFormat::E4m3, n, stored_k)),
        Dtype::I8 => Ok((WeightFormat::E2m1, n, stored_k * 2)),
        d => Err(ExecError::BadWeight { name, problem: format!("dtype {d} is not a GEMM weight") }),
    }
}

/// Stacks `{prefix}.{e}.{which}` for every expert the checkpoint holds, each validated like a dense GEMM weight and shaped like expert 0.
fn stack(ex: &GpuExecutor, prefix: &str, which: &str) -> Result<ExpertStack, ExecError> {
    let module = |e: usize| format!("{prefix}.{e}.{which}");
    let (fmt, n, k) = shape_of(ex, &module(0))?;
    let experts = (0..).take_while(|&e| ex.ckpt.get(&format!("{}.weight", module(e))).is_some()).count();
    let (rb, sb) = (gemm::row_bytes(fmt, k), gemm::scale_bytes(fmt, n, k));
    let bad = |e: usize, problem: String| ExecError::BadWeight { name: format!("{}.weight", module(e)), problem };
    if !k.is_multiple_of(32) || (fmt == WeightFormat::E4m3 && !n.is_multiple_of(32)) {
        return Err(bad(0, format!("[{n}, {k}] does not stack: K and (for fp8) N must be multiples of 32")));
    }
    let per = (ex.limit as usize / (n * rb).max(1)).max(1);
    if n * rb > ex.limit as usize {
        return Err(bad(0, format!("one expert of {} bytes exceeds one binding", n * rb)));
    }
    let mut parts = Vec::new();
    for e0 in (0..experts).step_by(per) {
        let e1 = (e0 + per).min(experts);
        let w = ex.gpu.alloc(((e1 - e0) * n * rb) as u64)?;
        let ws = if sb > 0 { Some(ex.gpu.alloc(((e1 - e0) * sb) as u64)?) } else { None };
        for e in e0..e1 {
            if shape_of(ex, &module(e))? != (fmt, n, k) {
                return Err(bad(e, format!("differs from expert 0's {fmt:?} [{n}, {k}]")));
            }
            let wt = ex.ckpt.get(&format!("{}.weight", module(e))).ok_or_else(|| ExecError::MissingWeight(format!("{}.weight", module(e))))?;
            check(wt.bytes.len() == n * rb, "routed_experts", || format!("{}.weight has {} bytes, expected {}", module(e), wt.bytes.len(), n * rb))?;
            ex.gpu.write_at(&w, ((e - e0) * n * rb) as u64, wt.bytes);
            if let Some(ws) = &ws {
                let name = format!("{}.scale", module(e));
                let st = ex.ckpt.get(&name).ok_or_else(|| ExecError::MissingWeight(name.clone()))?;
                if st.dtype != Dtype::F8E8M0 || st.bytes.len() != sb {
                    return Err(ExecError::BadWeight { name, problem: format!("dtype {} and {} bytes, expected F8_E8M0 and {sb}", st.dtype, st.bytes.len()) });
                }
                ex.gpu.write_at(ws, ((e - e0) * sb) as u64, st.bytes);
            }
        }
        parts.push(StackPart { e0, e1, w, ws });
    }
    Ok(ExpertStack { fmt, n, k, experts, parts })
}

/// The stack of `{prefix}.*.{which}`, cached.
fn expert_stack(ex: &mut GpuExecutor, prefix: &str, which: &str) -> Result<Arc<Weight>, ExecError> {
    cached(ex, format!("{prefix}#stack.{which}"), |ex| Ok(Weight::Experts(stack(ex, prefix, which)?)))
}

/// Uploads the three stacks of `prefix`'s experts (so no timed call pays for it); returns the expert count.
pub(crate) fn preload(ex: &mut GpuExecutor, prefix: &str) -> Result<usize, ExecError> {
    let mut experts = 0;
    for which in ["w1", "w3", "w2"] {
        if let Weight::Experts(s) = &*expert_stack(ex, prefix, which)? {
            experts = s.experts;
        }
    }
    Ok(experts)
}

/// `x W_e^T` of packed rows grouped by expert (`(expert, first row, rows)` ascending), one grouped GEMM per stack part.
fn grouped_linear(ex: &mut GpuExecutor, x: &GpuTensor, st: &ExpertStack, groups: &[(u32, usize, usize)], out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("routed_experts", gemm_kernel(st.fmt))?;
    check(x.cols == st.k, "routed_experts", || format!("the stack takes {} inputs, the rows have {}", st.k, x.cols))?;
    let y = ex.out(x.rows, st.n)?;
    let quant = if st.fmt == WeightFormat::Bf16 { None } else { Some(act_quant(ex, x)?) };
    let tiled = groups.iter().any(|g| g.2 > GEMV_MAX_ROWS);
    let tile = if tiled { TILE_ROWS } else { usize::MAX };
    for p in &st.parts {
        let entries: Vec<GroupEntry> = groups
            .iter()
            .filter(|g| (p.e0..p.e1).contains(&(g.0 as usize)))
            .flat_map(|&(e, first, rows)| (0..rows).step_by(tile).map(move |r| (e, first + r, (rows - r).min(tile))))
            .map(|(e, first, rows)| GroupEntry { w_row: (e as usize - p.e0) * st.n, first, rows, col: 0, cols: st.n })
            .collect();
        if entries.is_empty() {
            continue;
        }
        let table = ex.upload_pod(&gemm_grouped::table_words(&entries))?;
        let (xv, xs) = match &quant {
            Some((q, s)) => (q, Some(s)),
            None => (&x.buf, None),
        };
        let a = GroupedArgs { fmt: st.fmt, m: x.rows, k: st.k, x: xv, xs, w: &p.w, ws: p.ws.as_ref(), out: &y.buf, ldo: st.n, entries: &entries, table: &table };
        gemm_grouped::record_grouped(&mut ex.rec, &a, tiled, 0)?;
    }
    round_out(ex, y, out, 0)
}

/// Routed experts joined with the shared output: expert ids read back (the one value the host needs) and packed by expert; gathered rows and route weights; `w2(swiglu(w1 x, w3 x) * weight)` by grouped GEMMs with bf16 at each reference rounding point; moe_join adds each row's outputs by ascending expert id, then `shared`, then rounds to bf16.
pub(super) fn routed_experts(ex: &mut GpuExecutor, x: &GpuTensor, ids: &GpuTensor, w: &GpuTensor, shared: &GpuTensor, prefix: &str, limit: f32) -> Result<GpuTensor, ExecError> {
    let (s, k) = (ids.rows, ids.cols);
    check(s == x.rows && (w.rows, w.cols) == (s, k) && (shared.rows, shared.cols) == (s, x.cols), "routed_experts", || {
        format!("x [{}, {}], ids [{s}, {k}], weights [{}, {}], shared [{}, {}]", x.rows, x.cols, w.rows, w.cols, shared.rows, shared.cols)
    })?;
    ex.need("routed_experts", "moe_join")?;
    let (w1, w3, w2) = (expert_stack(ex, prefix, "w1")?, expert_stack(ex, prefix, "w3")?, expert_stack(ex, prefix, "w2")?);
    let (Weight::Experts(w1), Weight::Experts(w3), Weight::Experts(w2)) = (&*w1, &*w3, &*w2) else {
        return Err(ExecError::BadWeight { name: prefix.into(), problem: "cached as another kind".into() });
    };
    let host_ids = ex.values_of(ids)?;
    if let Some(bad) = host_ids.iter().find(|&&e| !(e >= 0.0 && e.fract() == 0.0 && (e as usize) < w1.experts)) {
        return Err(ExecError::Shape { op: "routed_experts", problem: format!("expert id {bad} outside 0..{}", w1.experts) });
    }
    let pack = pack_routes(&host_ids, k);
    let xg = gather_rows(ex, x, &pack.rows)?;
    let w_flat = GpuTensor { buf: w.buf.clone(), rows: s * k, cols: 1 };
    let rw = gather_rows(ex, &w_flat, &pack.picks)?;
    let g = grouped_linear(ex, &xg, w1, &pack.experts, Out::Bf16)?;
    let u = grouped_linear(ex, &xg, w3, &pack.experts, Out::Bf16)?;
    let a = swiglu_weighted(ex, &g, &u, &rw.buf, limit)?;
    let o = grouped_linear(ex, &a, w2, &pack.experts, Out::Bf16)?;
    check(o.cols == x.cols, "routed_experts", || format!("{prefix}.*.w2 gives {} outputs for rows of {}", o.cols, x.cols))?;
    let slot = ex.upload_pod(&pack.slot_map)?;
    let y = ex.out(s, x.cols)?;
    moe::record_moe_join(&mut ex.rec, &o.buf, &slot, &ids.buf, &shared.buf, &y.buf, s, x.cols, k, 0)?;
    Ok(y)
}
