//! The CPU executor: every op is its canonical f32 oracle, reading weights straight from the (mapped) checkpoint.
mod model;

use model as m;
use crate::exec::{AttnInputs, EngramGate, ExecError, Executor, HcParams, HcSite, Out, Qat, RouteParams};
use crate::kernels::gemm::{self, WeightFormat};
use crate::kernels::ops::{self, RmsNorm};
use crate::weights::{Checkpoint, Dtype, TensorView};
use crate::numerics::round_bf16;

/// A host tensor `[rows, cols]` of f32 values.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuTensor {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row-major values.
    pub data: Vec<f32>,
}

impl CpuTensor {
    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// A tensor from rows computed one at a time.
    pub(crate) fn from_rows(rows: usize, cols: usize, f: impl Fn(usize) -> Vec<f32>) -> CpuTensor {
        let mut data = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            data.extend(f(i));
        }
        CpuTensor { rows, cols, data }
    }
}

/// The CPU oracle executor over one checkpoint.
pub struct CpuExecutor<'c> {
    ckpt: &'c Checkpoint,
}

/// Applies the output rounding.
pub(crate) fn round_out(mut v: Vec<f32>, out: Out) -> Vec<f32> {
    if out == Out::Bf16 {
        v.iter_mut().for_each(|x| *x = round_bf16(*x));
    }
    v
}

/// Fails unless every value is exact in bf16 (what keeps the products of a GEMM without act_quant exact, rule N2).
pub(crate) fn bf16_valued(op: &'static str, x: &[f32]) -> Result<(), ExecError> {
    match x.iter().position(|&v| round_bf16(v).to_bits() != v.to_bits()) {
        None => Ok(()),
        Some(i) => Err(ExecError::Shape { op, problem: format!("input {i} = {:e} is not a bf16 value", x[i]) }),
    }
}

/// Fails unless `ok`, naming the op.
pub(crate) fn check(ok: bool, op: &'static str, problem: impl FnOnce() -> String) -> Result<(), ExecError> {
    if ok {
        Ok(())
    } else {
        Err(ExecError::Shape { op, problem: problem() })
    }
}

impl<'c> CpuExecutor<'c> {
    /// An executor reading weights from `ckpt`.
    pub fn new(ckpt: &'c Checkpoint) -> CpuExecutor<'c> {
        CpuExecutor { ckpt }
    }

    /// The tensor called `name`.
    pub(crate) fn view(&self, name: &str) -> Result<TensorView<'c>, ExecError> {
        self.ckpt.get(name).ok_or_else(|| ExecError::MissingWeight(name.to_string()))
    }

    /// The values of a BF16 or F32 tensor.
    pub(crate) fn values(&self, name: &str) -> Result<Vec<f32>, ExecError> {
        let v = self.view(name)?;
        v.to_f32().ok_or_else(|| ExecError::BadWeight { name: name.into(), problem: format!("dtype {} is not BF16 or F32", v.dtype) })
    }

    /// `y[m, n] = x[m, k] W^T` for `module.weight`, the format chosen by its dtype (the reference's `linear`).
    pub(crate) fn linear_rows(&self, x: &[f32], m: usize, k: usize, module: &str) -> Result<(Vec<f32>, usize), ExecError> {
        let name = format!("{module}.weight");
        let w = self.view(&name)?;
        let bad = |problem: String| ExecError::BadWeight { name: name.clone(), problem };
        let [n, stored_k] = *w.shape else { return Err(bad(format!("shape {:?} is not 2-D", w.shape))) };
        let (fmt, wk) = match w.dtype {
            Dtype::BF16 => (WeightFormat::Bf16, stored_k),
            Dtype::F8E4M3 => (WeightFormat::E4m3, stored_k),
            Dtype::I8 => (WeightFormat::E2m1, stored_k * 2),
            d => return Err(bad(format!("dtype {d} is not a GEMM weight"))),
        };
        if wk != k {
            return Err(bad(format!("takes {wk} inputs, the activation has {k}")));
        }
        if fmt == WeightFormat::Bf16 {
            bf16_valued("linear", x)?;
            return Ok((gemm::oracle(fmt, m, n, k, x, &[], w.bytes, &[]), n));
        }
        if !k.is_multiple_of(32) {
            return Err(bad(format!("K = {k} is not a multiple of 32")));
        }
        let ws = self.view(&format!("{module}.scale"))?;
        let want = if fmt == WeightFormat::E4m3 { n.div_ceil(32) * (k / 32) } else { n * (k / 32) };
        if ws.dtype != Dtype::F8E8M0 || ws.bytes.len() != want {
            return Err(bad(format!("scale has dtype {} and {} bytes, expected F8_E8M0 and {want}", ws.dtype, ws.bytes.len())));
        }
        let (q, s) = ops::act_quant(x, k);
        Ok((gemm::oracle(fmt, m, n, k, &q, &s, w.bytes, ws.bytes), n))
    }

