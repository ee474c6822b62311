//! The GPU executor's dense ops: weight upload and cache, GEMMs (act_quant first for fp8/fp4), RMSNorm, elementwise, SwiGLU, row copies.
use crate::exec::gpu::{GpuExecutor, GpuTensor, Weight};
use crate::exec::{shapes, ExecError, Executor, Out};
use crate::gpu::{Arg, Buf};
use crate::kernels::gemm::{self, GemmArgs, GemmVariant, WeightFormat};
use crate::kernels::ops::{self, Elementwise, RmsNorm};
use std::sync::Arc;

/// One row range of a GEMM weight: rows `n0..n0 + n` of the output.
pub(crate) struct GemmPart {
    /// First output column.
    pub n0: usize,
    /// Output columns.
    pub n: usize,
    /// Weight bytes as stored.
    pub w: Buf,
    /// e8m0 scale bytes (fp8 and fp4).
    pub s: Option<Buf>,
}

/// A GEMM weight `[n, k]` split into parts below the binding limit.
pub(crate) struct GemmWeight {
    /// Storage format.
    pub fmt: WeightFormat,
    /// Output columns.
    pub n: usize,
    /// Inputs.
    pub k: usize,
    /// Inputs as the kernels see them: `k`, or for a bf16 weight whose `k` is not a multiple of 32, the next multiple (rows zero-padded on upload, inputs on use).
    pub kp: usize,
    /// Row parts in order.
    pub parts: Vec<GemmPart>,
}

/// The kernel name of a GEMM format.
pub(crate) fn gemm_kernel(fmt: WeightFormat) -> &'static str {
    match fmt {
        WeightFormat::Bf16 => "gemm_bf16",
        WeightFormat::E4m3 => "gemm_e4m3",
        WeightFormat::E2m1 => "gemm_e2m1",
    }
}

/// Uploads rows `lo..hi` of `module.weight` (and its scales) as a GEMM weight, checked by `shapes::gemm_weight`.
fn upload_gemm(ex: &GpuExecutor, module: &str, rows: Option<(usize, usize)>) -> Result<GemmWeight, ExecError> {
    let spec = shapes::gemm_weight(ex.ckpt, module)?;
    let (fmt, k) = (spec.fmt, spec.k);
    let (lo, hi) = rows.unwrap_or((0, spec.n));
    let rb = gemm::row_bytes(fmt, k);
    let per = ((ex.limit as usize / rb.max(1)) / 32 * 32).max(32);
    let nb = k / 32;
    let kp = if fmt == WeightFormat::Bf16 { k.next_multiple_of(32) } else { k };
    let mut parts = Vec::new();
    let mut r0 = lo;
    while r0 < hi {
        let r1 = (r0 + per).min(hi);
        let rows_bytes = &spec.w[r0 * rb..r1 * rb];
        let wbuf = if kp == k {
            ex.gpu.upload(rows_bytes)?
        } else {
            let padded: Vec<u8> = rows_bytes.chunks_exact(rb).flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(0u8, 2 * (kp - k)))).collect();
            ex.gpu.upload(&padded)?
        };
        let s = match (fmt, spec.s) {
            (WeightFormat::E4m3, Some(sb)) => Some(ex.gpu.upload(&sb[(r0 / 32) * nb..r1.div_ceil(32) * nb])?),
            (WeightFormat::E2m1, Some(sb)) => Some(ex.gpu.upload(&sb[r0 * nb..r1 * nb])?),
            _ => None,
        };
        parts.push(GemmPart { n0: r0 - lo, n: r1 - r0, w: wbuf, s });
        r0 = r1;
    }
    Ok(GemmWeight { fmt, n: hi - lo, k, kp, parts })
}

