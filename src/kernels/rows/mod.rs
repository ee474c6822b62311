//! Row gathers around the routed experts and the embedding: typed dispatchers and their CPU oracles.
pub mod contract;
mod copy_contract;

use crate::gpu::{Arg, Buf, GpuError, PipelineKey, Recorder, Shader};
use crate::kernels::dispatch::{grid64, key};
use crate::numerics::bf16_to_f32;

pub(crate) const EMBED: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "embed", variant: "ref", source: include_str!("../../../wgsl/rows/embed.wgsl") };
pub(crate) const GATHER_ROWS: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "gather_rows", variant: "ref", source: include_str!("../../../wgsl/rows/gather_rows.wgsl") };

/// Records the embedding gather: table [v, d] bf16 (row-major little-endian, as in the checkpoint), ids [m] u32 (< v) -> y [m, d] f32.
#[allow(clippy::too_many_arguments)]
pub fn record_embed(rec: &mut Recorder, table: &Buf, ids: &Buf, y: &Buf, m: usize, d: usize, v: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * d);
    rec.dispatch(&key(EMBED, control, &[]), &[m as u32, d as u32, v as u32, g[0]], &[Arg::Whole(table), Arg::Whole(ids), Arg::Whole(y)], g)
}

/// Embedding rows on the CPU: the bf16 row of each id widened to f32 (the CPU executor's embed).
pub fn embed_rows(table: &[u8], d: usize, ids: &[u32]) -> Vec<f32> {
    ids.iter()
        .flat_map(|&id| table[id as usize * d * 2..(id as usize + 1) * d * 2].chunks_exact(2).map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
        .collect()
}

/// Records a row gather: src [r, c] f32, idx [p] u32 (< r) -> dst [p, c] f32 with dst[i] = src[idx[i]] (for the routed experts: x rows by packed row, and route weights viewed as [m*k, 1] by i*k+j).
#[allow(clippy::too_many_arguments)]
pub fn record_gather_rows(rec: &mut Recorder, src: &Buf, idx: &Buf, dst: &Buf, p: usize, c: usize, r: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(p * c);
    rec.dispatch(&key(GATHER_ROWS, control, &[]), &[p as u32, c as u32, r as u32, g[0]], &[Arg::Whole(src), Arg::Whole(idx), Arg::Whole(dst)], g)
}

/// Row gather on the CPU.
pub fn gather_rows(src: &[f32], c: usize, idx: &[u32]) -> Vec<f32> {
    idx.iter().flat_map(|&i| src[i as usize * c..(i as usize + 1) * c].iter().copied()).collect()
}

/// The row copy kernel (a thread per destination word).
pub(crate) const COPY_ROWS: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "copy_rows", variant: "ref", source: include_str!("../../../wgsl/rows/copy_rows.wgsl") };

/// Records an exact row copy of 32-bit words: src row `src_row0 + i` ([_, cols]) to dst row `dst_row0 + i`, or to ring slot `(dst_row0 + i) mod ring` when `ring > 0` (of rows beyond the ring only the last `ring` are written, as a sequential ring_write leaves them), each dst row [repeat*cols] holding `repeat` copies; slice_rows (src_row0 = start), hc_repeat (repeat = hc), append_rows (dst_row0 = cache rows), ring_write (dst_row0 = start, ring = window).
#[allow(clippy::too_many_arguments)]
pub fn record_copy_rows(rec: &mut Recorder, src: &Buf, dst: &Buf, rows: usize, cols: usize, src_row0: usize, dst_row0: usize, ring: usize, repeat: usize, control: u32) -> Result<(), GpuError> {
    let (mut rows, mut src_row0, mut dst_row0) = (rows, src_row0, dst_row0);
    if ring > 0 {
        let skip = rows.saturating_sub(ring);
        (rows, src_row0, dst_row0) = (rows - skip, src_row0 + skip, (dst_row0 + skip) % ring);
    }
    if rows == 0 || cols == 0 || repeat == 0 {
        return Ok(());
    }
    let n = rows * cols * repeat;
    let words = ((src_row0 + rows) * cols).max((dst_row0 + rows) * cols * repeat);
    if n >= 1 << 32 || words >= 1 << 32 {
        return Err(GpuError::Shader { kernel: "copy_rows/ref".into(), message: format!("{rows} rows of {cols} x {repeat} at {src_row0} -> {dst_row0} exceed 2^32 words") });
    }
    let g = grid64(n);
    let key = PipelineKey::new(COPY_ROWS, &[("CONTROL", f64::from(control))]);
    let params = [rows as u32, cols as u32, src_row0 as u32, dst_row0 as u32, ring as u32, repeat as u32, g[0]];
    rec.dispatch(&key, &params, &[Arg::Whole(src), Arg::Whole(dst)], g)
}

/// The row copy on the CPU, over words: dst after the copy.
#[allow(clippy::too_many_arguments)]
pub fn copy_rows(src: &[u32], dst: &[u32], rows: usize, cols: usize, src_row0: usize, dst_row0: usize, ring: usize, repeat: usize) -> Vec<u32> {
    let mut out = dst.to_vec();
    let width = cols * repeat;
    for i in 0..rows {
        let dr = if ring > 0 { (dst_row0 + i) % ring } else { dst_row0 + i };
        let s = &src[(src_row0 + i) * cols..(src_row0 + i + 1) * cols];
        for j in 0..repeat {
            out[dr * width + j * cols..dr * width + (j + 1) * cols].copy_from_slice(s);
        }
    }
    out
}

