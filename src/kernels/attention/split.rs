//! Sparse attention split over keys for decode shapes: the keys gathered once per row, scores a workgroup per (8 heads, 32 keys), weights a workgroup per head, values a workgroup per (8 heads, 32 dims); the same bits as the one-workgroup kernel.
use crate::gpu::{Arg, Buf, GpuError, Lang, PipelineKey, Recorder, Shader};
use crate::kernels::attention::{AttnDims, MAX_KEYS};

macro_rules! split_shader {
    ($stage:literal) => {
        Shader {
            lang: Lang::Wgsl,
            kernel: "sparse_attention",
            variant: "split",
            source: concat!(include_str!("../../../wgsl/attention/split_common.wgsl"), include_str!(concat!("../../../wgsl/attention/split_", $stage, ".wgsl"))),
        }
    };
}

/// The four stages: keys, scores, weights, values.
pub(crate) const SPLIT: [Shader; 4] = [split_shader!("keys"), split_shader!("scores"), split_shader!("weights"), split_shader!("values")];

/// Keys per scores workgroup, output dims per values workgroup and heads per both (the shaders' CHUNK, DIMS and HEADS).
const KEY_CHUNK: u32 = 32;
const VALUE_DIMS: u32 = 32;
const HEAD_GROUP: u32 = 8;

/// Key slots per query row: the window plus the selection width (or the block).
pub fn key_slots(d: &AttnDims) -> usize {
    d.window + d.topk.max(d.block)
}

/// Gathered keys a chunk of rows may hold, in bytes: prefill runs its rows in chunks of this much scratch.
const CHUNK_KEY_BYTES: u64 = 64 << 20;

/// Rows per dispatch chunk: all of a call's rows where their gathered keys fit `CHUNK_KEY_BYTES`, else as many as fit (at least one).
pub fn chunk_rows(d: &AttnDims) -> usize {
    (CHUNK_KEY_BYTES / scratch_bytes(d, 1)[0].max(1)).clamp(1, 65535).min(d.rows.max(1) as u64) as usize
}

/// The scratch the split path needs for chunks of `rows` rows, in bytes: gathered keys [rows, slots, dim], per row its key count then its heads' denominators [rows, 1 + heads], scores [rows, heads, slots].
pub fn scratch_bytes(d: &AttnDims, rows: usize) -> [u64; 3] {
    let (rows, slots) = (rows as u64, key_slots(d) as u64);
    [4 * rows * slots * d.dim as u64, 4 * rows * (1 + d.heads as u64), 4 * rows * d.heads as u64 * slots]
}

/// Scratch buffers of at least `scratch_bytes(d, rows)`, written before they are read; the call runs in chunks of `rows` rows.
pub struct SplitScratch<'a> {
    pub keys: &'a Buf,
    pub counts: &'a Buf,
    pub scores: &'a Buf,
    pub rows: usize,
}

/// Records sparse attention split over keys: the operands of `record_sparse_attention`, plus scratch.
#[allow(clippy::too_many_arguments)]
pub fn record_split(rec: &mut Recorder, q: &Buf, kv: &Buf, ring: &Buf, comp: &Buf, sel: &Buf, sink: &Buf, o: &Buf, d: &AttnDims, scratch: &SplitScratch<'_>, control: u32) -> Result<(), GpuError> {
    let need = scratch_bytes(d, scratch.rows);
    let have = [scratch.keys.bytes, scratch.counts.bytes, scratch.scores.bytes];
    let ok = d.window > 0 && key_slots(d) <= MAX_KEYS && (d.block == 0 || d.topk == 0) && d.dim > 0 && d.dim <= 8192 && d.heads > 0 && d.heads <= 65535 && d.start + d.rows < (1 << 30);
    if !ok || !(1..=65535).contains(&scratch.rows) || need.iter().zip(have).any(|(&n, h)| h < n) {
        let message = format!("{d:?}: needs 0 < window, window + topk (or block) <= {MAX_KEYS}, no selection with a block, 0 < dim <= 8192, 0 < heads <= 65535, chunks of 1 to 65535 rows (have {}), scratch of {need:?} bytes (have {have:?})", scratch.rows);
        return Err(GpuError::Shader { kernel: "sparse_attention/split".into(), message });
    }
    let keys = |i: usize| PipelineKey::new(SPLIT[i], &[("CONTROL", f64::from(control))]);
    let slots = key_slots(d) as u32;
    for row0 in (0..d.rows).step_by(scratch.rows) {
        let n = (d.rows - row0).min(scratch.rows) as u32;
        let params = [row0 as u32, d.rows as u32, d.heads as u32, d.dim as u32, d.start as u32, d.window as u32, d.topk as u32, d.scale.to_bits(), d.block as u32];
        let gather = [Arg::Whole(kv), Arg::Whole(ring), Arg::Whole(comp), Arg::Whole(sel), Arg::Whole(scratch.keys), Arg::Whole(scratch.counts)];
        rec.dispatch(&keys(0), &params, &gather, [slots.div_ceil(32), n, 1])?;
        let score = [Arg::Whole(q), Arg::Whole(scratch.keys), Arg::Whole(scratch.counts), Arg::Whole(scratch.scores), Arg::Whole(q), Arg::Whole(scratch.keys)];
        let groups = (d.heads as u32).div_ceil(HEAD_GROUP);
        rec.dispatch(&keys(1), &params, &score, [groups, slots.div_ceil(KEY_CHUNK), n])?;
        let weigh = [Arg::Whole(scratch.scores), Arg::Whole(scratch.counts), Arg::Whole(sink)];
        rec.dispatch(&keys(2), &params, &weigh, [d.heads as u32, n, 1])?;
        let value = [Arg::Whole(scratch.keys), Arg::Whole(scratch.counts), Arg::Whole(scratch.scores), Arg::Whole(o)];
        rec.dispatch(&keys(3), &params, &value, [groups, (d.dim as u32).div_ceil(VALUE_DIMS), n])?;
    }
    Ok(())
}
