//! An executor wrapper that shows each op to an observer before it runs and hands the observer its output after: the benchmark's byte counter and diff's planted difference are observers.
use super::{AttnInputs, EngramGate, ExecError, Executor, HcParams, HcSite, Out, Qat, RouteParams, Routes, Stack};

/// What an op reads besides its activations, as far as an observer needs it.
pub enum Reads<'a, T> {
    /// Nothing beyond its operands.
    Nothing,
    /// `ids` rows of the table `module.weight`.
    Rows { module: &'a str, ids: usize },
    /// `module.weight` and its scale.
    Module(&'a str),
    /// `module.weight` and its scale, times `x_rows` activation rows.
    Linear { module: &'a str, x_rows: usize },
    /// Each of `modules`' weights and scales, times `x_rows` activation rows.
    Linears { modules: &'a [&'a str], x_rows: usize },
    /// Rows `lo..hi` of `module.weight` and their scales, times `x_rows` activation rows.
    ModuleRows { module: &'a str, rows: (usize, usize), x_rows: usize },
    /// Whole named tensors.
    Tensors(&'a [&'a str]),
    /// Index keys, of which query row i reads the first `visible[i]`.
    IndexKeys { keys: &'a T, visible: &'a [usize] },
    /// Packed rows of `cache`: every row, or those `sel` names.
    Packed { cache: &'a T, sel: Option<&'a T> },
    /// Attention of query rows `q` over `a`'s window and selected rows.
    Attention { q: &'a T, a: &'a AttnInputs<'a, T> },
    /// The router's bias, and `bias_vl` on rows marked `image`.
    Route { bias: &'a str, bias_vl: Option<&'a str>, image: &'a [bool] },
    /// The routing ids `[S, k]` being packed.
    Routing { ids: &'a T },
    /// The matrices of `stack` that `table`'s entries pick.
    Stack { stack: &'a Stack<'a>, table: &'a T },
}

/// Sees ops of an executor `E`; both hooks default to doing nothing.
pub trait Observer<E: Executor> {
    /// Called before op `op` runs on `ex`.
    fn before(&mut self, _ex: &mut E, _op: &'static str, _reads: Reads<'_, E::Tensor>) -> Result<(), ExecError> {
        Ok(())
    }
    /// Called with the output of op `op`; returns what the caller gets.
    fn after(&mut self, _ex: &mut E, _op: &'static str, t: E::Tensor) -> Result<E::Tensor, ExecError> {
        Ok(t)
    }
}

/// Fails the op that produces a NaN, naming it (numerics N7); the CPU oracle runs under it.
pub struct NanGuard;

impl<E: Executor> Observer<E> for NanGuard {
    fn after(&mut self, ex: &mut E, op: &'static str, t: E::Tensor) -> Result<E::Tensor, ExecError> {
        match ex.read(&t)?.iter().position(|&v| crate::numerics::edge::is_nan(v)) {
            Some(index) => Err(ExecError::NaN { op, index }),
            None => Ok(t),
        }
    }
}

/// Executor `inner` with observer `obs` around its ops (reads, uploads and the index selection ops pass straight through).
pub struct Observed<E, O> {
    pub inner: E,
    pub obs: O,
}

impl<E: Executor, O: Observer<E>> Observed<E, O> {
    /// Runs `op` between the observer's hooks.
    fn run(&mut self, op: &'static str, reads: Reads<'_, E::Tensor>, f: impl FnOnce(&mut E) -> Result<E::Tensor, ExecError>) -> Result<E::Tensor, ExecError> {
        self.obs.before(&mut self.inner, op, reads)?;
        let t = f(&mut self.inner)?;
        self.obs.after(&mut self.inner, op, t)
    }
}

impl<E: Executor, O: Observer<E>> Executor for Observed<E, O> {
    type Tensor = E::Tensor;

    fn upload(&mut self, rows: usize, cols: usize, data: &[f32]) -> Result<E::Tensor, ExecError> {
        self.inner.upload(rows, cols, data)
    }
    fn zeros(&mut self, rows: usize, cols: usize) -> Result<E::Tensor, ExecError> {
        self.inner.zeros(rows, cols)
    }
    fn read(&mut self, t: &E::Tensor) -> Result<Vec<f32>, ExecError> {
        self.inner.read(t)
    }
    fn dims(&self, t: &E::Tensor) -> (usize, usize) {
        self.inner.dims(t)
    }
    fn scratch(&mut self, rows: usize, cols: usize) -> Result<E::Tensor, ExecError> {
        self.inner.scratch(rows, cols)
    }
    fn copy(&mut self, x: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.inner.copy(x)
    }
    fn upload_index(&mut self, idx: &[u32]) -> Result<E::Tensor, ExecError> {
        self.inner.upload_index(idx)
    }
    fn const_index(&mut self, idx: &[u32]) -> Result<E::Tensor, ExecError> {
        self.inner.const_index(idx)
    }
    fn reshape(&mut self, x: &E::Tensor, rows: usize, cols: usize) -> Result<E::Tensor, ExecError> {
        self.inner.reshape(x, rows, cols)
    }
    fn gather_rows(&mut self, x: &E::Tensor, idx: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.run("gather_rows", Reads::Nothing, |e| e.gather_rows(x, idx))
    }
    fn slice_rows(&mut self, x: &E::Tensor, start: usize, len: usize) -> Result<E::Tensor, ExecError> {
        self.run("slice_rows", Reads::Nothing, |e| e.slice_rows(x, start, len))
    }
    fn hc_repeat(&mut self, x: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.run("hc_repeat", Reads::Nothing, |e| e.hc_repeat(x, hc))
    }
    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<E::Tensor, ExecError> {
        self.run("embed", Reads::Rows { module, ids: ids.len() }, |e| e.embed(module, ids))
    }
    fn linear(&mut self, x: &E::Tensor, module: &str, out: Out) -> Result<E::Tensor, ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.run("linear", Reads::Linear { module, x_rows }, |e| e.linear(x, module, out))
    }
    fn linear_block(&mut self, x: &E::Tensor, module: &str, rows: (usize, usize), quantize: bool, y: &mut E::Tensor, col: usize) -> Result<(), ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.obs.before(&mut self.inner, "linear_block", Reads::ModuleRows { module, rows, x_rows })?;
        self.inner.linear_block(x, module, rows, quantize, y, col)
    }
    fn block_linear(&mut self, x: &E::Tensor, module: &str, groups: usize, rank: usize) -> Result<E::Tensor, ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.run("block_linear", Reads::Linear { module, x_rows }, |e| e.block_linear(x, module, groups, rank))
    }
    fn grouped_linear(&mut self, x: &E::Tensor, stack: &Stack<'_>, table: &E::Tensor, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("grouped_linear", Reads::Stack { stack, table }, |e| e.grouped_linear(x, stack, table, out))
    }
    fn rmsnorm(&mut self, x: &E::Tensor, module: &str, eps: f32, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("rmsnorm", Reads::Module(module), |e| e.rmsnorm(x, module, eps, out))
    }
    fn scale(&mut self, x: &E::Tensor, s: f32, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("scale", Reads::Nothing, |e| e.scale(x, s, out))
    }
    fn add(&mut self, a: &E::Tensor, b: &E::Tensor, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("add", Reads::Nothing, |e| e.add(a, b, out))
    }
    fn swiglu(&mut self, g: &E::Tensor, u: &E::Tensor, weights: Option<&E::Tensor>, limit: f32) -> Result<E::Tensor, ExecError> {
        self.run("swiglu", Reads::Nothing, |e| e.swiglu(g, u, weights, limit))
    }
    fn gated_linear(&mut self, x: &E::Tensor, gate: &str, up: &str, limit: f32) -> Result<E::Tensor, ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.run("gated_linear", Reads::Linears { modules: &[gate, up], x_rows }, |e| e.gated_linear(x, gate, up, limit))
    }
    fn normed_linears(&mut self, x: &E::Tensor, a: [&str; 2], b: [&str; 2], eps: f32) -> Result<(E::Tensor, E::Tensor), ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.obs.before(&mut self.inner, "normed_linears", Reads::Linears { modules: &[a[0], b[0]], x_rows })?;
        self.obs.before(&mut self.inner, "normed_linears", Reads::Tensors(&[&format!("{}.weight", a[1]), &format!("{}.weight", b[1])]))?;
        let (ya, yb) = self.inner.normed_linears(x, a, b, eps)?;
        Ok((self.obs.after(&mut self.inner, "normed_linears", ya)?, self.obs.after(&mut self.inner, "normed_linears", yb)?))
    }
    fn round_bf16(&mut self, x: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.run("round_bf16", Reads::Nothing, |e| e.round_bf16(x))
    }
    fn hc_mixes(&mut self, h: &E::Tensor, site: &HcSite, p: &HcParams) -> Result<E::Tensor, ExecError> {
        self.run("hc_mixes", Reads::Tensors(&[&site.hc_fn, &site.base, &site.scale]), |e| e.hc_mixes(h, site, p))
    }
    fn hc_collapse(&mut self, h: &E::Tensor, mix: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.run("hc_collapse", Reads::Nothing, |e| e.hc_collapse(h, mix, hc))
    }
    fn hc_expand(&mut self, out: &E::Tensor, h: &E::Tensor, mix: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.run("hc_expand", Reads::Nothing, |e| e.hc_expand(out, h, mix, hc))
    }
    fn engram_gate(&mut self, h: &E::Tensor, kv: &E::Tensor, q_weight: &str, k_weight: &str, p: &EngramGate, live: &[bool]) -> Result<E::Tensor, ExecError> {
        self.run("engram_gate", Reads::Tensors(&[q_weight, k_weight]), |e| e.engram_gate(h, kv, q_weight, k_weight, p, live))
    }
    fn rope(&mut self, x: &E::Tensor, cs: &E::Tensor, heads: usize, inverse: bool) -> Result<E::Tensor, ExecError> {
        self.run("rope", Reads::Nothing, |e| e.rope(x, cs, heads, inverse))
    }
    fn qat(&mut self, x: &E::Tensor, kind: Qat) -> Result<E::Tensor, ExecError> {
        self.run("qat", Reads::Nothing, |e| e.qat(x, kind))
    }
    fn compress_pool(&mut self, k: &E::Tensor, g: &E::Tensor, partial: &mut E::Tensor, pending: usize, ratio: usize) -> Result<E::Tensor, ExecError> {
        self.run("compress_pool", Reads::Nothing, |e| e.compress_pool(k, g, partial, pending, ratio))
    }
    fn pooled_linears(&mut self, x: &E::Tensor, m: [&str; 2], partial: &mut E::Tensor, pending: usize, ratio: usize) -> Result<E::Tensor, ExecError> {
        let x_rows = self.inner.dims(x).0;
        self.run("pooled_linears", Reads::Linears { modules: &m, x_rows }, |e| e.pooled_linears(x, m, partial, pending, ratio))
    }
    fn append_rows(&mut self, cache: &mut E::Tensor, rows: &E::Tensor) -> Result<(), ExecError> {
        self.inner.append_rows(cache, rows)
    }
    fn copy_with_room(&mut self, x: &E::Tensor, rows: usize) -> Result<E::Tensor, ExecError> {
        self.inner.copy_with_room(x, rows)
    }
    fn packed_cache(&mut self, kind: Qat, cols: usize, capacity: usize) -> Result<E::Tensor, ExecError> {
        self.inner.packed_cache(kind, cols, capacity)
    }
    fn unpack_rows(&mut self, cache: &E::Tensor, sel: Option<&E::Tensor>) -> Result<(E::Tensor, Option<E::Tensor>), ExecError> {
        self.obs.before(&mut self.inner, "unpack_rows", Reads::Packed { cache, sel })?;
        let (y, places) = self.inner.unpack_rows(cache, sel)?;
        Ok((self.obs.after(&mut self.inner, "unpack_rows", y)?, places))
    }
    fn packing(&self, t: &E::Tensor) -> Option<crate::kernels::state::Packing> {
        self.inner.packing(t)
    }
    fn allocated_bytes(&self, t: &E::Tensor) -> usize {
        self.inner.allocated_bytes(t)
    }
    fn truncate_rows(&mut self, cache: &mut E::Tensor, rows: usize) -> Result<(), ExecError> {
        self.inner.truncate_rows(cache, rows)
    }
    fn ring_write(&mut self, ring: &mut E::Tensor, rows: &E::Tensor, start: usize) -> Result<(), ExecError> {
        self.inner.ring_write(ring, rows, start)
    }
    fn index_scores(&mut self, q: &E::Tensor, w: &E::Tensor, keys: &E::Tensor, visible: &[usize]) -> Result<E::Tensor, ExecError> {
        self.run("index_scores", Reads::IndexKeys { keys, visible }, |e| e.index_scores(q, w, keys, visible))
    }
    fn candidate_mask(&mut self, scores: &E::Tensor, visible: &[usize], blocks: usize, block: usize) -> Result<E::Tensor, ExecError> {
        self.inner.candidate_mask(scores, visible, blocks, block)
    }
    fn mask_scores(&mut self, scores: &E::Tensor, mask: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.inner.mask_scores(scores, mask)
    }
    fn index_topk(&mut self, scores: &E::Tensor, visible: &[usize], k: usize) -> Result<E::Tensor, ExecError> {
        self.inner.index_topk(scores, visible, k)
    }
    fn sparse_attention(&mut self, q: &E::Tensor, a: &AttnInputs<'_, E::Tensor>) -> Result<E::Tensor, ExecError> {
        self.run("sparse_attention", Reads::Attention { q, a }, |e| e.sparse_attention(q, a))
    }
    fn moe_route(&mut self, logits: &E::Tensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(E::Tensor, E::Tensor), ExecError> {
        self.obs.before(&mut self.inner, "moe_route", Reads::Route { bias, bias_vl, image })?;
        let (ids, w) = self.inner.moe_route(logits, bias, bias_vl, image, p)?;
        Ok((ids, self.obs.after(&mut self.inner, "moe_route", w)?))
    }
    fn route(&mut self, ids: &E::Tensor, experts: usize) -> Result<Routes<E::Tensor>, ExecError> {
        self.obs.before(&mut self.inner, "route", Reads::Routing { ids })?;
        self.inner.route(ids, experts)
    }
    fn moe_join(&mut self, routed: &E::Tensor, slots: &E::Tensor, ids: &E::Tensor, shared: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.run("moe_join", Reads::Nothing, |e| e.moe_join(routed, slots, ids, shared))
    }
    fn rope_halves(&mut self, x: &E::Tensor, cs: &E::Tensor, heads: usize) -> Result<E::Tensor, ExecError> {
        self.run("rope_halves", Reads::Nothing, |e| e.rope_halves(x, cs, heads))
    }
    fn bias_add(&mut self, x: &E::Tensor, module: &str, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("bias_add", Reads::Nothing, |e| e.bias_add(x, module, out))
    }
    fn gelu(&mut self, x: &E::Tensor, out: Out) -> Result<E::Tensor, ExecError> {
        self.run("gelu", Reads::Nothing, |e| e.gelu(x, out))
    }
    fn unfold_cells(&mut self, x: &E::Tensor, grid_h: usize, grid_w: usize, cell: usize) -> Result<E::Tensor, ExecError> {
        self.run("unfold_cells", Reads::Nothing, |e| e.unfold_cells(x, grid_h, grid_w, cell))
    }
    fn vit_attention(&mut self, q: &E::Tensor, k: &E::Tensor, v: &E::Tensor, heads: usize) -> Result<E::Tensor, ExecError> {
        self.run("vit_attention", Reads::Nothing, |e| e.vit_attention(q, k, v, heads))
    }
}
