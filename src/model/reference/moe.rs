//! The MoE FFN in f64 (spec 2.6): sqrtsoftplus router with bias or bias_vl, top-k, normalized weights, clamped SwiGLU experts and the shared expert.
use super::mhc::{sigmoid, silu, softplus};
use super::quant::bf16;
use super::weights::Linear;
use crate::model::{Config, ScoringFunc};

/// One SwiGLU expert: `w2(silu(min(w1 x, L)) * clamp(w3 x, -L, L))`.
#[derive(Debug, Clone)]
pub struct Expert {
    /// Gate projection.
    pub w1: Linear,
    /// Down projection.
    pub w2: Linear,
    /// Up projection.
    pub w3: Linear,
}

/// An expert's intermediate values for one token.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertTrace {
    /// `bf16(w1 x)`.
    pub gate: Vec<f64>,
    /// `bf16(w3 x)`.
    pub up: Vec<f64>,
    /// `weight * silu(min(gate, L)) * clamp(up, -L, L)` before its bf16 rounding.
    pub act_raw: Vec<f64>,
    /// `w2` output before its bf16 rounding.
    pub out_raw: Vec<f64>,
    /// `bf16(out_raw)`.
    pub out: Vec<f64>,
}

impl Expert {
    /// The expert on one token; `weight` is the routing weight applied before `w2` (None for the shared expert).
    pub fn run(&self, x: &[f64], weight: Option<f64>, limit: f64) -> ExpertTrace {
        let gate: Vec<f64> = self.w1.apply(x).into_iter().map(bf16).collect();
        let up: Vec<f64> = self.w3.apply(x).into_iter().map(bf16).collect();
        let act_raw: Vec<f64> = gate.iter().zip(&up).map(|(&g, &u)| swiglu(g, u, limit) * weight.unwrap_or(1.0)).collect();
        let act: Vec<f64> = act_raw.iter().map(|&a| bf16(a)).collect();
        let out_raw = self.w2.apply(&act);
        let out = out_raw.iter().map(|&v| bf16(v)).collect();
        ExpertTrace { gate, up, act_raw, out_raw, out }
    }
}

/// `silu(min(g, L)) * clamp(u, -L, L)`; `L = 0` disables the clamps.
pub fn swiglu(g: f64, u: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        silu(g.min(limit)) * u.clamp(-limit, limit)
    } else {
        silu(g) * u
    }
}

/// The routed experts, router and shared expert of one layer.
#[derive(Debug, Clone)]
pub struct Moe {
    /// Router `ffn.gate.weight` `[E, D]` (bf16, applied in full precision).
    pub gate: Linear,
    /// Selection bias of text tokens.
    pub bias: Vec<f64>,
    /// Selection bias of image-span tokens, when the checkpoint has one.
    pub bias_vl: Option<Vec<f64>>,
    /// Routed experts.
    pub experts: Vec<Expert>,
    /// The shared expert.
    pub shared_experts: Expert,
    /// Experts per token.
    pub topk: usize,
}

/// The router's decision for one token.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Unbiased scores of every expert.
    pub scores: Vec<f64>,
    /// Selected experts, by biased score descending (ties: lower index).
    pub idx: Vec<usize>,
    /// Routing weights of the selected experts (normalized, times route_scale).
    pub weights: Vec<f64>,
}

/// Indices of the `k` largest values, descending, ties to the lower index.
pub fn top_k_desc(v: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

impl Moe {
    /// Router: `s = score(gate x / gate_temp)`, top-k of `s + bias` (or `bias_vl` in an image span), weights from `s`.
    pub fn route(&self, cfg: &Config, x: &[f64], image: bool) -> Route {
        let z: Vec<f64> = self.gate.apply(x).into_iter().map(|v| v / cfg.gate_temp).collect();
        let scores: Vec<f64> = match cfg.scoring_func {
            ScoringFunc::SqrtSoftplus => z.iter().map(|&v| softplus(v).sqrt()).collect(),
            ScoringFunc::Sigmoid => z.iter().map(|&v| sigmoid(v)).collect(),
            ScoringFunc::Softmax => {
                let m = z.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                let e: Vec<f64> = z.iter().map(|&v| (v - m).exp()).collect();
                let s: f64 = e.iter().sum();
                e.into_iter().map(|v| v / s).collect()
            }
        };
        let bias = match (&self.bias_vl, image) {
            (Some(vl), true) => vl,
            _ => &self.bias,
        };
        let biased: Vec<f64> = scores.iter().zip(bias).map(|(s, b)| s + b).collect();
        let idx = top_k_desc(&biased, self.topk);
        let mut weights: Vec<f64> = idx.iter().map(|&e| scores[e]).collect();
        if cfg.norm_topk_prob && self.topk > 1 {
            let sum: f64 = weights.iter().sum::<f64>() + 1e-20;
            weights.iter_mut().for_each(|w| *w /= sum);
        }
        weights.iter_mut().for_each(|w| *w *= cfg.routed_scaling_factor);
        Route { scores, idx, weights }
    }

    /// The FFN output of one token for a given routing, before its bf16 rounding: routed experts plus the shared expert.
    pub fn combine_raw(&self, cfg: &Config, x: &[f64], idx: &[usize], weights: &[f64]) -> Vec<f64> {
        let mut y = self.shared_experts.run(x, None, cfg.swiglu_limit).out;
        for (&e, &w) in idx.iter().zip(weights) {
            let out = self.experts[e].run(x, Some(w), cfg.swiglu_limit).out;
            y.iter_mut().zip(out).for_each(|(a, b)| *a += b);
        }
        y
    }
}
