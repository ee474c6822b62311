//! The GPU executor's stacked matrices: every matrix of a stack in a few buffers, one grouped GEMM per two parts over a table of packed rows, and the join of packed outputs.
use crate::exec::gpu::ops::{act_quant, cached, gemm_kernel};
use crate::exec::gpu::{GpuExecutor, GpuTensor, Weight};
use crate::exec::{shapes, ExecError, Out, Stack};
use crate::gpu::{Arg, Buf, Lang};
use crate::kernels::gemm::grouped::{self as gemm_grouped, GroupEntry, GroupedArgs, GroupedHi, GroupedTile, SMALL_ROWS, TILE_ROWS};
use crate::kernels::gemm::{self, WeightFormat, GEMV_MAX_ROWS};
use crate::kernels::{moe, ops};
use std::sync::Arc;

/// Experts `e0..e1` of a stack in one buffer, their scales at a byte range of the stack's scale buffer.
pub(crate) struct StackPart {
    pub e0: usize,
    pub e1: usize,
    pub w: Buf,
    pub ws: (u64, u64),
}

/// One stack's matrices: `experts` weights `[n, k]` of one format, stacked by index into parts below the binding limit, every scale in one buffer (each part's from an offset the device binds at).
pub(crate) struct ExpertStack {
    pub fmt: WeightFormat,
    pub n: usize,
    pub k: usize,
    pub experts: usize,
    pub parts: Vec<StackPart>,
    pub ws: Option<Buf>,
}

/// Stacks the matrices `modules` names, each checked like a dense GEMM weight and shaped like the first.
fn upload_stack(ex: &GpuExecutor, modules: &[String]) -> Result<ExpertStack, ExecError> {
    let (fmt, n, k) = shapes::gemm_shape(ex.ckpt, &modules[0])?;
    let experts = modules.len();
    let (rb, sb) = (gemm::row_bytes(fmt, k), gemm::scale_bytes(fmt, n, k));
    let bad = |e: usize, problem: String| ExecError::BadWeight { name: format!("{}.weight", modules[e]), problem };
    if !k.is_multiple_of(32) || (fmt == WeightFormat::E4m3 && !n.is_multiple_of(32)) {
        return Err(bad(0, format!("[{n}, {k}] does not stack: K and (for fp8) N must be multiples of 32")));
    }
    if n * rb > ex.limit as usize {
        return Err(bad(0, format!("one matrix of {} bytes exceeds one binding", n * rb)));
    }
    let per = (ex.limit as usize / (n * rb).max(1)).max(1);
    let align = u64::from(ex.gpu.limits.min_storage_buffer_offset_alignment).max(4);
    let spans: Vec<(usize, usize, u64)> = (0..experts).step_by(per).scan(0u64, |off, e0| {
        let e1 = (e0 + per).min(experts);
        let at = *off;
        *off = (at + ((e1 - e0) * sb) as u64).next_multiple_of(align);
        Some((e0, e1, at))
    }).collect();
    let scale_total = spans.last().map_or(0, |&(e0, e1, at)| at + ((e1 - e0) * sb) as u64);
    if scale_total > ex.limit {
        return Err(bad(0, format!("the stack's scales, {scale_total} bytes, exceed one binding")));
    }
    let ws = if sb > 0 { Some(ex.gpu.alloc(scale_total)?) } else { None };
    let mut parts = Vec::new();
    for (e0, e1, at) in spans {
        let w = ex.gpu.alloc(((e1 - e0) * n * rb) as u64)?;
        for e in e0..e1 {
            let spec = shapes::gemm_weight(ex.ckpt, &modules[e])?;
            if (spec.fmt, spec.n, spec.k) != (fmt, n, k) {
                return Err(bad(e, format!("differs from matrix 0's {fmt:?} [{n}, {k}]")));
            }
            ex.gpu.write_at(&w, ((e - e0) * n * rb) as u64, spec.w);
            if let (Some(ws), Some(sbytes)) = (&ws, spec.s) {
                ex.gpu.write_at(ws, at + ((e - e0) * sb) as u64, sbytes);
            }
        }
        parts.push(StackPart { e0, e1, w, ws: (at, (((e1 - e0) * sb) as u64).next_multiple_of(4)) });
    }
    Ok(ExpertStack { fmt, n, k, experts, parts, ws })
}

