//! The GPU executor's row movement: embedding rows, slices, stream repeat, gathers, cache appends and window-ring writes.
use crate::exec::gpu::ops::cached;
use crate::exec::gpu::{GpuExecutor, GpuTensor, Weight};
use crate::exec::{shapes, ExecError};
use crate::kernels::{rows, state};

/// Records a `copy_rows` of `rows` rows of `src` from row `at.0` to row `at.1` of `dst` (ring slots when `ring > 0`), each `repeat` times (see `rows::record_copy_rows`).
fn copy(ex: &mut GpuExecutor, src: &GpuTensor, dst: &GpuTensor, rows: usize, at: (usize, usize), ring: usize, repeat: usize) -> Result<(), ExecError> {
    ex.need("copy_rows", "copy_rows")?;
    rows::record_copy_rows(&mut ex.rec, &src.buf, &dst.buf, rows, src.row_words(), at.0, at.1, ring, repeat, 0)?;
    Ok(())
}

/// A copy of `x` in a fresh buffer with room for `room` rows, at least its own (rows beyond `x.rows` zero).
pub(super) fn copy_tensor(ex: &mut GpuExecutor, x: &GpuTensor, room: usize) -> Result<GpuTensor, ExecError> {
    let cap = room.max(x.rows);
    let mut y = ex.alloc(x.rows, x.row_words(), cap)?;
    (y.cols, y.pack) = (x.cols, x.pack);
    copy(ex, x, &y, x.rows, (0, 0), 0, 1)?;
    y.index = x.index.clone();
    Ok(y)
}

/// Rows `start..start + len` of `x`.
pub(super) fn slice_rows(ex: &mut GpuExecutor, x: &GpuTensor, start: usize, len: usize) -> Result<GpuTensor, ExecError> {
    shapes::slice_rows((x.rows, x.cols), start, len)?;
    unpacked(x, "slice_rows")?;
    let y = ex.out(len, x.cols)?;
    copy(ex, x, &y, len, (start, 0), 0, 1)?;
    Ok(y)
}

/// Each row `[d]` repeated `hc` times into `[hc*d]`.
pub(super) fn hc_repeat(ex: &mut GpuExecutor, x: &GpuTensor, hc: usize) -> Result<GpuTensor, ExecError> {
    let y = ex.out(x.rows, hc * x.cols)?;
    copy(ex, x, &y, x.rows, (0, 0), 0, hc)?;
    Ok(y)
}

/// Rows of the BF16 table `module.weight` for `ids`: the table is uploaded once, or, when it exceeds one binding, only the call's rows are (the embed kernel then reads them by 0..m).
pub(super) fn embed(ex: &mut GpuExecutor, module: &str, ids: &[u32]) -> Result<GpuTensor, ExecError> {
    ex.need("embed", "embed")?;
    let name = format!("{module}.weight");
    let w = shapes::view(ex.ckpt, &name)?;
    let (rows, cols) = shapes::embed(module, &w, ids)?;
    let y = ex.out(ids.len(), cols)?;
    if w.bytes.len() as u64 <= ex.limit {
        let table = cached(ex, format!("{name}#table"), |ex| Ok(Weight::Table { buf: ex.gpu.upload(w.bytes)? }))?;
        let Weight::Table { buf } = &*table else { return Err(ExecError::BadWeight { name, problem: "cached as another kind".into() }) };
        let idb = ex.upload_pod(ids)?;
        rows::record_embed(&mut ex.rec, buf, &idb, &y.buf, ids.len(), cols, rows, 0)?;
    } else {
        let part: Vec<u8> = ids.iter().flat_map(|&i| w.bytes[i as usize * cols * 2..(i as usize + 1) * cols * 2].iter().copied()).collect();
        let (buf, local) = (ex.gpu.upload(&part)?, (0..ids.len() as u32).collect::<Vec<_>>());
        let idb = ex.upload_pod(&local)?;
        rows::record_embed(&mut ex.rec, &buf, &idb, &y.buf, ids.len(), cols, ids.len(), 0)?;
    }
    Ok(y)
}