    /// Fails unless `a` and `b` have the same dims.
    fn same_dims(op: &'static str, a: &CpuTensor, b: &CpuTensor) -> Result<(), ExecError> {
        check((a.rows, a.cols) == (b.rows, b.cols), op, || format!("[{}, {}] vs [{}, {}]", a.rows, a.cols, b.rows, b.cols))
    }
}

impl Executor for CpuExecutor<'_> {
    type Tensor = CpuTensor;

    fn upload(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<CpuTensor, ExecError> {
        check(data.len() == rows * cols, "upload", || format!("{} values for [{rows}, {cols}]", data.len()))?;
        Ok(CpuTensor { rows, cols, data: data.to_vec() })
    }

    fn zeros(&mut self, rows: usize, cols: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows, cols, data: vec![0.0; rows * cols] })
    }

    fn read(&mut self, t: &CpuTensor) -> Result<Vec<f32>, ExecError> {
        Ok(t.data.clone())
    }

    fn dims(&self, t: &CpuTensor) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn slice_rows(&mut self, x: &CpuTensor, start: usize, len: usize) -> Result<CpuTensor, ExecError> {
        check(start + len <= x.rows, "slice_rows", || format!("rows {start}..{} of {}", start + len, x.rows))?;
        Ok(CpuTensor { rows: len, cols: x.cols, data: x.data[start * x.cols..(start + len) * x.cols].to_vec() })
    }

    fn hc_repeat(&mut self, x: &CpuTensor, hc: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor::from_rows(x.rows, hc * x.cols, |i| x.row(i).repeat(hc)))
    }

    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<CpuTensor, ExecError> {
        let name = format!("{module}.weight");
        let w = self.view(&name)?;
        let [v, d] = *w.shape else { return Err(ExecError::BadWeight { name, problem: "not 2-D".into() }) };
        if w.dtype != Dtype::BF16 {
            return Err(ExecError::BadWeight { name, problem: format!("dtype {} is not BF16", w.dtype) });
        }
        if let Some(bad) = ids.iter().find(|&&i| i as usize >= v) {
            return Err(ExecError::Shape { op: "embed", problem: format!("token id {bad} is outside the {v}-row table") });
        }
        Ok(CpuTensor::from_rows(ids.len(), d, |i| {
            let row = &w.bytes[ids[i] as usize * d * 2..(ids[i] as usize + 1) * d * 2];
            row.chunks_exact(2).map(|c| crate::numerics::bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect()
        }))
    }

    fn linear(&mut self, x: &CpuTensor, module: &str, out: Out) -> Result<CpuTensor, ExecError> {
        let (y, n) = self.linear_rows(&x.data, x.rows, x.cols, module)?;
        Ok(CpuTensor { rows: x.rows, cols: n, data: round_out(y, out) })
    }

    fn grouped_linear(&mut self, x: &CpuTensor, module: &str, groups: usize) -> Result<CpuTensor, ExecError> {
        m::grouped_linear(self, x, module, groups)
    }

    fn rmsnorm(&mut self, x: &CpuTensor, module: &str, eps: f32, out: Out) -> Result<CpuTensor, ExecError> {
        let w = self.values(&format!("{module}.weight"))?;
        check(w.len() == x.cols, "rmsnorm", || format!("{module}.weight has {} values for rows of {}", w.len(), x.cols))?;
        let p = RmsNorm { m: x.rows, d: x.cols, eps, bf16_out: out == Out::Bf16 };
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: ops::rmsnorm(&p, &x.data, &w) })
    }

    fn scale(&mut self, x: &CpuTensor, s: f32, out: Out) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: round_out(x.data.iter().map(|v| v * s).collect(), out) })
    }

    fn add(&mut self, a: &CpuTensor, b: &CpuTensor, out: Out) -> Result<CpuTensor, ExecError> {
        Self::same_dims("add", a, b)?;
        let y = ops::elementwise(ops::Elementwise::Add, &a.data, &b.data, a.cols);
        Ok(CpuTensor { rows: a.rows, cols: a.cols, data: round_out(y, out) })
    }

    fn swiglu(&mut self, g: &CpuTensor, u: &CpuTensor, limit: f32) -> Result<CpuTensor, ExecError> {
        Self::same_dims("swiglu", g, u)?;
        let ones = vec![1.0f32; g.rows];
        Ok(CpuTensor { rows: g.rows, cols: g.cols, data: ops::swiglu(&g.data, &u.data, &ones, g.cols, limit, true) })
    }

    fn hc_mixes(&mut self, h: &CpuTensor, site: &HcSite, p: &HcParams) -> Result<CpuTensor, ExecError> {
        m::hc_mixes(self, h, site, p)
    }

    fn hc_collapse(&mut self, h: &CpuTensor, mix: &CpuTensor, hc: usize) -> Result<CpuTensor, ExecError> {
        m::hc_collapse(h, mix, hc)
    }

    fn hc_expand(&mut self, out: &CpuTensor, h: &CpuTensor, mix: &CpuTensor, hc: usize) -> Result<CpuTensor, ExecError> {
        m::hc_expand(out, h, mix, hc)
    }

    fn engram_gate(&mut self, h: &CpuTensor, kv: &CpuTensor, q_weight: &str, k_weight: &str, p: &EngramGate, live: &[bool]) -> Result<CpuTensor, ExecError> {
        m::engram_gate(self, h, kv, (q_weight, k_weight), p, live)
    }

    fn rope(&mut self, x: &CpuTensor, cs: &CpuTensor, heads: usize, inverse: bool) -> Result<CpuTensor, ExecError> {
        m::rope(x, cs, heads, inverse)
    }

    fn qat(&mut self, x: &CpuTensor, kind: Qat) -> Result<CpuTensor, ExecError> {
        check(x.cols.is_multiple_of(kind.block()), "qat", || format!("{} columns are not a multiple of the {kind:?} block", x.cols))?;
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: crate::kernels::qat::qat(kind, &x.data) })
    }

    fn compress_pool(&mut self, k: &CpuTensor, g: &CpuTensor, partial: &mut CpuTensor, pending: usize, ratio: usize) -> Result<CpuTensor, ExecError> {
        m::compress_pool(k, g, partial, pending, ratio)
    }

    fn append_rows(&mut self, cache: &mut CpuTensor, rows: &CpuTensor) -> Result<(), ExecError> {
        check(cache.cols == rows.cols, "append_rows", || format!("cache rows of {} vs rows of {}", cache.cols, rows.cols))?;
        cache.data.extend_from_slice(&rows.data);
        cache.rows += rows.rows;
        Ok(())
    }

    fn ring_write(&mut self, ring: &mut CpuTensor, rows: &CpuTensor, start: usize) -> Result<(), ExecError> {
        check(ring.cols == rows.cols && ring.rows > 0, "ring_write", || format!("ring [{}, {}] vs rows of {}", ring.rows, ring.cols, rows.cols))?;
        for i in 0..rows.rows {
            let slot = (start + i) % ring.rows;
            ring.data[slot * ring.cols..(slot + 1) * ring.cols].copy_from_slice(rows.row(i));
        }
        Ok(())
    }

    fn index_scores(&mut self, q: &CpuTensor, w: &CpuTensor, keys: &CpuTensor, visible: &[usize]) -> Result<CpuTensor, ExecError> {
        m::index_scores(q, w, keys, visible)
    }

    fn candidate_mask(&mut self, scores: &CpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<CpuTensor, ExecError> {
        m::candidate_mask(scores, visible, blocks, block)
    }

    fn mask_scores(&mut self, scores: &CpuTensor, mask: &CpuTensor) -> Result<CpuTensor, ExecError> {
        Self::same_dims("mask_scores", scores, mask)?;
        Ok(CpuTensor::from_rows(scores.rows, scores.cols, |i| crate::kernels::indexer::mask_row(scores.row(i), mask.row(i))))
    }

    fn index_topk(&mut self, scores: &CpuTensor, k: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor::from_rows(scores.rows, k, |i| crate::kernels::indexer::select_row(scores.row(i), k)))
    }

    fn sparse_attention(&mut self, q: &CpuTensor, a: &AttnInputs<'_, CpuTensor>) -> Result<CpuTensor, ExecError> {
        m::sparse_attention(self, q, a)
    }

    fn moe_route(&mut self, logits: &CpuTensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(CpuTensor, CpuTensor), ExecError> {
        m::moe_route(self, logits, (bias, bias_vl), image, p)
    }

    fn routed_experts(&mut self, x: &CpuTensor, ids: &CpuTensor, w: &CpuTensor, shared: &CpuTensor, prefix: &str, limit: f32) -> Result<CpuTensor, ExecError> {
        let routed = m::routed_experts(self, x, ids, w, prefix, limit)?;
        self.add(&routed, shared, Out::Bf16)
    }
}
