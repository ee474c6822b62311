//! Every op's operand checks, written once and called by both executors before they run: dims, index ranges, and the weights' dtypes and sizes.
use crate::exec::{EngramGate, ExecError, HcParams, Qat, Stack};
use crate::kernels::gemm::{self, WeightFormat};
use crate::weights::{Checkpoint, CheckpointError, Dtype, TensorView};

/// `(rows, cols)` of a tensor.
pub type Dims = (usize, usize);

/// Fails unless `ok`, naming the op.
pub fn check(ok: bool, op: &'static str, problem: impl FnOnce() -> String) -> Result<(), ExecError> {
    if ok {
        Ok(())
    } else {
        Err(ExecError::Shape { op, problem: problem() })
    }
}

/// Fails unless `a` and `b` have the same dims.
pub fn same_dims(op: &'static str, a: Dims, b: Dims) -> Result<(), ExecError> {
    check(a == b, op, || format!("[{}, {}] vs [{}, {}]", a.0, a.1, b.0, b.1))
}

/// Fails unless every value is exact in bf16 (what keeps the products of a GEMM without act_quant exact, rule N2).
pub fn bf16_valued(op: &'static str, x: &[f32]) -> Result<(), ExecError> {
    match x.iter().position(|&v| crate::numerics::round_bf16(v).to_bits() != v.to_bits()) {
        None => Ok(()),
        Some(i) => Err(ExecError::Shape { op, problem: format!("input {i} = {:e} is not a bf16 value", x[i]) }),
    }
}

/// The tensor called `name`, its values scanned on this first read (canonical bytes; a non-finite value is an error naming it).
pub fn view<'c>(ckpt: &'c Checkpoint, name: &str) -> Result<TensorView<'c>, ExecError> {
    match ckpt.verified(name) {
        Ok(v) => Ok(v),
        Err(CheckpointError::NotFound { .. }) => Err(ExecError::MissingWeight(name.to_string())),
        Err(e) => Err(ExecError::BadWeight { name: name.to_string(), problem: e.to_string() }),
    }
}

/// The values of a BF16 or F32 tensor.
pub fn values(ckpt: &Checkpoint, name: &str) -> Result<Vec<f32>, ExecError> {
    let v = view(ckpt, name)?;
    v.to_f32().ok_or_else(|| ExecError::BadWeight { name: name.into(), problem: format!("dtype {} is not BF16 or F32", v.dtype) })
}

/// A validated GEMM weight `module.weight` `[n, k]` with its e8m0 scales (fp8 and fp4).
pub struct GemmSpec<'c> {
    /// Storage format.
    pub fmt: WeightFormat,
    /// Output columns (weight rows).
    pub n: usize,
    /// Inputs (fp4 unpacked).
    pub k: usize,
    /// The stored weight bytes.
    pub w: &'c [u8],
    /// The stored scale bytes.
    pub s: Option<&'c [u8]>,
}

/// Format, n and k of the stored `module.weight`.
pub fn gemm_shape(ckpt: &Checkpoint, module: &str) -> Result<(WeightFormat, usize, usize), ExecError> {
    let name = format!("{module}.weight");
    let w = view(ckpt, &name)?;
    let bad = |problem: String| ExecError::BadWeight { name: name.clone(), problem };
    let [n, stored_k] = *w.shape else { return Err(bad(format!("shape {:?} is not 2-D", w.shape))) };
    match w.dtype {
        Dtype::BF16 => Ok((WeightFormat::Bf16, n, stored_k)),
        Dtype::F8E4M3 => Ok((WeightFormat::E4m3, n, stored_k)),
        Dtype::I8 => Ok((WeightFormat::E2m1, n, stored_k * 2)),
        d => Err(bad(format!("dtype {d} is not a GEMM weight"))),
    }
}