/// The cached weight under `key`, uploaded by `make` on first use.
pub(crate) fn cached(ex: &mut GpuExecutor, key: String, make: impl FnOnce(&GpuExecutor) -> Result<Weight, ExecError>) -> Result<Arc<Weight>, ExecError> {
    if let Some(w) = ex.weights.get(&key) {
        return Ok(w.clone());
    }
    let w = Arc::new(make(ex)?);
    ex.weights.insert(key, w.clone());
    Ok(w)
}

/// F32 values of the BF16 or F32 tensor `name` on the device, and their count.
pub(crate) fn values(ex: &mut GpuExecutor, name: &str) -> Result<(Buf, usize), ExecError> {
    let w = cached(ex, format!("{name}#f32"), |ex| {
        let vals = shapes::values(ex.ckpt, name)?;
        Ok(Weight::Values { buf: ex.gpu.upload_pod(&vals)?, len: vals.len() })
    })?;
    match &*w {
        Weight::Values { buf, len } => Ok((buf.clone(), *len)),
        _ => Err(ExecError::BadWeight { name: name.into(), problem: "cached as another kind".into() }),
    }
}

/// The GEMM weight of `module` (rows `lo..hi` when given), cached.
pub(crate) fn gemm_weight(ex: &mut GpuExecutor, module: &str, rows: Option<(usize, usize)>) -> Result<Arc<Weight>, ExecError> {
    cached(ex, gemm_key(module, rows), |ex| Ok(Weight::Gemm(upload_gemm(ex, module, rows)?)))
}

/// The cache key of `module`'s GEMM weight (rows `lo..hi` when given).
pub(crate) fn gemm_key(module: &str, rows: Option<(usize, usize)>) -> String {
    match rows {
        None => format!("{module}#gemm"),
        Some((lo, hi)) => format!("{module}#gemm{lo}-{hi}"),
    }
}

/// `x` `[m, k]` with zero columns up to `kp` (None when `k = kp`): its rows viewed in pieces of gcd(k, kp - k) words, zero pieces appended, gathered in order (copies, so the padded GEMM's blocks equal the oracle's partial last block).
fn pad_cols(ex: &mut GpuExecutor, x: &GpuTensor, kp: usize) -> Result<Option<GpuTensor>, ExecError> {
    let (m, k) = (x.rows, x.cols);
    if kp == k || m == 0 {
        return Ok(None);
    }
    let g = (1..=kp - k).rev().find(|g| k.is_multiple_of(*g) && (kp - k).is_multiple_of(*g)).unwrap_or(1);
    let (per, pad) = (k / g, (kp - k) / g);
    let mut stacked = ex.reshape(x, m * per, g)?;
    let zeros = ex.zeros(pad, g)?;
    ex.append_rows(&mut stacked, &zeros)?;
    let idx: Vec<u32> = (0..m).flat_map(|r| (r * per..(r + 1) * per).chain(m * per..m * per + pad)).map(|i| i as u32).collect();
    let idx = ex.upload_index(&idx)?;
    let rows = ex.gather_rows(&stacked, &idx)?;
    Ok(Some(ex.reshape(&rows, m, kp)?))
}

/// Records `y[:, n_base..] = x W^T` for every part of `w` into `y` (`[m, y.cols]`); `xs` are act_quant scales.
fn record_gemm(ex: &mut GpuExecutor, w: &GemmWeight, x: (&Buf, Option<&Buf>), m: usize, y: &GpuTensor, n_base: usize, round: bool) -> Result<(), ExecError> {
    ex.need("linear", gemm_kernel(w.fmt))?;
    for p in &w.parts {
        let a = GemmArgs { fmt: w.fmt, m, n: p.n, k: w.kp, x: x.0, xs: x.1, w: &p.w, ws: p.s.as_ref(), out: &y.buf, n_base: n_base + p.n0, ldo: y.cols, round };
        if gemm::dense_msl(ex.gpu.native_msl(), w.fmt, m) {
            gemm::record_msl_dense(&mut ex.rec, &a, 0)?;
        } else {
            gemm::record(&mut ex.rec, &a, GemmVariant::for_rows(m), 0)?;
        }
    }
    Ok(())
}

