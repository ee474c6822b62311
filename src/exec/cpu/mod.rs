//! The CPU executor: every op is its canonical f32 oracle, reading weights straight from the (mapped) checkpoint.
mod layer_ops;

use crate::exec::shapes::{self, bf16_valued};
use crate::exec::{AttnInputs, EngramGate, ExecError, Executor, HcParams, HcSite, Out, Qat, RouteParams, Routes, Stack};
use crate::kernels::gemm::{self, WeightFormat};
use crate::kernels::ops::{self, RmsNorm};
use crate::kernels::state::{self, Packing};
use crate::kernels::vision;
use crate::numerics::math::mul_rn;
use crate::numerics::round_bf16;
use crate::weights::{Checkpoint, TensorView};
use layer_ops as m;

/// A host tensor `[rows, cols]` of f32 values, or of packed rows.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuTensor {
    /// Rows.
    pub rows: usize,
    /// Columns (values per row).
    pub cols: usize,
    /// Row-major values; for a packed tensor its words' bits, `row_words` a row.
    pub data: Vec<f32>,
    /// How the rows are packed, for a packed cache.
    pub pack: Option<Packing>,
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
        CpuTensor { rows, cols, data, pack: None }
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

/// Refuses a packed tensor where an op reads values.
fn unpacked(t: &CpuTensor, op: &'static str) -> Result<(), ExecError> {
    match t.pack {
        Some(_) => Err(ExecError::Shape { op, problem: "a packed cache where values are read (unpack_rows first)".into() }),
        None => Ok(()),
    }
}

impl<'c> CpuExecutor<'c> {
    /// An executor reading weights from `ckpt`.
    pub fn new(ckpt: &'c Checkpoint) -> CpuExecutor<'c> {
        CpuExecutor { ckpt }
    }

    /// The checkpoint the weights come from.
    pub(crate) fn ckpt(&self) -> &'c Checkpoint {
        self.ckpt
    }

    /// The tensor called `name`.
    pub(crate) fn view(&self, name: &str) -> Result<TensorView<'c>, ExecError> {
        shapes::view(self.ckpt, name)
    }

    /// The values of a BF16 or F32 tensor.
    pub(crate) fn values(&self, name: &str) -> Result<Vec<f32>, ExecError> {
        shapes::values(self.ckpt, name)
    }

    /// `y[m, n] = x[m, k] W[lo..hi]^T` for rows `lo..hi` of `module.weight` (all when `None`), the format chosen by its dtype; act_quant(x) first when `quantize` and the format has scales, else scales 1.
    fn gemm_rows(&self, x: &[f32], m: usize, k: usize, module: &str, rows: Option<(usize, usize)>, quantize: bool) -> Result<(Vec<f32>, usize), ExecError> {
        let w = shapes::gemm_weight(self.ckpt, module)?;
        shapes::linear(module, w.k, (m, k))?;
        let (lo, hi) = rows.unwrap_or((0, w.n));
        let n = hi - lo;
        let rb = gemm::row_bytes(w.fmt, k);
        let wb = &w.w[lo * rb..hi * rb];
        let sb = match (w.fmt, w.s) {
            (WeightFormat::E4m3, Some(s)) => &s[(lo / 32) * (k / 32)..hi.div_ceil(32) * (k / 32)],
            (WeightFormat::E2m1, Some(s)) => &s[lo * (k / 32)..hi * (k / 32)],
            _ => &[][..],
        };
        if w.fmt == WeightFormat::Bf16 || !quantize {
            bf16_valued("linear", x)?;
        }
        let y = match (w.fmt, quantize) {
            (WeightFormat::Bf16, _) => gemm::oracle(w.fmt, m, n, k, x, &[], wb, &[]),
            (_, true) => {
                let (q, s) = ops::act_quant(x, k);
                gemm::oracle(w.fmt, m, n, k, &q, &s, wb, sb)
            }
            (_, false) => gemm::oracle(w.fmt, m, n, k, x, &vec![1.0f32; m * (k / 32)], wb, sb),
        };
        Ok((y, n))
    }

    /// `y[m, n] = x[m, k] W^T` for `module.weight`, the format chosen by its dtype (the reference's `linear`).
    pub(crate) fn linear_rows(&self, x: &[f32], m: usize, k: usize, module: &str) -> Result<(Vec<f32>, usize), ExecError> {
        self.gemm_rows(x, m, k, module, None, true)
    }
}