/// `module.weight` and its scales, checked: a 2-D GEMM dtype, K a multiple of 32 for the scaled formats, scales F8_E8M0 of the right size, bytes matching the shape.
pub fn gemm_weight<'c>(ckpt: &'c Checkpoint, module: &str) -> Result<GemmSpec<'c>, ExecError> {
    let (fmt, n, k) = gemm_shape(ckpt, module)?;
    let name = format!("{module}.weight");
    let w = view(ckpt, &name)?;
    let bad = |problem: String| ExecError::BadWeight { name: name.clone(), problem };
    if w.bytes.len() != n * gemm::row_bytes(fmt, k) {
        return Err(bad(format!("{} bytes for [{n}, {k}]", w.bytes.len())));
    }
    if fmt == WeightFormat::Bf16 {
        return Ok(GemmSpec { fmt, n, k, w: w.bytes, s: None });
    }
    if !k.is_multiple_of(32) {
        return Err(bad(format!("K = {k} is not a multiple of 32")));
    }
    let ws = view(ckpt, &format!("{module}.scale"))?;
    let want = gemm::scale_bytes(fmt, n, k);
    if ws.dtype != Dtype::F8E8M0 || ws.bytes.len() != want {
        return Err(bad(format!("scale has dtype {} and {} bytes, expected F8_E8M0 and {want}", ws.dtype, ws.bytes.len())));
    }
    Ok(GemmSpec { fmt, n, k, w: w.bytes, s: Some(ws.bytes) })
}

/// `linear`: `module`'s weight of `k` inputs takes `x`'s columns.
pub fn linear(module: &str, k: usize, x: Dims) -> Result<(), ExecError> {
    if k != x.1 {
        return Err(ExecError::BadWeight { name: format!("{module}.weight"), problem: format!("takes {k} inputs, the activation has {}", x.1) });
    }
    Ok(())
}

/// `linear_block`'s weight: rows `lo..hi` of it (fp8 blocks whole) and, without act_quant, a BF16 or F8_E4M3 weight.
pub fn linear_block(module: &str, w: &GemmSpec, rows: (usize, usize), quantize: bool) -> Result<(), ExecError> {
    let bad = |problem: String| ExecError::BadWeight { name: format!("{module}.weight"), problem };
    let (lo, hi) = rows;
    if lo > hi || hi > w.n || (w.fmt == WeightFormat::E4m3 && !(lo.is_multiple_of(32) && (hi - lo).is_multiple_of(32))) {
        return Err(bad(format!("rows {lo}..{hi} of {} do not split into whole blocks", w.n)));
    }
    if !quantize && w.fmt == WeightFormat::E2m1 {
        return Err(bad("dtype is not BF16 or F8_E4M3".into()));
    }
    Ok(())
}

/// `linear_block`'s operands: x as wide as the weight's `k` inputs, y with x's rows and room for `n` columns from `col`.
pub fn block_dims(module: &str, k: usize, x: Dims, n: usize, y: Dims, col: usize) -> Result<(), ExecError> {
    linear(module, k, x)?;
    check(y.0 == x.0 && col + n <= y.1, "linear_block", || format!("columns {col}..{} of y [{}, {}] for x rows {}", col + n, y.0, y.1, x.0))
}

/// One entry of a grouped GEMM's table: matrix `expert` of the stack over rows `first..first + rows`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub expert: usize,
    pub first: usize,
    pub rows: usize,
}

/// `grouped_linear`: the stack's matrices take `x`'s columns and the table is `(expert, first, rows)` entries whose rows lie in x; returns the entries.
pub fn grouped_linear(x: Dims, k: usize, table: &[u32]) -> Result<Vec<Entry>, ExecError> {
    check(x.1 == k, "grouped_linear", || format!("the stack takes {k} inputs, the rows have {}", x.1))?;
    check(table.len().is_multiple_of(3), "grouped_linear", || format!("a table of {} words is not (expert, first, rows) entries", table.len()))?;
    let entries: Vec<Entry> = table.chunks_exact(3).map(|e| Entry { expert: e[0] as usize, first: e[1] as usize, rows: e[2] as usize }).collect();
    match entries.iter().find(|e| e.first + e.rows > x.0) {
        Some(e) => Err(ExecError::Shape { op: "grouped_linear", problem: format!("entry (expert {}, rows {}..{}) outside {} rows", e.expert, e.first, e.first + e.rows, x.0) }),
        None => Ok(entries),
    }
}