/// act_quants kept for reuse: an attention layer quantizes its normed input for wq_a, then q for wq_b, then the normed input again for wkv.
const QUANT_KEPT: usize = 2;

/// Records act_quant of x: (e4m3 values, scales), or returns a kept one of the same input.
pub(crate) fn act_quant(ex: &mut GpuExecutor, x: &GpuTensor) -> Result<(Buf, Buf), ExecError> {
    ex.need("linear", "act_quant")?;
    let (m, k) = (x.rows, x.cols);
    if let Some((_, _, q, s)) = ex.quant.iter().find(|(xb, dims, _, _)| xb.buffer == x.buf.buffer && *dims == (m, k)) {
        return Ok((q.clone(), s.clone()));
    }
    let q = ex.scratch((m * k * 4) as u64)?;
    let s = ex.scratch((m * k / 32 * 4) as u64)?;
    ops::record_act_quant(&mut ex.rec, &x.buf, &q, &s, m, k, 0)?;
    if ex.quant.len() == QUANT_KEPT {
        ex.quant.remove(0);
    }
    ex.quant.push((x.buf.clone(), (m, k), q.clone(), s.clone()));
    Ok((q, s))
}

/// Rounds `y` to bf16 into a new tensor (with `spare` zero rows after it) when `out` asks for it.
pub(crate) fn round_out(ex: &mut GpuExecutor, y: GpuTensor, out: Out, spare: usize) -> Result<GpuTensor, ExecError> {
    if out == Out::F32 {
        return Ok(y);
    }
    ex.need("round", "round_bf16")?;
    let r = ex.out_spare(y.rows, y.cols, spare)?;
    ops::record_elementwise(&mut ex.rec, Elementwise::RoundBf16, &y.buf, &y.buf, &r.buf, y.rows, y.cols, 0)?;
    Ok(r)
}

/// `y = x W^T` by the weight's format (the CPU executor's `linear`).
pub(super) fn linear(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, out: Out) -> Result<GpuTensor, ExecError> {
    linear_spare(ex, x, module, out, 0)
}

/// `linear` whose output buffer keeps `spare` zero rows after its rows; the GEMM stores bf16 itself when `out` asks for it.
pub(crate) fn linear_spare(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, out: Out, spare: usize) -> Result<GpuTensor, ExecError> {
    let w = gemm_weight(ex, module, None)?;
    let Weight::Gemm(w) = &*w else { return Err(ExecError::BadWeight { name: module.into(), problem: "not a GEMM weight".into() }) };
    shapes::linear(module, w.k, (x.rows, x.cols))?;
    let y = ex.out_spare(x.rows, w.n, spare)?;
    record_linear(ex, w, x, &y, out == Out::Bf16)?;
    Ok(y)
}

/// Records `y = x W^T` (rounded to bf16 when `round`): a bf16 weight takes x as it is (padded to its depth), the others its act_quant.
fn record_linear(ex: &mut GpuExecutor, w: &GemmWeight, x: &GpuTensor, y: &GpuTensor, round: bool) -> Result<(), ExecError> {
    if w.fmt == WeightFormat::Bf16 {
        let xp = pad_cols(ex, x, w.kp)?;
        record_gemm(ex, w, (&xp.as_ref().unwrap_or(x).buf, None), x.rows, y, 0, round)
    } else {
        let (q, s) = act_quant(ex, x)?;
        record_gemm(ex, w, (&q, Some(&s)), x.rows, y, 0, round)
    }
}