/// Rows `idx` of `x` into a new `[idx rows, cols]` tensor; the indices come from the index tensor's host copy (read back when it has none).
pub(crate) fn gather_rows(ex: &mut GpuExecutor, x: &GpuTensor, idx: &GpuTensor) -> Result<GpuTensor, ExecError> {
    ex.need("gather_rows", "gather_rows")?;
    unpacked(x, "gather_rows")?;
    let (ib, n) = match &idx.index {
        Some(words) => {
            shapes::gather_rows((x.rows, x.cols), (idx.rows, idx.cols), words)?;
            (idx.buf.clone(), words.len())
        }
        None => {
            let words: Vec<u32> = ex.values_of(idx)?.iter().map(|&v| v as u32).collect();
            shapes::gather_rows((x.rows, x.cols), (idx.rows, idx.cols), &words)?;
            (ex.upload_pod(&words)?, words.len())
        }
    };
    let y = ex.out(n, x.cols)?;
    rows::record_gather_rows(&mut ex.rec, &x.buf, &ib, &y.buf, n, x.cols, x.rows, 0)?;
    Ok(y)
}

/// Appends `rows` to `cache`, moving it into a buffer of twice the rows when it is full.
pub(super) fn append_rows(ex: &mut GpuExecutor, cache: &mut GpuTensor, rows: &GpuTensor) -> Result<(), ExecError> {
    shapes::append_rows((cache.rows, cache.cols), (rows.rows, rows.cols))?;
    unpacked(rows, "append_rows")?;
    let need = cache.rows + rows.rows;
    if need > cache.capacity() {
        let mut grown = ex.alloc(cache.rows, cache.row_words(), need.max(2 * cache.capacity()).max(16))?;
        (grown.cols, grown.pack) = (cache.cols, cache.pack);
        copy(ex, cache, &grown, cache.rows, (0, 0), 0, 1)?;
        *cache = grown;
    }
    match cache.pack {
        Some(p) => {
            ex.need("pack_rows", "pack_rows")?;
            state::record_pack(&mut ex.rec, p, &rows.buf, &cache.buf, rows.rows, cache.rows, 0)?;
        }
        None => copy(ex, rows, cache, rows.rows, (0, cache.rows), 0, 1)?,
    }
    cache.rows = need;
    Ok(())
}

/// A packed cache's rows as values: every row, or the rows `sel` `[S, k]` names with the selection renumbered to them.
pub(super) fn unpack_rows(ex: &mut GpuExecutor, cache: &GpuTensor, sel: Option<&GpuTensor>) -> Result<(GpuTensor, Option<GpuTensor>), ExecError> {
    let p = shapes::packed(cache.pack, "unpack_rows")?;
    ex.need("unpack_rows", "unpack_rows")?;
    match sel {
        None => {
            let (y, places) = (ex.out(cache.rows, cache.cols)?, ex.out(1, 1)?);
            state::record_unpack(&mut ex.rec, p, &cache.buf, cache.rows, None, &y.buf, &places.buf, 0)?;
            Ok((y, None))
        }
        Some(s) => {
            unpacked(s, "unpack_rows")?;
            if let Some(words) = &s.index {
                shapes::picks(cache.rows, &words.iter().map(|&w| w as f32).collect::<Vec<_>>())?;
            }
            let n = s.rows * s.cols;
            let (y, places) = (ex.out(n, cache.cols)?, ex.out(s.rows, s.cols)?);
            state::record_unpack(&mut ex.rec, p, &cache.buf, cache.rows, Some((&s.buf, n)), &y.buf, &places.buf, 0)?;
            Ok((y, Some(places)))
        }
    }
}

/// Refuses a packed tensor where an op reads values.
pub(super) fn unpacked(t: &GpuTensor, op: &'static str) -> Result<(), ExecError> {
    match t.pack {
        Some(_) => Err(ExecError::Shape { op, problem: "a packed cache where values are read (unpack_rows first)".into() }),
        None => Ok(()),
    }
}

/// Writes rows (positions `start..`) into ring slots `position mod ring rows`; of rows beyond the ring only the last are written, as sequential writes leave them.
pub(super) fn ring_write(ex: &mut GpuExecutor, ring: &mut GpuTensor, rows: &GpuTensor, start: usize) -> Result<(), ExecError> {
    shapes::ring_write((ring.rows, ring.cols), (rows.rows, rows.cols))?;
    copy(ex, rows, ring, rows.rows, (0, start), ring.rows, 1)
}