/// `grouped_linear` over an expert per row: the stack's matrices take `x`'s columns and the picks are one column, a row each.
pub fn grouped_picks(x: Dims, k: usize, picks: Dims) -> Result<(), ExecError> {
    check(x.1 == k, "grouped_linear", || format!("the stack takes {k} inputs, the rows have {}", x.1))?;
    check(picks.1 == 1 && x.0 > 0 && picks.0.is_multiple_of(x.0) && picks.0 > 0, "grouped_linear", || format!("picks [{}, {}] for {} rows (one expert per output row, a whole number of them per row)", picks.0, picks.1, x.0))
}

/// The `(expert, row, 1)` entries of an expert-per-row table; every pick a whole number.
pub fn pick_entries(picks: &[f32]) -> Result<Vec<u32>, ExecError> {
    match picks.iter().position(|&v| !(v >= 0.0 && v.fract() == 0.0 && v < u32::MAX as f32)) {
        Some(g) => Err(ExecError::Shape { op: "grouped_linear", problem: format!("row {g} picks expert {}", picks[g]) }),
        None => Ok(picks.iter().enumerate().flat_map(|(g, &v)| [v as u32, g as u32, 1]).collect()),
    }
}

/// Every entry's matrix is among the `len` the stack holds (where a missing one would not be named by its lookup).
pub fn stack_entries(entries: &[Entry], len: usize) -> Result<(), ExecError> {
    match entries.iter().find(|e| e.expert >= len) {
        Some(e) => Err(ExecError::Shape { op: "grouped_linear", problem: format!("expert {} outside the stack's {len}", e.expert) }),
        None => Ok(()),
    }
}

/// The matrices `stack` holds in the checkpoint: entries 0, 1, ... up to the first absent one.
pub fn stack_len(ckpt: &Checkpoint, stack: &Stack<'_>) -> usize {
    (0..).take_while(|&e| ckpt.get(&format!("{}.weight", stack.module(e))).is_some()).count()
}

/// `embed`: a 2-D BF16 table whose rows hold every id; returns (rows, cols).
pub fn embed(module: &str, w: &TensorView, ids: &[u32]) -> Result<Dims, ExecError> {
    let name = format!("{module}.weight");
    let [rows, cols] = *w.shape else { return Err(ExecError::BadWeight { name, problem: "not 2-D".into() }) };
    if w.dtype != Dtype::BF16 || w.bytes.len() != rows * cols * 2 {
        return Err(ExecError::BadWeight { name, problem: format!("dtype {} with {} bytes is not a BF16 [{rows}, {cols}] table", w.dtype, w.bytes.len()) });
    }
    if let Some(bad) = ids.iter().find(|&&i| i as usize >= rows) {
        return Err(ExecError::Shape { op: "embed", problem: format!("token id {bad} is outside the {rows}-row table") });
    }
    Ok((rows, cols))
}

/// `upload`: the values fill the dims.
pub fn upload(len: usize, rows: usize, cols: usize) -> Result<(), ExecError> {
    check(len == rows * cols, "upload", || format!("{len} values for [{rows}, {cols}]"))
}

/// `reshape`: the element count is kept.
pub fn reshape(x: Dims, rows: usize, cols: usize) -> Result<(), ExecError> {
    check(x.0 * x.1 == rows * cols, "reshape", || format!("[{}, {}] as [{rows}, {cols}]", x.0, x.1))
}

