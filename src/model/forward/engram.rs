//! The engram of one layer: table rows for the call's hash ids read on the host from the mapped checkpoint, the wkv GEMM, and the gate.
use super::{ForwardError, Model};
use crate::exec::{Executor, Out};
use crate::weights::canonical::FP8_ROWS_FLOOR;
use crate::weights::Dtype;
use crate::numerics::{e4m3_to_f32, e8m0_to_f32};

/// Dequantized rows of `{prefix}.engram.embed` for `ids` (e4m3 times the row block's e8m0 scale; exact in bf16), each row checked and made canonical as it is read (tables are too large to scan whole at load).
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
        if let Some(c) = codes.iter().position(|&x| x & 0x7f == 0x7f) {
            return Err(bad(format!("row {r} holds a non-finite code at column {c}")));
        }
        if let Some(b) = scales.iter().position(|&x| x == 0xff) {
            return Err(bad(format!("row {r} has a NaN scale in block {b}")));
        }
        for (b, chunk) in codes.chunks(32).enumerate() {
            let zeroed = scales[b] < FP8_ROWS_FLOOR && chunk.iter().any(|&x| x & 0x7f != 0);
            out.extend(chunk.iter().map(|&code| if zeroed { 0.0 } else { e4m3_to_f32(code) * e8m0_to_f32(scales[b]) }));
        }
    }
    Ok(out)
}

/// Engram of layer `prefix` (position `li` in `engram_layer_ids`) on the streams `h` `[S, hc*D]`; `hash_ids` are the call's ids for every engram layer; image rows get no engram (gate 0).
pub(super) fn engram<E: Executor>(ex: &mut E, m: &Model, prefix: &str, li: usize, hash_ids: &[u32], image: &[bool], h: &E::Tensor) -> Result<E::Tensor, ForwardError> {
    let s = image.len();
    let cols = m.cfg.engram_hash_cols();
    let n_layers = m.cfg.engram_layer_ids.len();
    if hash_ids.len() != s * n_layers * cols {
        return Err(ForwardError::Input(format!("{} engram hash ids for {s} tokens", hash_ids.len())));
    }
    let ids = (0..s).flat_map(|i| hash_ids[(i * n_layers + li) * cols..(i * n_layers + li + 1) * cols].iter().copied());
    let rows = table_rows(m, prefix, ids)?;
    let e = ex.upload(s, cols * m.cfg.engram_head_dim, &rows)?;
    let kv = ex.linear(&e, &format!("{prefix}.engram.wkv"), Out::Bf16)?;
    let live: Vec<bool> = image.iter().map(|&i| !i).collect();
    Ok(ex.engram_gate(h, &kv, &format!("{prefix}.engram.q_weight"), &format!("{prefix}.engram.k_weight"), &m.engram_gate(), &live)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{load, make_tiny};
    use crate::text::TokenMap;
    use crate::weights::safetensors::{read_file, read_header, write_file};
    use crate::weights::{LoadMode, ValueCheck};

    #[test]
    fn rows_read_unscanned_equal_the_rows_of_an_eager_scan() {
        let dir = std::env::temp_dir().join(format!("lockstep-engram-rows-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        make_tiny(&dir, 3, None).expect("make_tiny");
        let name = "layers.1.engram.embed.scale";
        let shard = std::fs::read_dir(&dir).expect("dir").flatten().map(|e| e.path()).find(|p| read_header(p).is_ok_and(|h| h.entries.iter().any(|e| e.name == name))).expect("shard");
        let mut t = read_file(&shard).expect("shard");
        let s = t.iter_mut().find(|x| x.0 == name).expect("scale");
        s.3.iter_mut().step_by(3).for_each(|c| *c = FP8_ROWS_FLOOR - 1);
        write_file(&shard, &t).expect("rewrite");
        let rows = |check| {
            let (cfg, ck) = load(&dir, LoadMode::Copied, check).expect("load");
            let m = Model::new(cfg.clone(), &ck, TokenMap::synthetic(cfg.vocab_size, cfg.engram_compressed_vocab_size as u32)).expect("model");
            let n = cfg.engram_num_embeddings[0] as u32;
            table_rows(&m, "layers.1", 0..n).expect("rows").iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        let (eager, lazy) = (rows(ValueCheck::All), rows(ValueCheck::Off));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(eager.iter().filter(|&&b| b == 0).count() * 4 > eager.len(), "the planted blocks are zeroed");
        assert_eq!(eager, lazy);
    }
}