impl Executor for CpuExecutor<'_> {
    type Tensor = CpuTensor;

    fn upload(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<CpuTensor, ExecError> {
        shapes::upload(data.len(), rows, cols)?;
        Ok(CpuTensor { rows, cols, data: data.to_vec(), pack: None })
    }

    fn zeros(&mut self, rows: usize, cols: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows, cols, data: vec![0.0; rows * cols], pack: None })
    }

    fn scratch(&mut self, rows: usize, cols: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows, cols, data: vec![f32::NAN; rows * cols], pack: None })
    }

    fn copy(&mut self, x: &CpuTensor) -> Result<CpuTensor, ExecError> {
        Ok(x.clone())
    }

    fn copy_with_room(&mut self, x: &CpuTensor, rows: usize) -> Result<CpuTensor, ExecError> {
        let mut data = Vec::with_capacity(rows.max(x.rows) * x.pack.map_or(x.cols, |p| p.row_words()));
        data.extend_from_slice(&x.data);
        Ok(CpuTensor { data, ..x.clone() })
    }

    fn upload_index(&mut self, idx: &[u32]) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows: idx.len(), cols: 1, data: idx.iter().map(|&i| i as f32).collect(), pack: None })
    }

    fn reshape(&mut self, x: &CpuTensor, rows: usize, cols: usize) -> Result<CpuTensor, ExecError> {
        shapes::reshape((x.rows, x.cols), rows, cols)?;
        unpacked(x, "reshape")?;
        Ok(CpuTensor { rows, cols, data: x.data.clone(), pack: None })
    }

    fn gather_rows(&mut self, x: &CpuTensor, idx: &CpuTensor) -> Result<CpuTensor, ExecError> {
        unpacked(x, "gather_rows")?;
        let words: Vec<u32> = idx.data.iter().map(|&v| v as u32).collect();
        shapes::gather_rows((x.rows, x.cols), (idx.rows, idx.cols), &words)?;
        Ok(CpuTensor { rows: words.len(), cols: x.cols, data: crate::kernels::rows::gather_rows(&x.data, x.cols, &words), pack: None })
    }

    fn read(&mut self, t: &CpuTensor) -> Result<Vec<f32>, ExecError> {
        if t.pack.is_some() {
            return Ok(self.unpack_rows(t, None)?.0.data);
        }
        Ok(t.data.clone())
    }

    fn dims(&self, t: &CpuTensor) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn slice_rows(&mut self, x: &CpuTensor, start: usize, len: usize) -> Result<CpuTensor, ExecError> {
        shapes::slice_rows((x.rows, x.cols), start, len)?;
        unpacked(x, "slice_rows")?;
        Ok(CpuTensor { rows: len, cols: x.cols, data: x.data[start * x.cols..(start + len) * x.cols].to_vec(), pack: None })
    }

    fn hc_repeat(&mut self, x: &CpuTensor, hc: usize) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor::from_rows(x.rows, hc * x.cols, |i| x.row(i).repeat(hc)))
    }

    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<CpuTensor, ExecError> {
        let w = self.view(&format!("{module}.weight"))?;
        let (_, d) = shapes::embed(module, &w, ids)?;
        Ok(CpuTensor::from_rows(ids.len(), d, |i| {
            let row = &w.bytes[ids[i] as usize * d * 2..(ids[i] as usize + 1) * d * 2];
            row.chunks_exact(2).map(|c| crate::numerics::bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect()
        }))
    }

    fn linear(&mut self, x: &CpuTensor, module: &str, out: Out) -> Result<CpuTensor, ExecError> {
        let (y, n) = self.linear_rows(&x.data, x.rows, x.cols, module)?;
        Ok(CpuTensor { rows: x.rows, cols: n, data: round_out(y, out), pack: None })
    }

    fn linear_block(&mut self, x: &CpuTensor, module: &str, rows: (usize, usize), quantize: bool, y: &mut CpuTensor, col: usize) -> Result<(), ExecError> {
        let spec = shapes::gemm_weight(self.ckpt, module)?;
        shapes::linear_block(module, &spec, rows, quantize)?;
        shapes::block_dims(module, spec.k, (x.rows, x.cols), rows.1 - rows.0, (y.rows, y.cols), col)?;
        let (part, n) = self.gemm_rows(&x.data, x.rows, x.cols, module, Some(rows), quantize)?;
        for i in 0..x.rows {
            y.data[i * y.cols + col..i * y.cols + col + n].copy_from_slice(&part[i * n..(i + 1) * n]);
        }
        Ok(())
    }

    fn grouped_linear(&mut self, x: &CpuTensor, stack: &Stack<'_>, table: &CpuTensor, out: Out) -> Result<CpuTensor, ExecError> {
        m::grouped_linear(self, x, stack, table, out)
    }

    fn rmsnorm(&mut self, x: &CpuTensor, module: &str, eps: f32, out: Out) -> Result<CpuTensor, ExecError> {
        let w = self.values(&format!("{module}.weight"))?;
        shapes::rmsnorm(module, w.len(), (x.rows, x.cols))?;
        let p = RmsNorm { m: x.rows, d: x.cols, eps, bf16_out: out == Out::Bf16 };
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: ops::rmsnorm(&p, &x.data, &w), pack: None })
    }

    fn scale(&mut self, x: &CpuTensor, s: f32, out: Out) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: round_out(x.data.iter().map(|&v| mul_rn(v, s)).collect(), out), pack: None })
    }

    fn add(&mut self, a: &CpuTensor, b: &CpuTensor, out: Out) -> Result<CpuTensor, ExecError> {
        shapes::same_dims("add", (a.rows, a.cols), (b.rows, b.cols))?;
        let y = ops::elementwise(ops::Elementwise::Add, &a.data, &b.data, a.cols);
        Ok(CpuTensor { rows: a.rows, cols: a.cols, data: round_out(y, out), pack: None })
    }

    fn swiglu(&mut self, g: &CpuTensor, u: &CpuTensor, weights: Option<&CpuTensor>, limit: f32) -> Result<CpuTensor, ExecError> {
        shapes::swiglu((g.rows, g.cols), (u.rows, u.cols), weights.map(|w| (w.rows, w.cols)))?;
        let rw = weights.map_or_else(|| vec![1.0f32; g.rows], |w| w.data.clone());
        Ok(CpuTensor { rows: g.rows, cols: g.cols, data: ops::swiglu(&g.data, &u.data, &rw, g.cols, limit, true), pack: None })
    }

    fn round_bf16(&mut self, x: &CpuTensor) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: round_out(x.data.clone(), Out::Bf16), pack: None })
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
        m::rope(x, cs, heads, inverse, crate::kernels::rope::Pairs::Interleaved)
    }

    fn qat(&mut self, x: &CpuTensor, kind: Qat) -> Result<CpuTensor, ExecError> {
        shapes::qat((x.rows, x.cols), kind)?;
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: crate::kernels::qat::qat(kind, &x.data), pack: None })
    }

    fn compress_pool(&mut self, k: &CpuTensor, g: &CpuTensor, partial: &mut CpuTensor, pending: usize, ratio: usize) -> Result<CpuTensor, ExecError> {
        m::compress_pool(k, g, partial, pending, ratio)
    }

    fn append_rows(&mut self, cache: &mut CpuTensor, rows: &CpuTensor) -> Result<(), ExecError> {
        shapes::append_rows((cache.rows, cache.cols), (rows.rows, rows.cols))?;
        unpacked(rows, "append_rows")?;
        match cache.pack {
            Some(p) => cache.data.extend(state::pack_rows(p, &rows.data).into_iter().map(f32::from_bits)),
            None => cache.data.extend_from_slice(&rows.data),
        }
        cache.rows += rows.rows;
        Ok(())
    }

    fn packed_cache(&mut self, kind: Qat, cols: usize, capacity: usize) -> Result<CpuTensor, ExecError> {
        let p = shapes::packing(kind, cols)?;
        Ok(CpuTensor { rows: 0, cols, data: Vec::with_capacity(capacity * p.row_words()), pack: Some(p) })
    }

    fn unpack_rows(&mut self, cache: &CpuTensor, sel: Option<&CpuTensor>) -> Result<(CpuTensor, Option<CpuTensor>), ExecError> {
        let p = shapes::packed(cache.pack, "unpack_rows")?;
        let words: Vec<u32> = cache.data.iter().map(|v| v.to_bits()).collect();
        if let Some(s) = sel {
            unpacked(s, "unpack_rows")?;
            shapes::picks(cache.rows, &s.data)?;
        }
        let (y, places) = state::unpack_rows(p, &words, sel.map(|s| s.data.as_slice()));
        let places = sel.zip(places).map(|(s, v)| CpuTensor { rows: s.rows, cols: s.cols, data: v, pack: None });
        Ok((CpuTensor { rows: y.len() / cache.cols.max(1), cols: cache.cols, data: y, pack: None }, places))
    }

    fn packing(&self, t: &CpuTensor) -> Option<Packing> {
        t.pack
    }

    fn allocated_bytes(&self, t: &CpuTensor) -> usize {
        t.data.capacity().max(t.data.len()) * 4
    }

    fn truncate_rows(&mut self, cache: &mut CpuTensor, rows: usize) -> Result<(), ExecError> {
        shapes::truncate_rows(cache.rows, rows)?;
        cache.data.truncate(rows * cache.pack.map_or(cache.cols, |p| p.row_words()));
        cache.rows = rows;
        Ok(())
    }

    fn ring_write(&mut self, ring: &mut CpuTensor, rows: &CpuTensor, start: usize) -> Result<(), ExecError> {
        shapes::ring_write((ring.rows, ring.cols), (rows.rows, rows.cols))?;
        for i in 0..rows.rows {
            let slot = (start + i) % ring.rows;
            ring.data[slot * ring.cols..(slot + 1) * ring.cols].copy_from_slice(rows.row(i));
        }
        Ok(())
    }

    fn index_scores(&mut self, q: &CpuTensor, w: &CpuTensor, keys: &CpuTensor, visible: &[usize]) -> Result<CpuTensor, ExecError> {
        match keys.pack {
            Some(_) => m::index_scores(q, w, &self.unpack_rows(keys, None)?.0, visible),
            None => m::index_scores(q, w, keys, visible),
        }
    }

    fn candidate_mask(&mut self, scores: &CpuTensor, visible: &[usize], blocks: usize, block: usize) -> Result<CpuTensor, ExecError> {
        m::candidate_mask(scores, visible, blocks, block)
    }

    fn mask_scores(&mut self, scores: &CpuTensor, mask: &CpuTensor) -> Result<CpuTensor, ExecError> {
        shapes::same_dims("mask_scores", (scores.rows, scores.cols), (mask.rows, mask.cols))?;
        Ok(CpuTensor::from_rows(scores.rows, scores.cols, |i| crate::kernels::indexer::mask_row(scores.row(i), mask.row(i))))
    }

    fn index_topk(&mut self, scores: &CpuTensor, visible: &[usize], k: usize) -> Result<CpuTensor, ExecError> {
        shapes::index_topk((scores.rows, scores.cols), visible.len())?;
        Ok(CpuTensor::from_rows(scores.rows, k, |i| crate::kernels::indexer::select_row(scores.row(i), visible[i], k)))
    }

    fn sparse_attention(&mut self, q: &CpuTensor, a: &AttnInputs<'_, CpuTensor>) -> Result<CpuTensor, ExecError> {
        m::sparse_attention(self, q, a)
    }

    fn moe_route(&mut self, logits: &CpuTensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(CpuTensor, CpuTensor), ExecError> {
        m::moe_route(self, logits, (bias, bias_vl), image, p)
    }

    fn route(&mut self, ids: &CpuTensor, experts: usize) -> Result<Routes<CpuTensor>, ExecError> {
        crate::exec::route_on_host(self, ids, experts)
    }

    fn moe_join(&mut self, routed: &CpuTensor, slots: &CpuTensor, ids: &CpuTensor, shared: &CpuTensor) -> Result<CpuTensor, ExecError> {
        m::moe_join(routed, slots, ids, shared)
    }

    fn rope_halves(&mut self, x: &CpuTensor, cs: &CpuTensor, heads: usize) -> Result<CpuTensor, ExecError> {
        m::rope(x, cs, heads, false, crate::kernels::rope::Pairs::Halves)
    }

    fn bias_add(&mut self, x: &CpuTensor, module: &str, out: Out) -> Result<CpuTensor, ExecError> {
        let b = self.values(&format!("{module}.bias"))?;
        shapes::bias_add(module, b.len(), (x.rows, x.cols))?;
        let y = vision::row_op(vision::RowOp::BiasAdd, &x.data, &b, x.cols, out == Out::Bf16);
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: y, pack: None })
    }

    fn gelu(&mut self, x: &CpuTensor, out: Out) -> Result<CpuTensor, ExecError> {
        Ok(CpuTensor { rows: x.rows, cols: x.cols, data: vision::row_op(vision::RowOp::Gelu, &x.data, &[], x.cols.max(1), out == Out::Bf16), pack: None })
    }

    fn unfold_cells(&mut self, x: &CpuTensor, grid_h: usize, grid_w: usize, cell: usize) -> Result<CpuTensor, ExecError> {
        shapes::unfold_cells((x.rows, x.cols), grid_h, grid_w, cell)?;
        let u = vision::Unfold { grid_h, grid_w, channels: x.cols, cell };
        let (ch, cw) = u.cells();
        Ok(CpuTensor { rows: ch * cw, cols: u.width(), data: vision::unfold(&x.data, &u), pack: None })
    }

    fn vit_attention(&mut self, q: &CpuTensor, k: &CpuTensor, v: &CpuTensor, heads: usize) -> Result<CpuTensor, ExecError> {
        shapes::vit_attention((q.rows, q.cols), (k.rows, k.cols), (v.rows, v.cols), heads)?;
        let dim = q.cols / heads;
        let scale = (1.0 / (dim as f64).sqrt()) as f32;
        Ok(CpuTensor::from_rows(q.rows, q.cols, |i| vision::attend_all(q.row(i), &k.data, &v.data, heads, dim, scale)))
    }
}