/// `y[:, col..] = x W[lo..hi]^T` in f32: act_quant(x) first when `quantize`, else x with scales 1 (no rounding; the caller rounds).
pub(super) fn linear_block(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, rows: (usize, usize), quantize: bool, y: &mut GpuTensor, col: usize) -> Result<(), ExecError> {
    if !ex.weights.contains_key(&gemm_key(module, Some(rows))) {
        let spec = shapes::gemm_weight(ex.ckpt, module)?;
        shapes::linear_block(module, &spec, rows, quantize)?;
    }
    let w = gemm_weight(ex, module, Some(rows))?;
    let Weight::Gemm(w) = &*w else { return Err(ExecError::BadWeight { name: module.into(), problem: "not a GEMM weight".into() }) };
    shapes::block_dims(module, w.k, (x.rows, x.cols), w.n, (y.rows, y.cols), col)?;
    let m = x.rows;
    if w.fmt == WeightFormat::Bf16 {
        let xp = pad_cols(ex, x, w.kp)?;
        record_gemm(ex, w, (&xp.as_ref().unwrap_or(x).buf, None), m, y, col, false)
    } else if quantize {
        let (q, s) = act_quant(ex, x)?;
        record_gemm(ex, w, (&q, Some(&s)), m, y, col, false)
    } else {
        let ones = ex.ones(m * (w.k / 32))?;
        record_gemm(ex, w, (&x.buf, Some(&ones)), m, y, col, false)
    }
}

/// RMSNorm of each row with `module.weight`.
pub(super) fn rmsnorm(ex: &mut GpuExecutor, x: &GpuTensor, module: &str, eps: f32, out: Out) -> Result<GpuTensor, ExecError> {
    rmsnorm_of(ex, Arg::Whole(&x.buf), (x.rows, x.cols), module, eps, out)
}

/// RMSNorm with `module.weight` of the `[rows, cols]` values `x` binds (a whole tensor, or a range of a wider one).
fn rmsnorm_of(ex: &mut GpuExecutor, x: Arg, (rows, cols): (usize, usize), module: &str, eps: f32, out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("rmsnorm", "rmsnorm")?;
    let (w, len) = values(ex, &format!("{module}.weight"))?;
    shapes::rmsnorm(module, len, (rows, cols))?;
    let p = RmsNorm { m: rows, d: cols, eps, bf16_out: out == Out::Bf16 };
    let y = ex.out(rows, cols)?;
    ops::record_rmsnorm_args(&mut ex.rec, &p, x, &w, &y.buf, 0)?;
    Ok(y)
}

/// `normed_linears` for one row: one GEMV over both weights (`cat_gemv`), each norm binding its columns of the output; None where `cat_gemv` does not apply (the caller runs them apart).
pub(super) fn normed_linears(ex: &mut GpuExecutor, x: &GpuTensor, a: [&str; 2], b: [&str; 2], eps: f32) -> Result<Option<(GpuTensor, GpuTensor)>, ExecError> {
    let Some((y, na)) = cat_gemv(ex, x, a[0], b[0], true)? else { return Ok(None) };
    let nb = y.cols - na;
    let qa = rmsnorm_of(ex, Arg::Range(&y.buf, 0, 4 * na as u64), (1, na), a[1], eps, Out::Bf16)?;
    let qb = rmsnorm_of(ex, Arg::Range(&y.buf, 4 * na as u64, 4 * nb as u64), (1, nb), b[1], eps, Out::Bf16)?;
    Ok(Some((qa, qb)))
}

/// One row through `a` and `b` (same format and depth) as one GEMV over both weights, b's rows after a's: the output `[1, n_a + n_b]` and n_a; None for several rows, or where an fp8 block or a binding offset would straddle the two.
pub(super) fn cat_gemv(ex: &mut GpuExecutor, x: &GpuTensor, a: &str, b: &str, round: bool) -> Result<Option<(GpuTensor, usize)>, ExecError> {
    if x.rows != 1 {
        return Ok(None);
    }
    let w = cached(ex, format!("{a}+{b}#cat"), |ex| Ok(Weight::Cat(upload_cat(ex, a, b)?)))?;
    let Weight::Cat(cat) = &*w else { return Err(ExecError::BadWeight { name: a.into(), problem: "cached as another kind".into() }) };
    let Some((w, na)) = cat else { return Ok(None) };
    shapes::linear(a, w.k, (x.rows, x.cols))?;
    let y = ex.out(1, w.n)?;
    record_linear(ex, w, x, &y, round)?;
    Ok(Some((y, *na)))
}

