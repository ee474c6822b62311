//! The MoE block of one layer: gate (score function, biased top-k, weights), routed experts, shared expert, join.
use super::{tap, ForwardError, Model};
use crate::exec::{Executor, Out};
use crate::model::taps::Taps;

/// MoE of layer `l` on the normed input `x` `[S, D]` (`image` marks image-span rows, routed with `bias_vl`); returns `[S, D]` (bf16).
pub(super) fn moe<E: Executor>(ex: &mut E, m: &Model, l: usize, x: &E::Tensor, image: &[bool], taps: &mut Taps<f32>) -> Result<E::Tensor, ForwardError> {
    let plan = &m.plan[l];
    let f = format!("{}.ffn", plan.prefix());
    let limit = m.swiglu_limit();
    let logits = ex.linear(x, &format!("{f}.gate"), Out::F32)?;
    let bias_vl = m.cfg.vision.is_some().then(|| format!("{f}.gate.bias_vl"));
    let (ids, w) = ex.moe_route(&logits, &format!("{f}.gate.bias"), bias_vl.as_deref(), image, &m.route(plan))?;
    tap(ex, taps, format!("L{l}.ffn.gate_idx"), &ids)?;
    tap(ex, taps, format!("L{l}.ffn.gate_w"), &w)?;
    let g = ex.linear(x, &format!("{f}.shared_experts.w1"), Out::Bf16)?;
    let u = ex.linear(x, &format!("{f}.shared_experts.w3"), Out::Bf16)?;
    let a = ex.swiglu(&g, &u, limit)?;
    let shared = ex.linear(&a, &format!("{f}.shared_experts.w2"), Out::Bf16)?;
    let y = ex.routed_experts(x, &ids, &w, &shared, &format!("{f}.experts"), limit)?;
    tap(ex, taps, format!("L{l}.ffn.out"), &y)?;
    Ok(y)
}
