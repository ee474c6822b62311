//! The MoE block of one layer: gate (score function, biased top-k, weights), routed experts, shared expert, join.
use super::{tap, ForwardError, Model};
use crate::exec::{ExecError, Executor, Out, Stack};
use crate::model::taps::Taps;

/// MoE of layer `l` (backbone or DSpark stage) on the normed input `x` `[S, D]` (`image` marks image-span rows, routed with `bias_vl`), taps under `name`; returns `[S, D]` (bf16).
pub(super) fn moe<E: Executor>(ex: &mut E, m: &Model, l: usize, name: &str, x: &E::Tensor, image: &[bool], taps: &mut Taps<f32>) -> Result<E::Tensor, ForwardError> {
    let plan = &m.plan[l];
    let f = format!("{}.ffn", plan.prefix());
    let limit = m.swiglu_limit();
    let logits = ex.linear(x, &format!("{f}.gate"), Out::F32)?;
    let scored = ex.dims(&logits).1;
    if scored != plan.n_routed_experts {
        return Err(ExecError::BadWeight { name: format!("{f}.gate.weight"), problem: format!("scores {scored} experts, the layer has {}", plan.n_routed_experts) }.into());
    }
    let bias_vl = (m.cfg.vision.is_some() && plan.dspark_stage.is_none()).then(|| format!("{f}.gate.bias_vl"));
    let (ids, w) = ex.moe_route(&logits, &format!("{f}.gate.bias"), bias_vl.as_deref(), image, &m.route(plan))?;
    tap(ex, taps, format!("{name}.ffn.gate_idx"), &ids)?;
    tap(ex, taps, format!("{name}.ffn.gate_w"), &w)?;
    let a = ex.gated_linear(x, &format!("{f}.shared_experts.w1"), &format!("{f}.shared_experts.w3"), limit)?;
    let shared = ex.linear(&a, &format!("{f}.shared_experts.w2"), Out::Bf16)?;
    let y = routed_experts(ex, x, &ids, &w, &shared, &format!("{f}.experts"), plan.n_routed_experts, limit)?;
    tap(ex, taps, format!("{name}.ffn.out"), &y)?;
    Ok(y)
}

/// The matrices of each routed expert, in the order the block runs them.
pub const EXPERT_MATRICES: [&str; 3] = ["w1", "w3", "w2"];

/// Routed experts `{prefix}.{e}.{w1,w3,w2}` of x `[S, d]` by `ids` and weights `w` `[S, k]`: rows packed by expert, `w2(swiglu(w1 x, w3 x) * weight)` with bf16 at each reference rounding point, then each row's outputs added to +0.0 by ascending expert id and `shared` added; bf16 out.
#[allow(clippy::too_many_arguments)]
pub fn routed_experts<E: Executor>(ex: &mut E, x: &E::Tensor, ids: &E::Tensor, w: &E::Tensor, shared: &E::Tensor, prefix: &str, experts: usize, limit: f32) -> Result<E::Tensor, ExecError> {
    let (s, k) = ex.dims(ids);
    let routes = ex.route(ids, experts)?;
    let w_flat = ex.reshape(w, s * k, 1)?;
    let (gathered, weights);
    let (xg, rw) = if routes.by_row {
        (x, &w_flat)
    } else {
        gathered = ex.gather_rows(x, &routes.rows)?;
        weights = ex.gather_rows(&w_flat, &routes.picks)?;
        (&gathered, &weights)
    };
    let [w1, w3, w2] = EXPERT_MATRICES.map(|matrix| Stack { prefix, matrix });
    let g = ex.grouped_linear(xg, &w1, &routes.table, Out::Bf16)?;
    let u = ex.grouped_linear(xg, &w3, &routes.table, Out::Bf16)?;
    let a = ex.swiglu(&g, &u, Some(rw), limit)?;
    let o = ex.grouped_linear(&a, &w2, &routes.table, Out::Bf16)?;
    ex.moe_join(&o, &routes.slots, ids, shared)
}
