//! MoE oracles (spec 2.6): the router (score function, biased top-k, normalized weights) and the join order of routed and shared experts.
use super::ops::{softmax, topk};
use crate::numerics::math::{div, sigmoid, softplus, sqrt};
use crate::numerics::sum::canonical_sum;

/// The score function of the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreFunc {
    /// `sqrt(softplus(z))`.
    SqrtSoftplus,
    /// `sigmoid(z)`.
    Sigmoid,
    /// `softmax(z)` over the experts.
    Softmax,
}

/// Router constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RouteParams {
    /// Experts per token.
    pub k: usize,
    /// Score function.
    pub func: ScoreFunc,
    /// `1 / gate_temp` rounded once from f64 (`None` when the temperature is 1).
    pub inv_temp: Option<f32>,
    /// Whether the picked scores are normalized (`norm_topk_prob`, only when k > 1).
    pub normalize: bool,
    /// `routed_scaling_factor`.
    pub route_scale: f32,
}

/// Routes one row of gate logits `z` [n_experts] (f32): (expert ids in pick order, weights). Canonical order: s = func(z * inv_temp); picks = top-k of (s + bias) by (value desc, index asc); w_k = div(s[pick_k], canonical_sum over picks in pick order + 1e-20) when normalizing; w_k = w_k * route_scale.
pub fn route_row(z: &[f32], bias: &[f32], p: &RouteParams) -> (Vec<u32>, Vec<f32>) {
    let n = z.len();
    let zt: Vec<f32> = match p.inv_temp {
        Some(t) => z.iter().map(|v| v * t).collect(),
        None => z.to_vec(),
    };
    let s: Vec<f32> = match p.func {
        ScoreFunc::SqrtSoftplus => zt.iter().map(|&v| sqrt(softplus(v))).collect(),
        ScoreFunc::Sigmoid => zt.iter().map(|&v| sigmoid(v)).collect(),
        ScoreFunc::Softmax => softmax(&zt, n, 1.0),
    };
    let biased: Vec<f32> = s.iter().zip(bias).map(|(a, b)| a + b).collect();
    let (idx, _) = topk(&biased, n, p.k.min(n));
    let mut w: Vec<f32> = idx.iter().map(|&i| s[i as usize]).collect();
    if p.normalize && w.len() > 1 {
        let denom = canonical_sum(w.len(), |i| w[i], |_| 1.0) + 1e-20;
        w.iter_mut().for_each(|v| *v = div(*v, denom));
    }
    w.iter_mut().for_each(|v| *v *= p.route_scale);
    (idx, w)
}

/// Join order of one row (the reference's `y[idx] += expert(x[idx])` loop): routed outputs added to +0.0 by ascending expert id, then the shared output; rounded to bf16 by the caller.
pub fn join_row(routed: &[(u32, &[f32])], shared: &[f32]) -> Vec<f32> {
    let mut order: Vec<&(u32, &[f32])> = routed.iter().collect();
    order.sort_by_key(|(e, _)| *e);
    let mut y = vec![0.0f32; shared.len()];
    for (_, o) in order {
        y.iter_mut().zip(o.iter()).for_each(|(a, b)| *a += b);
    }
    y.iter_mut().zip(shared).for_each(|(a, b)| *a += b);
    y
}