/// `gather_rows`: a column of indices, each a row of x.
pub fn gather_rows(x: Dims, idx: Dims, values: &[u32]) -> Result<(), ExecError> {
    check(idx.1 == 1 && values.iter().all(|&i| (i as usize) < x.0), "gather_rows", || format!("an index outside {} rows", x.0))
}

/// `slice_rows`: the rows lie in x.
pub fn slice_rows(x: Dims, start: usize, len: usize) -> Result<(), ExecError> {
    check(start + len <= x.0, "slice_rows", || format!("rows {start}..{} of {}", start + len, x.0))
}

/// `rmsnorm`: one weight per column.
pub fn rmsnorm(module: &str, weights: usize, x: Dims) -> Result<(), ExecError> {
    check(weights == x.1, "rmsnorm", || format!("{module}.weight has {weights} values for rows of {}", x.1))
}

/// `swiglu`: g and u alike, one weight per row when given.
pub fn swiglu(g: Dims, u: Dims, weights: Option<Dims>) -> Result<(), ExecError> {
    same_dims("swiglu", g, u)?;
    check(weights.is_none_or(|w| w == (g.0, 1)), "swiglu", || format!("row weights {weights:?} for {} rows", g.0))
}

/// `hc_mixes`: the site's tensors fit the mix width and the streams.
pub fn hc_mixes(hc_fn: &str, lens: (usize, usize, usize), p: &HcParams, h: Dims) -> Result<(), ExecError> {
    let (fl, bl, sl) = lens;
    let md = p.mix_dim();
    check(fl == md * h.1 && bl == md && sl == 3 && p.hc > 0 && h.1.is_multiple_of(p.hc), "hc_mixes", || format!("{hc_fn}: {fl} / {bl} / {sl} values for mix {md} over {}", h.1))
}

/// `hc_collapse`: streams split by hc, one mix row per row.
pub fn hc_collapse(h: Dims, mix: Dims, hc: usize) -> Result<(), ExecError> {
    check(h.0 == mix.0 && hc > 0 && h.1.is_multiple_of(hc) && mix.1 >= hc, "hc_collapse", || format!("h [{}, {}], mix [{}, {}]", h.0, h.1, mix.0, mix.1))
}

/// `hc_expand`: the output, streams and mix of every row fit hc.
pub fn hc_expand(out: Dims, h: Dims, mix: Dims, hc: usize) -> Result<(), ExecError> {
    let ok = hc > 0 && h.0 == mix.0 && out.0 == h.0 && h.1 == hc * out.1 && mix.1 == (2 + hc) * hc;
    check(ok, "hc_expand", || format!("out [{}, {}], h [{}, {}], mix [{}, {}]", out.0, out.1, h.0, h.1, mix.0, mix.1))
}

/// `engram_gate`: weights per stream value, kv keys then value, one live flag per row.
pub fn engram_gate(h: Dims, kv: Dims, weights: (usize, usize), p: &EngramGate, live: usize) -> Result<(), ExecError> {
    let n = p.hc * p.d;
    let ok = weights == (n, n) && h.1 == n && kv.1 == n + p.d && h.0 == kv.0 && live == h.0;
    check(ok, "engram_gate", || format!("h [{}, {}], kv [{}, {}], weights {} / {}", h.0, h.1, kv.0, kv.1, weights.0, weights.1))
}

/// `rope`: one table row per row, rotating at most a head's columns in pairs.
pub fn rope(x: Dims, cs: Dims, heads: usize) -> Result<(), ExecError> {
    let ok = cs.0 == x.0 && heads > 0 && x.1.is_multiple_of(heads) && cs.1.is_multiple_of(2) && cs.1 <= x.1 / heads;
    check(ok, "rope", || format!("x [{}, {}] with {heads} heads, table [{}, {}]", x.0, x.1, cs.0, cs.1))
}

/// `qat`: whole blocks per row.
pub fn qat(x: Dims, kind: Qat) -> Result<(), ExecError> {
    check(x.1.is_multiple_of(kind.block()), "qat", || format!("{} columns are not a multiple of the {kind:?} block", x.1))
}

