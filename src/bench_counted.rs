//! An executor wrapper for the forward benchmark: passes every op through and, while counting, adds up the weight and KV-state bytes the ops read.
use crate::exec::{AttnInputs, EngramGate, ExecError, Executor, HcParams, HcSite, Out, Qat, RouteParams};
use crate::model::Checkpoint;
use std::collections::BTreeSet;

/// Bytes one forward call read, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepBytes {
    /// Weights other than routed experts (stored bytes, scales included).
    pub weights: u64,
    /// Routed experts' stored bytes, for the experts the routing ids picked.
    pub experts: u64,
    /// Distinct (layer, expert) pairs the routing ids picked.
    pub expert_picks: usize,
    /// KV state each query row read: window rows, selected compressed rows and index keys (device f32).
    pub kv: u64,
}

impl StepBytes {
    /// Everything read.
    pub fn total(&self) -> u64 {
        self.weights + self.experts + self.kv
    }
}

/// An executor that counts the bytes its ops read while `counting` is on.
pub struct Counted<'c, E> {
    /// The executor doing the work.
    pub inner: E,
    /// The checkpoint the weights come from (their stored sizes).
    ckpt: &'c Checkpoint,
    /// Whether ops are counted (counting reads routing ids and top-k lists back, so timed calls leave it off).
    pub counting: bool,
    /// What the counted ops read.
    pub bytes: StepBytes,
}

impl<'c, E: Executor> Counted<'c, E> {
    /// Wraps `inner`, not counting.
    pub fn new(inner: E, ckpt: &'c Checkpoint) -> Self {
        Counted { inner, ckpt, counting: false, bytes: StepBytes::default() }
    }

    /// Stored bytes of tensor `name` (0 when absent).
    fn tensor(&self, name: &str) -> u64 {
        self.ckpt.get(name).map_or(0, |t| t.bytes.len() as u64)
    }

    /// Stored bytes of `module.weight` and its scale.
    fn module(&self, module: &str) -> u64 {
        self.tensor(&format!("{module}.weight")) + self.tensor(&format!("{module}.scale"))
    }

    /// Adds `n` weight bytes when counting.
    fn add_weights(&mut self, n: u64) {
        if self.counting {
            self.bytes.weights += n;
        }
    }
}