/// The experts a span of parts holds, from its first part's first.
fn span_experts((p, q): (&StackPart, Option<&StackPart>)) -> std::ops::Range<usize> {
    p.e0..q.map_or(p.e1, |q| q.e1)
}

/// The parts one grouped GEMM covers: two at a time in WGSL (the second bound beside the first), one at a time in MSL.
fn spans(st: &ExpertStack, lang: Lang) -> Vec<(&StackPart, Option<&StackPart>)> {
    match lang {
        Lang::Wgsl => st.parts.chunks(2).map(|c| (&c[0], c.get(1))).collect(),
        _ => st.parts.iter().map(|p| (p, None)).collect(),
    }
}

/// The uploaded stack, cached (its matrices are looked up only on the first call).
fn expert_stack(ex: &mut GpuExecutor, stack: &Stack<'_>) -> Result<Arc<Weight>, ExecError> {
    cached(ex, format!("{}#stack.{}", stack.prefix, stack.matrix), |ex| {
        let modules: Vec<String> = (0..shapes::stack_len(ex.ckpt, stack)).map(|e| stack.module(e)).collect();
        if modules.is_empty() {
            return Err(ExecError::BadWeight { name: format!("{}.weight", stack.module(0)), problem: "missing: the stack has no matrices".into() });
        }
        Ok(Weight::Experts(upload_stack(ex, &modules)?))
    })
}

/// Uploads `stack` (so no timed call pays for it); returns its matrix count.
pub(crate) fn preload(ex: &mut GpuExecutor, stack: &Stack<'_>) -> Result<usize, ExecError> {
    match &*expert_stack(ex, stack)? {
        Weight::Experts(s) => Ok(s.experts),
        _ => Err(ExecError::BadWeight { name: stack.prefix.into(), problem: "cached as another kind".into() }),
    }
}

/// `x W_e^T` of packed rows grouped by `table`, one grouped GEMM per stack part: `(e, first, rows)` entries from the table's host copy (read back when it has none), or an expert per row (`[rows, 1]`) read by the kernels on the device.
pub(super) fn grouped_linear(ex: &mut GpuExecutor, x: &GpuTensor, stack: &Stack<'_>, table: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
    let w = expert_stack(ex, stack)?;
    let Weight::Experts(st) = &*w else { return Err(ExecError::BadWeight { name: stack.prefix.into(), problem: "cached as another kind".into() }) };
    ex.need("grouped_linear", gemm_kernel(st.fmt))?;
    if table.cols == 1 && table.index.is_none() {
        return picked_linear(ex, x, st, table, out);
    }
    let words: Vec<u32> = match &table.index {
        Some(t) if table.cols == 1 => shapes::pick_entries(&t.iter().map(|&v| v as f32).collect::<Vec<f32>>())?,
        Some(t) => t.to_vec(),
        None => ex.values_of(table)?.iter().map(|&v| v as u32).collect(),
    };
    let entries = shapes::grouped_linear((x.rows, x.cols), st.k, &words)?;
    shapes::stack_entries(&entries, st.experts)?;
    let y = ex.out(x.rows, st.n)?;
    let quant = act_values(ex, x, st.fmt)?;
    let tiled = entries.iter().any(|e| e.rows > GEMV_MAX_ROWS);
    let lang = gemm_grouped::grouped_lang(ex.gpu.native_msl(), st.fmt, st.k);
    for span in spans(st, lang) {
        let held = span_experts(span);
        let mine = entries.iter().filter(|e| held.contains(&e.expert)).map(|e| (e.expert - held.start, e.first, e.rows));
        let mut kinds = vec![(GroupedTile::Blocks, Vec::new()), (GroupedTile::Tiled, Vec::new()), (GroupedTile::Small, Vec::new())];
        for (expert, first, rows) in mine {
            for (tile, r0, n) in cover(rows, tiled, lang) {
                kinds[tile as usize].1.push(GroupEntry::rows(expert * st.n, first + r0, n, 0, st.n));
            }
        }
        for (tile, tiles) in kinds.into_iter().filter(|(_, t)| !t.is_empty()) {
            let table = ex.upload_pod(&gemm_grouped::table_words(&tiles))?;
            record_span(ex, st, span, x.rows, &quant, &y, out == Out::Bf16, &tiles, &table, &table, tile)?;
        }
    }
    Ok(y)
}

