//! The GPU executor's block-diagonal GEMM: every group of one weight in one grouped GEMM over the whole weight.
use crate::exec::gpu::experts::cover;
use crate::exec::gpu::ops::{gemm_kernel, gemm_key, gemm_weight};
use crate::exec::gpu::{GpuExecutor, GpuTensor, Weight};
use crate::exec::{block_linear_by_groups, shapes, ExecError, Executor};
use crate::gpu::{Arg, Buf};
use crate::kernels::gemm::grouped::{self as gemm_grouped, GroupEntry, GroupedArgs, GroupedTile};
use crate::kernels::gemm::{WeightFormat, GEMV_MAX_ROWS};

/// `block_linear` as one grouped GEMM of the whole weight: a one-row entry per (row, group) for decode rows; for more rows, x's rows gathered group by group, tiled entries per group, the outputs gathered back. Group by group where the weight is not one part of unpadded fp8 or bf16 rows.
pub(super) fn block_linear(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, groups: usize, rank: usize) -> Result<GpuTensor, ExecError> {
    let (s, cols) = (x.rows, x.cols);
    if groups == 0 || !cols.is_multiple_of(groups) {
        return Err(ExecError::Shape { op: "block_linear", problem: format!("{cols} inputs do not split into {groups} groups") });
    }
    let dg = cols / groups;
    if !ex.weights.contains_key(&gemm_key(module, None)) {
        let spec = shapes::gemm_weight(ex.ckpt, module)?;
        for g in 0..groups {
            shapes::linear_block(module, &spec, (g * rank, (g + 1) * rank), false)?;
        }
    }
    let w = gemm_weight(ex, module, None)?;
    let Weight::Gemm(w) = &*w else { return Err(ExecError::BadWeight { name: module.into(), problem: "not a GEMM weight".into() }) };
    if w.fmt == WeightFormat::E2m1 || w.kp != w.k || w.parts.len() != 1 || w.n != groups * rank || w.k != dg || s == 0 {
        return block_linear_by_groups(ex, x, module, groups, rank);
    }
    ex.need("linear", gemm_kernel(w.fmt))?;
    let (part, fmt, m) = (&w.parts[0], w.fmt, s * groups);
    let xs = if fmt == WeightFormat::Bf16 { None } else { Some(ex.ones(m * (dg / 32))?) };
    let lang = gemm_grouped::grouped_lang(ex.gpu.native_msl(), fmt, dg);
    let record = |ex: &mut GpuExecutor, xb: &Buf, out: &Buf, entries: &[GroupEntry], tile: GroupedTile| -> Result<(), ExecError> {
        let table = ex.const_words(&gemm_grouped::table_words(entries))?;
        let a = GroupedArgs { fmt, m, k: dg, x: xb, xs: xs.as_ref(), w: &part.w, ws: part.s.as_ref().map(Arg::Whole), hi: None, out, ldo: rank, entries, table: &table, picks: &table, round: true };
        Ok(gemm_grouped::record_grouped(&mut ex.rec, &a, tile, lang, 0)?)
    };
    // Output row r of `[S * groups, rank]` is row r / groups's group r % groups: y `[S, groups * rank]` itself.
    let y = ex.out(s, groups * rank)?;
    if s <= GEMV_MAX_ROWS {
        let entries: Vec<GroupEntry> = (0..m).map(|r| GroupEntry::rows((r % groups) * rank, r, 1, 0, rank)).collect();
        record(ex, &x.buf, &y.buf, &entries, GroupedTile::Blocks)?;
        return Ok(y);
    }
    let flat = ex.reshape(x, m, dg)?;
    let to_groups: Vec<u32> = (0..m).map(|r| ((r % s) * groups + r / s) as u32).collect();
    let idx = ex.upload_index(&to_groups)?;
    let xg = ex.gather_rows(&flat, &idx)?;
    let yg = ex.out(m, rank)?;
    let mut tiles: Vec<(GroupedTile, GroupEntry)> = Vec::new();
    for g in 0..groups {
        tiles.extend(cover(s, true, lang).into_iter().map(|(tile, r0, n)| (tile, GroupEntry::rows(g * rank, g * s + r0, n, 0, rank))));
    }
    for tile in [GroupedTile::Tiled, GroupedTile::Small] {
        let entries: Vec<GroupEntry> = tiles.iter().filter(|(t, _)| *t == tile).map(|(_, e)| *e).collect();
        if !entries.is_empty() {
            record(ex, &xg.buf, &yg.buf, &entries, tile)?;
        }
    }
    let back: Vec<u32> = (0..m).map(|r| ((r % groups) * s + r / groups) as u32).collect();
    let idx = ex.upload_index(&back)?;
    let yb = ex.gather_rows(&yg, &idx)?;
    ex.reshape(&yb, s, groups * rank)
}
