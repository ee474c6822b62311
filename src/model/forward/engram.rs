//! The engram of one layer: table rows for the call's hash ids read on the host from the mapped checkpoint, the wkv GEMM, and the gate.
use super::{ForwardError, Model};
use crate::exec::{Executor, Out};
use crate::weights::Dtype;
use crate::numerics::{e4m3_to_f32, e8m0_to_f32};

/// Dequantized rows of `{prefix}.engram.embed` for `ids` (e4m3 times the row block's e8m0 scale; exact in bf16).
pub(super) fn table_rows(m: &Model, prefix: &str, ids: impl Iterator<Item = u32>) -> Result<Vec<f32>, ForwardError> {
    let (wn, sn) = (format!("{prefix}.engram.embed.weight"), format!("{prefix}.engram.embed.scale"));
    let bad = |what: String| ForwardError::Input(format!("engram table `{wn}`: {what}"));
    let w = m.ckpt.get(&wn).ok_or_else(|| bad("missing".into()))?;
    let s = m.ckpt.get(&sn).ok_or_else(|| bad("scale missing".into()))?;
    let [rows, width] = *w.shape else { return Err(bad(format!("shape {:?} is not 2-D", w.shape))) };
    let blocks = width.div_ceil(32);
    if w.dtype != Dtype::F8E4M3 || s.dtype != Dtype::F8E8M0 || s.bytes.len() != rows * blocks {
        return Err(bad(format!("dtypes {} / {} and {} scale bytes for {rows} rows", w.dtype, s.dtype, s.bytes.len())));
    }
    let mut out = Vec::new();
    for id in ids {
        let r = id as usize;
        if r >= rows {
            return Err(bad(format!("hash id {r} is outside its {rows} rows")));
        }
        let codes = &w.bytes[r * width..(r + 1) * width];
        let scales = &s.bytes[r * blocks..(r + 1) * blocks];
        out.extend(codes.iter().enumerate().map(|(c, &code)| e4m3_to_f32(code) * e8m0_to_f32(scales[c / 32])));
    }
    Ok(out)
}

/// Engram of layer `prefix` (position `li` in `engram_layer_ids`) on the streams `h` `[S, hc*D]`; `hash_ids` are the call's ids for every engram layer.
pub(super) fn engram<E: Executor>(ex: &mut E, m: &Model, prefix: &str, li: usize, hash_ids: &[u32], s: usize, h: &E::Tensor) -> Result<E::Tensor, ForwardError> {
    let cols = m.cfg.engram_hash_cols();
    let n_layers = m.cfg.engram_layer_ids.len();
    if hash_ids.len() != s * n_layers * cols {
        return Err(ForwardError::Input(format!("{} engram hash ids for {s} tokens", hash_ids.len())));
    }
    let ids = (0..s).flat_map(|i| hash_ids[(i * n_layers + li) * cols..(i * n_layers + li + 1) * cols].iter().copied());
    let rows = table_rows(m, prefix, ids)?;
    let e = ex.upload(s, cols * m.cfg.engram_head_dim, &rows)?;
    let kv = ex.linear(&e, &format!("{prefix}.engram.wkv"), Out::Bf16)?;
    let live = vec![true; s];
    Ok(ex.engram_gate(h, &kv, &format!("{prefix}.engram.q_weight"), &format!("{prefix}.engram.k_weight"), &m.engram_gate(), &live)?)
}