/// How one expert's `rows` are covered, as (tile, first row, rows): whole when no entry needs tiles, else 64-row tiles while more than 32 rows remain and 16-row tiles for the rest (MSL: 64-row tiles throughout).
pub(super) fn cover(rows: usize, tiled: bool, lang: Lang) -> Vec<(GroupedTile, usize, usize)> {
    if !tiled {
        return vec![(GroupedTile::Blocks, 0, rows)];
    }
    let mut out = Vec::new();
    let mut r0 = 0;
    while rows - r0 > SMALL_ROWS * 2 || (lang == Lang::Msl && r0 < rows) {
        let n = (rows - r0).min(TILE_ROWS);
        out.push((GroupedTile::Tiled, r0, n));
        r0 += n;
    }
    while r0 < rows {
        let n = (rows - r0).min(SMALL_ROWS);
        out.push((GroupedTile::Small, r0, n));
        r0 += n;
    }
    out
}

/// Output row g through the expert `picks` row g names, from x row g / r (r picks a row), the picks staying on the device: a pick entry per output row in each part's grouped GEMM, writing only the rows whose expert the part holds; the output `[P, n]` is written as `[x rows, r n]`, pick g % r at columns (g % r) n.
fn picked_linear(ex: &mut GpuExecutor, x: &GpuTensor, st: &ExpertStack, picks: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
    shapes::grouped_picks((x.rows, x.cols), st.k, (picks.rows, picks.cols))?;
    let r = picks.rows / x.rows;
    let y = ex.out(x.rows, r * st.n)?;
    let quant = act_values(ex, x, st.fmt)?;
    let lang = gemm_grouped::grouped_lang(ex.gpu.native_msl(), st.fmt, st.k);
    for span in spans(st, lang) {
        let held = span_experts(span);
        let entries: Vec<GroupEntry> = (0..picks.rows).map(|g| GroupEntry::pick(held.start, held.len(), g / r, (g % r) * st.n, st.n)).collect();
        let table = ex.const_words(&gemm_grouped::table_words(&entries))?;
        record_span(ex, st, span, x.rows, &quant, &y, out == Out::Bf16, &entries, &table, &picks.buf, GroupedTile::Blocks)?;
    }
    Ok(GpuTensor::new(y.buf, picks.rows, st.n))
}

/// `swiglu(x W_gate^T, x W_up^T)` for decode rows: one grouped GEMM over the two matrices stacked (the up projection's outputs a plane of rows below the gate's) and one swiglu binding both planes; None where the pair is not one stack part or a plane would not start where the device binds (the caller then runs them apart).
pub(super) fn gated_linear(ex: &mut GpuExecutor, x: &GpuTensor, gate: &str, up: &str, limit: f32) -> Result<Option<GpuTensor>, ExecError> {
    if x.rows > GEMV_MAX_ROWS {
        return Ok(None);
    }
    let modules = [gate.to_string(), up.to_string()];
    let w = cached(ex, format!("{gate}+{up}#pair"), |ex| Ok(Weight::Experts(upload_stack(ex, &modules)?)))?;
    let Weight::Experts(st) = &*w else { return Err(ExecError::BadWeight { name: gate.into(), problem: "cached as another kind".into() }) };
    let (m, n) = (x.rows, st.n);
    let plane = (m * n * 4) as u64;
    if st.parts.len() != 1 || st.k != x.cols || !plane.is_multiple_of(u64::from(ex.gpu.limits.min_storage_buffer_offset_alignment)) {
        return Ok(None);
    }
    ex.need("gated_linear", gemm_kernel(st.fmt))?;
    ex.need("gated_linear", "swiglu")?;
    let quant = act_values(ex, x, st.fmt)?;
    let y = ex.out(2 * m, n)?;
    let entries = [GroupEntry::rows(0, 0, m, 0, n), GroupEntry::rows(n, 0, m, m * n, n)];
    let table = ex.const_words(&gemm_grouped::table_words(&entries))?;
    record_span(ex, st, (&st.parts[0], None), m, &quant, &y, true, &entries, &table, &table, GroupedTile::Blocks)?;
    let rw = ex.ones(m)?;
    let a = ex.out(m, n)?;
    ops::record_swiglu_args(&mut ex.rec, [Arg::Range(&y.buf, 0, plane), Arg::Range(&y.buf, plane, plane)], &rw, &a.buf, m, n, limit, true, 0)?;
    Ok(Some(a))
}