impl<E: Executor> Executor for Counted<'_, E> {
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
    fn slice_rows(&mut self, x: &E::Tensor, start: usize, len: usize) -> Result<E::Tensor, ExecError> {
        self.inner.slice_rows(x, start, len)
    }
    fn hc_repeat(&mut self, x: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.inner.hc_repeat(x, hc)
    }
    fn embed(&mut self, module: &str, ids: &[u32]) -> Result<E::Tensor, ExecError> {
        let row = self.ckpt.get(&format!("{module}.weight")).map_or(0, |t| (t.bytes.len() / t.shape.first().copied().unwrap_or(1).max(1)) as u64);
        self.add_weights(row * ids.len() as u64);
        self.inner.embed(module, ids)
    }
    fn linear(&mut self, x: &E::Tensor, module: &str, out: Out) -> Result<E::Tensor, ExecError> {
        self.add_weights(self.module(module));
        self.inner.linear(x, module, out)
    }
    fn grouped_linear(&mut self, x: &E::Tensor, module: &str, groups: usize) -> Result<E::Tensor, ExecError> {
        self.add_weights(self.module(module));
        self.inner.grouped_linear(x, module, groups)
    }
    fn rmsnorm(&mut self, x: &E::Tensor, module: &str, eps: f32, out: Out) -> Result<E::Tensor, ExecError> {
        self.add_weights(self.module(module));
        self.inner.rmsnorm(x, module, eps, out)
    }
    fn scale(&mut self, x: &E::Tensor, s: f32, out: Out) -> Result<E::Tensor, ExecError> {
        self.inner.scale(x, s, out)
    }
    fn add(&mut self, a: &E::Tensor, b: &E::Tensor, out: Out) -> Result<E::Tensor, ExecError> {
        self.inner.add(a, b, out)
    }
    fn swiglu(&mut self, g: &E::Tensor, u: &E::Tensor, limit: f32) -> Result<E::Tensor, ExecError> {
        self.inner.swiglu(g, u, limit)
    }
    fn hc_mixes(&mut self, h: &E::Tensor, site: &HcSite, p: &HcParams) -> Result<E::Tensor, ExecError> {
        self.add_weights(self.tensor(&site.hc_fn) + self.tensor(&site.base) + self.tensor(&site.scale));
        self.inner.hc_mixes(h, site, p)
    }
    fn hc_collapse(&mut self, h: &E::Tensor, mix: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.inner.hc_collapse(h, mix, hc)
    }
    fn hc_expand(&mut self, out: &E::Tensor, h: &E::Tensor, mix: &E::Tensor, hc: usize) -> Result<E::Tensor, ExecError> {
        self.inner.hc_expand(out, h, mix, hc)
    }
    fn engram_gate(&mut self, h: &E::Tensor, kv: &E::Tensor, q_weight: &str, k_weight: &str, p: &EngramGate, live: &[bool]) -> Result<E::Tensor, ExecError> {
        self.add_weights(self.tensor(q_weight) + self.tensor(k_weight));
        self.inner.engram_gate(h, kv, q_weight, k_weight, p, live)
    }
    fn rope(&mut self, x: &E::Tensor, cs: &E::Tensor, heads: usize, inverse: bool) -> Result<E::Tensor, ExecError> {
        self.inner.rope(x, cs, heads, inverse)
    }
    fn qat(&mut self, x: &E::Tensor, kind: Qat) -> Result<E::Tensor, ExecError> {
        self.inner.qat(x, kind)
    }
    fn compress_pool(&mut self, k: &E::Tensor, g: &E::Tensor, partial: &mut E::Tensor, pending: usize, ratio: usize) -> Result<E::Tensor, ExecError> {
        self.inner.compress_pool(k, g, partial, pending, ratio)
    }
    fn append_rows(&mut self, cache: &mut E::Tensor, rows: &E::Tensor) -> Result<(), ExecError> {
        self.inner.append_rows(cache, rows)
    }
    fn ring_write(&mut self, ring: &mut E::Tensor, rows: &E::Tensor, start: usize) -> Result<(), ExecError> {
        self.inner.ring_write(ring, rows, start)
    }
    fn index_scores(&mut self, q: &E::Tensor, w: &E::Tensor, keys: &E::Tensor, visible: &[usize]) -> Result<E::Tensor, ExecError> {
        if self.counting {
            let dim = self.inner.dims(keys).1 as u64;
            self.bytes.kv += visible.iter().map(|&v| v as u64 * dim * 4).sum::<u64>();
        }
        self.inner.index_scores(q, w, keys, visible)
    }
    fn candidate_mask(&mut self, scores: &E::Tensor, visible: &[usize], blocks: usize, block: usize) -> Result<E::Tensor, ExecError> {
        self.inner.candidate_mask(scores, visible, blocks, block)
    }
    fn mask_scores(&mut self, scores: &E::Tensor, mask: &E::Tensor) -> Result<E::Tensor, ExecError> {
        self.inner.mask_scores(scores, mask)
    }
    fn index_topk(&mut self, scores: &E::Tensor, k: usize) -> Result<E::Tensor, ExecError> {
        self.inner.index_topk(scores, k)
    }
    fn sparse_attention(&mut self, q: &E::Tensor, a: &AttnInputs<'_, E::Tensor>) -> Result<E::Tensor, ExecError> {
        if self.counting {
            self.add_weights(self.tensor(a.sink));
            let (rows, hd) = (self.inner.dims(q).0, self.inner.dims(a.kv).1 as u64);
            let window: u64 = (0..rows).map(|i| (a.start + i + 1).min(a.window) as u64).sum();
            let picked = match a.compressed {
                Some((_, sel)) => self.inner.read(sel)?.iter().filter(|&&v| v >= 0.0).count() as u64,
                None => 0,
            };
            self.bytes.kv += (window + picked) * hd * 4;
        }
        self.inner.sparse_attention(q, a)
    }
    fn moe_route(&mut self, logits: &E::Tensor, bias: &str, bias_vl: Option<&str>, image: &[bool], p: &RouteParams) -> Result<(E::Tensor, E::Tensor), ExecError> {
        let vl = match bias_vl {
            Some(b) if image.iter().any(|&i| i) => self.tensor(b),
            _ => 0,
        };
        self.add_weights(self.tensor(bias) + vl);
        self.inner.moe_route(logits, bias, bias_vl, image, p)
    }
    fn routed_experts(&mut self, x: &E::Tensor, ids: &E::Tensor, w: &E::Tensor, shared: &E::Tensor, prefix: &str, limit: f32) -> Result<E::Tensor, ExecError> {
        if self.counting {
            let picked: BTreeSet<i64> = self.inner.read(ids)?.iter().filter(|&&v| v >= 0.0).map(|&v| v as i64).collect();
            for e in &picked {
                let m = format!("{prefix}.{e}");
                self.bytes.experts += self.module(&format!("{m}.w1")) + self.module(&format!("{m}.w2")) + self.module(&format!("{m}.w3"));
            }
            self.bytes.expert_picks += picked.len();
        }
        self.inner.routed_experts(x, ids, w, shared, prefix, limit)
    }
}