/// `a`'s and `b`'s weights as one GEMM weight of one part, `b`'s rows after `a`'s, and `a`'s row count; None unless both have one format and depth, whole 32-blocks, `a`'s rows a whole number of fp8 blocks and of binding offsets, and fit one binding.
fn upload_cat(ex: &GpuExecutor, a: &str, b: &str) -> Result<Option<(GemmWeight, usize)>, ExecError> {
    let (sa, sb) = (shapes::gemm_weight(ex.ckpt, a)?, shapes::gemm_weight(ex.ckpt, b)?);
    let align = u64::from(ex.gpu.limits.min_storage_buffer_offset_alignment) as usize;
    let whole = (sa.n + sb.n) * gemm::row_bytes(sa.fmt, sa.k);
    if sa.fmt != sb.fmt || sa.k != sb.k || !sa.k.is_multiple_of(32) || !sa.n.is_multiple_of(32) || !(4 * sa.n).is_multiple_of(align) || !sb.n.is_multiple_of(4) || whole as u64 > ex.limit {
        return Ok(None);
    }
    let w = ex.gpu.upload(&[sa.w, sb.w].concat())?;
    let s = match (sa.s, sb.s) {
        (Some(x), Some(y)) => Some(ex.gpu.upload(&[x, y].concat())?),
        _ => None,
    };
    Ok(Some((GemmWeight { fmt: sa.fmt, n: sa.n + sb.n, k: sa.k, kp: sa.k, parts: vec![GemmPart { n0: 0, n: sa.n + sb.n, w, s }] }, sa.n)))
}

/// `x * s` (a per-row scale of s on every row), then the output rounding.
pub(super) fn scale(ex: &mut GpuExecutor, x: &GpuTensor, s: f32, out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("scale", "scale")?;
    let sb = ex.upload_pod(&vec![s; x.rows.max(1)])?;
    let y = ex.out(x.rows, x.cols)?;
    ops::record_elementwise(&mut ex.rec, Elementwise::Scale, &x.buf, &sb, &y.buf, x.rows, x.cols, 0)?;
    round_out(ex, y, out, 0)
}

/// `a + b`, then the output rounding.
pub(crate) fn add(ex: &mut GpuExecutor, a: &GpuTensor, b: &GpuTensor, out: Out) -> Result<GpuTensor, ExecError> {
    ex.need("add", "add")?;
    shapes::same_dims("add", (a.rows, a.cols), (b.rows, b.cols))?;
    let y = ex.out(a.rows, a.cols)?;
    ops::record_elementwise(&mut ex.rec, Elementwise::Add, &a.buf, &b.buf, &y.buf, a.rows, a.cols, 0)?;
    round_out(ex, y, out, 0)
}

/// Clamped SwiGLU times each row's weight `[m, 1]` (1 when none is given), bf16 out.
pub(super) fn swiglu(ex: &mut GpuExecutor, g: &GpuTensor, u: &GpuTensor, weights: Option<&GpuTensor>, limit: f32) -> Result<GpuTensor, ExecError> {
    ex.need("swiglu", "swiglu")?;
    shapes::swiglu((g.rows, g.cols), (u.rows, u.cols), weights.map(|w| (w.rows, w.cols)))?;
    let rw = match weights {
        Some(w) => w.buf.clone(),
        None => ex.ones(g.rows)?,
    };
    let a = ex.out(g.rows, g.cols)?;
    ops::record_swiglu(&mut ex.rec, &g.buf, &u.buf, &rw, &a.buf, g.rows, g.cols, limit, true, 0)?;
    Ok(a)
}