/// The activation a stack's kernels read: act_quant's (values, scales) for the scaled formats, `x` itself for bf16.
fn act_values(ex: &mut GpuExecutor, x: &GpuTensor, fmt: WeightFormat) -> Result<(Buf, Option<Buf>), ExecError> {
    Ok(match fmt {
        WeightFormat::Bf16 => (x.buf.clone(), None),
        _ => {
            let (q, s) = act_quant(ex, x)?;
            (q, Some(s))
        }
    })
}

/// Records one grouped GEMM over a span of one or two stack parts (rows of the second after the first's) over `entries` (on the device as `table`) into `y` (rows `y.cols` apart), rounded to bf16 when `round`, pick entries reading their experts from `picks`.
#[allow(clippy::too_many_arguments)]
fn record_span(ex: &mut GpuExecutor, st: &ExpertStack, (p, q): (&StackPart, Option<&StackPart>), m: usize, x: &(Buf, Option<Buf>), y: &GpuTensor, round: bool, entries: &[GroupEntry], table: &Buf, picks: &Buf, tile: GroupedTile) -> Result<(), ExecError> {
    let scale_end = q.map_or(p.ws.0 + p.ws.1, |q| q.ws.0 + q.ws.1);
    let ws = st.ws.as_ref().map(|s| Arg::Range(s, p.ws.0, scale_end - p.ws.0));
    let hi = q.map(|q| GroupedHi { w: &q.w, row: (q.e0 - p.e0) * st.n, scale_byte: (q.ws.0 - p.ws.0) as usize });
    let a = GroupedArgs { fmt: st.fmt, m, k: st.k, x: &x.0, xs: x.1.as_ref(), w: &p.w, ws, hi, out: &y.buf, ldo: y.cols, entries, table, picks, round };
    let lang = gemm_grouped::grouped_lang(ex.gpu.native_msl(), st.fmt, st.k);
    gemm_grouped::record_grouped(&mut ex.rec, &a, tile, lang, 0)?;
    Ok(())
}

/// moe_join: each row's packed outputs by ascending expert id, then `shared`, rounded to bf16.
pub(super) fn moe_join(ex: &mut GpuExecutor, routed: &GpuTensor, slots: &GpuTensor, ids: &GpuTensor, shared: &GpuTensor) -> Result<GpuTensor, ExecError> {
    ex.need("moe_join", "moe_join")?;
    shapes::moe_join((routed.rows, routed.cols), (slots.rows, slots.cols), (ids.rows, ids.cols), (shared.rows, shared.cols))?;
    let slot = match &slots.index {
        Some(_) => slots.buf.clone(),
        None => {
            let words: Vec<u32> = ex.values_of(slots)?.iter().map(|&v| v as u32).collect();
            ex.upload_pod(&words)?
        }
    };
    let y = ex.out(ids.rows, shared.cols)?;
    moe::record_moe_join(&mut ex.rec, &routed.buf, &slot, &ids.buf, &shared.buf, &y.buf, ids.rows, shared.cols, ids.cols, 0)?;
    Ok(y)
}