/// `compress_pool`: k and g alike, a partial buffer of ratio - 1 rows of k then g, fewer pending rows than the ratio.
pub fn compress_pool(k: Dims, g: Dims, partial: Dims, pending: usize, ratio: usize) -> Result<(), ExecError> {
    let ok = ratio > 1 && k == g && partial.1 == 2 * k.1 && partial.0 + 1 >= ratio && pending < ratio;
    check(ok, "compress_pool", || format!("k [{}, {}], partial [{}, {}], pending {pending}, ratio {ratio}", k.0, k.1, partial.0, partial.1))
}

/// `append_rows`: rows as wide as the cache.
pub fn append_rows(cache: Dims, rows: Dims) -> Result<(), ExecError> {
    check(cache.1 == rows.1, "append_rows", || format!("cache rows of {} vs rows of {}", cache.1, rows.1))
}

/// `packed_cache`: a packable kind and whole blocks.
pub fn packing(kind: Qat, cols: usize) -> Result<crate::kernels::state::Packing, ExecError> {
    crate::kernels::state::Packing::new(kind, cols).map_err(|problem| ExecError::Shape { op: "packed_cache", problem })
}

/// `unpack_rows`: a packed cache.
pub fn packed(pack: Option<crate::kernels::state::Packing>, op: &'static str) -> Result<crate::kernels::state::Packing, ExecError> {
    pack.ok_or_else(|| ExecError::Shape { op, problem: "not a packed cache".into() })
}

/// `unpack_rows`' selection: every pick -1 or a row the cache holds.
pub fn picks(rows: usize, sel: &[f32]) -> Result<(), ExecError> {
    let bad = sel.iter().find(|&&v| !(v < 0.0 || (v.fract() == 0.0 && (v as usize) < rows)));
    check(bad.is_none(), "unpack_rows", || format!("pick {:?} of a cache of {rows} rows", bad))
}

/// `truncate_rows`: no more rows than the cache holds.
pub fn truncate_rows(have: usize, keep: usize) -> Result<(), ExecError> {
    check(keep <= have, "truncate_rows", || format!("keep {keep} of {have} rows"))
}

/// `ring_write`: rows as wide as a non-empty ring.
pub fn ring_write(ring: Dims, rows: Dims) -> Result<(), ExecError> {
    check(ring.1 == rows.1 && ring.0 > 0, "ring_write", || format!("ring [{}, {}] vs rows of {}", ring.0, ring.1, rows.1))
}

/// `index_scores`: heads of q by w, keys as wide as a head, one visible count per row.
pub fn index_scores(q: Dims, w: Dims, keys: Dims, visible: usize) -> Result<(), ExecError> {
    let ok = q.0 == w.0 && visible == q.0 && keys.1 > 0 && q.1 == w.1 * keys.1;
    check(ok, "index_scores", || format!("q [{}, {}], w [{}, {}], keys [{}, {}]", q.0, q.1, w.0, w.1, keys.0, keys.1))
}

/// `candidate_mask`: one visible count per row, non-empty blocks.
pub fn candidate_mask(scores: Dims, visible: usize, block: usize) -> Result<(), ExecError> {
    check(visible == scores.0 && block > 0, "candidate_mask", || format!("{} rows, {visible} visible counts, block {block}", scores.0))
}

/// `index_topk`: one visible count per row.
pub fn index_topk(scores: Dims, visible: usize) -> Result<(), ExecError> {
    check(visible == scores.0, "index_topk", || format!("{} rows, {visible} visible counts", scores.0))
}

/// `sparse_attention`: q by heads of the kv width, a full ring, and (when given) compressed rows as wide with one selection row per row; `selection` (values, where the executor holds them) lies in the compressed rows.
pub fn sparse_attention(q: Dims, kv: Dims, ring: Dims, window: usize, heads: usize, compressed: Option<(Dims, Dims)>, selection: Option<&[f32]>) -> Result<(), ExecError> {
    let hd = kv.1;
    let ok = q.0 == kv.0 && q.1 == heads * hd && ring.1 == hd && ring.0 == window && window > 0;
    check(ok, "sparse_attention", || format!("q [{}, {}], kv [{}, {hd}], ring [{}, {}], {heads} sinks", q.0, q.1, kv.0, ring.0, ring.1))?;
    if let Some((comp, sel)) = compressed {
        check(comp.1 == hd && sel.0 == q.0, "sparse_attention", || format!("compressed [{}, {}], selection [{}, {}]", comp.0, comp.1, sel.0, sel.1))?;
        let bad = selection.and_then(|s| s.iter().find(|&&v| v >= 0.0 && v as usize >= comp.0));
        check(bad.is_none(), "sparse_attention", || format!("selection {bad:?} outside {} compressed rows", comp.0))?;
    }
    Ok(())
}

/// `moe_route`: a bias (and bias_vl) per expert, k at most the experts, one image flag per row.
pub fn moe_route(bias: &str, lens: (usize, usize), logits: Dims, k: usize, image: usize) -> Result<(), ExecError> {
    let ok = lens.0 == logits.1 && lens.1 == lens.0 && k <= logits.1 && image == logits.0;
    check(ok, "moe_route", || format!("{bias} has {} values for {} experts, k {k}, {image} image flags for {} rows", lens.0, logits.1, logits.0))
}

/// `route`: every id a whole number below `experts`.
pub fn route(ids: &[f32], experts: usize) -> Result<(), ExecError> {
    match ids.iter().find(|&&e| !(e >= 0.0 && e.fract() == 0.0 && (e as usize) < experts)) {
        Some(bad) => Err(ExecError::Shape { op: "route", problem: format!("expert id {bad} outside 0..{experts}") }),
        None => Ok(()),
    }
}

/// `moe_join`: one slot per pick, routed rows as wide as the shared output.
pub fn moe_join(routed: Dims, slots: Dims, ids: Dims, shared: Dims) -> Result<(), ExecError> {
    let ok = slots == ids && shared.0 == ids.0 && routed.1 == shared.1 && routed.0 == ids.0 * ids.1;
    check(ok, "moe_join", || format!("routed [{}, {}], slots [{}, {}], ids [{}, {}], shared [{}, {}]", routed.0, routed.1, slots.0, slots.1, ids.0, ids.1, shared.0, shared.1))
}

/// `bias_add`: a bias of the row width.
pub fn bias_add(module: &str, bias: usize, x: Dims) -> Result<(), ExecError> {
    check(bias == x.1, "bias_add", || format!("{module}.bias has {bias} values for rows of {}", x.1))
}

/// `unfold_cells`: the rows are the grid, a cell of at least one patch.
pub fn unfold_cells(x: Dims, grid_h: usize, grid_w: usize, cell: usize) -> Result<(), ExecError> {
    let ok = cell > 0 && grid_h > 0 && grid_w > 0 && x.0 == grid_h * grid_w && x.1 > 0;
    check(ok, "unfold_cells", || format!("x [{}, {}] as a {grid_h} x {grid_w} grid in cells of {cell}", x.0, x.1))
}

/// `vit_attention`: q, k, v of one width in whole heads of at most the kernel's head dim, k and v alike.
pub fn vit_attention(q: Dims, k: Dims, v: Dims, heads: usize) -> Result<(), ExecError> {
    let ok = heads > 0 && q.1 == k.1 && k == v && k.0 > 0 && q.1.is_multiple_of(heads) && q.1 / heads <= crate::kernels::vision::MAX_HEAD_DIM && q.1 > 0;
    check(ok, "vit_attention", || format!("q [{}, {}], k [{}, {}], v [{}, {}] in {heads} heads", q.0, q.1, k.0, k.1, v.0, v.1))
}
