//! MoE oracles (spec 2.6): the router (score function, biased top-k, normalized weights) and the join order of routed and shared experts.
pub mod contract;

use crate::kernels::dispatch::{grid64, key, row_groups};
use crate::kernels::ops::topk;
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::edge::{add, max, sub};
use crate::numerics::math::{div, exp, mul_rn, recip, sigmoid, softplus, sqrt};
use crate::numerics::sum::canonical_sum;

pub(crate) const MOE_ROUTE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "moe_route", variant: "ref", source: include_str!("../../../wgsl/moe/moe_route.wgsl") };
pub(crate) const MOE_JOIN: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "moe_join", variant: "ref", source: include_str!("../../../wgsl/moe/moe_join.wgsl") };

/// Experts the GPU router takes per row at most.
pub const ROUTE_MAX_EXPERTS: usize = 1024;
/// Picks the GPU router takes per row at most.
pub const ROUTE_MAX_K: usize = 32;

fn bad_args(kernel: &str, message: String) -> GpuError {
    GpuError::Shader { kernel: format!("{kernel}/ref"), message }
}

/// Records the router: logits [m, e] f32, bias and bias_vl [e] f32, image [m] u32 (nonzero: bias_vl) -> ids [m, k] f32 (expert ids in pick order), weights [m, k] f32.
#[allow(clippy::too_many_arguments)]
pub fn record_moe_route(rec: &mut Recorder, logits: &Buf, bias: &Buf, bias_vl: &Buf, image: &Buf, ids: &Buf, weights: &Buf, m: usize, e: usize, p: &RouteParams, control: u32) -> Result<(), GpuError> {
    if e > ROUTE_MAX_EXPERTS || p.k > ROUTE_MAX_K || p.k > e || p.k == 0 {
        return Err(bad_args("moe_route", format!("{e} experts, k {} (at most {ROUTE_MAX_EXPERTS} experts, k in 1..={ROUTE_MAX_K} and <= experts)", p.k)));
    }
    let func = match p.func {
        ScoreFunc::SqrtSoftplus => 0u32,
        ScoreFunc::Sigmoid => 1,
        ScoreFunc::Softmax => 2,
    };
    let params = [
        m as u32,
        e as u32,
        p.k as u32,
        func,
        u32::from(p.inv_temp.is_some()),
        p.inv_temp.unwrap_or(1.0).to_bits(),
        u32::from(p.normalize),
        p.route_scale.to_bits(),
    ];
    let args = [Arg::Whole(logits), Arg::Whole(bias), Arg::Whole(bias_vl), Arg::Whole(image), Arg::Whole(ids), Arg::Whole(weights)];
    rec.dispatch(&key(MOE_ROUTE, control, &[]), &params, &args, row_groups(m))
}

/// Records the join: routed [P, d] f32 (bf16-valued expert outputs, packed), slot_map [m, k] u32 (packed row of row i's pick j), ids [m, k] f32 (moe_route's), shared [m, d] f32 -> y [m, d] f32 (bf16 values).
#[allow(clippy::too_many_arguments)]
pub fn record_moe_join(rec: &mut Recorder, routed: &Buf, slot_map: &Buf, ids: &Buf, shared: &Buf, y: &Buf, m: usize, d: usize, k: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * d);
    let args = [Arg::Whole(routed), Arg::Whole(slot_map), Arg::Whole(ids), Arg::Whole(shared), Arg::Whole(y)];
    rec.dispatch(&key(MOE_JOIN, control, &[]), &[m as u32, d as u32, k as u32, g[0]], &args, g)
}

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

/// Routes one row of gate logits `z` [n_experts] (f32): (expert ids in pick order, weights). Canonical order (sums and differences flushed): s = func(mul_rn(z, inv_temp)) (softmax: max from f32::MIN, a zero +0, exp(z - max) times recip of the canonical sum); picks = top-k of (s + bias) by (value desc, index asc); w_k = div(s[pick_k], canonical_sum over picks in pick order + 1e-20) when normalizing; w_k = mul_rn(w_k, route_scale).
pub fn route_row(z: &[f32], bias: &[f32], p: &RouteParams) -> (Vec<u32>, Vec<f32>) {
    let n = z.len();
    let zt: Vec<f32> = match p.inv_temp {
        Some(t) => z.iter().map(|&v| mul_rn(v, t)).collect(),
        None => z.to_vec(),
    };
    let s: Vec<f32> = match p.func {
        ScoreFunc::SqrtSoftplus => zt.iter().map(|&v| sqrt(softplus(v))).collect(),
        ScoreFunc::Sigmoid => zt.iter().map(|&v| sigmoid(v)).collect(),
        ScoreFunc::Softmax => {
            let mx = zt.iter().fold(f32::MIN, |a, &v| max(a, v));
            let r = recip(canonical_sum(n, |i| exp(sub(zt[i], mx)), |_| 1.0));
            zt.iter().map(|&v| mul_rn(exp(sub(v, mx)), r)).collect()
        }
    };
    let biased: Vec<f32> = s.iter().zip(bias).map(|(&a, &b)| add(a, b)).collect();
    let (idx, _) = topk(&biased, n, p.k.min(n));
    let mut w: Vec<f32> = idx.iter().map(|&i| s[i as usize]).collect();
    if p.normalize && w.len() > 1 {
        let denom = canonical_sum(w.len(), |i| w[i], |_| 1.0) + 1e-20;
        w.iter_mut().for_each(|v| *v = div(*v, denom));
    }
    w.iter_mut().for_each(|v| *v = mul_rn(*v, p.route_scale));
    (idx, w)
}

/// Join order of one row (the reference's `y[idx] += expert(x[idx])` loop): routed outputs added to +0.0 by ascending expert id, then the shared output; rounded to bf16 by the caller.
pub fn join_row(routed: &[(u32, &[f32])], shared: &[f32]) -> Vec<f32> {
    let mut order: Vec<&(u32, &[f32])> = routed.iter().collect();
    order.sort_by_key(|(e, _)| *e);
    let mut y = vec![0.0f32; shared.len()];
    for (_, o) in order {
        y.iter_mut().zip(o.iter()).for_each(|(a, &b)| *a = add(*a, b));
    }
    y.iter_mut().zip(shared).for_each(|(a, &b)| *a = add(*a, b));
    y
}

/// The packed layout of one call's routed rows: experts ascending, each expert's rows ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutePack {
    /// Source row of each packed row (gather_rows' index list for x).
    pub rows: Vec<u32>,
    /// Flat (row * k + pick) of each packed row (gather_rows' index list for the weights viewed as [m*k, 1]).
    pub picks: Vec<u32>,
    /// Packed row of each (row, pick), row-major [m, k] (moe_join's slot map).
    pub slot_map: Vec<u32>,
    /// (expert id, first packed row, packed rows) of each expert used, ascending.
    pub experts: Vec<(u32, usize, usize)>,
}

/// Packs moe_route's ids [m, k] (f32 expert ids in pick order) into the layout the expert GEMMs and moe_join read.
pub fn pack_routes(ids: &[f32], k: usize) -> RoutePack {
    let mut order: Vec<(u32, u32)> = ids.iter().enumerate().map(|(s, &e)| (e as u32, s as u32)).collect();
    order.sort_unstable();
    let mut pack = RoutePack { rows: Vec::new(), picks: Vec::new(), slot_map: vec![0; ids.len()], experts: Vec::new() };
    for (p, &(e, s)) in order.iter().enumerate() {
        pack.rows.push(s / k.max(1) as u32);
        pack.picks.push(s);
        pack.slot_map[s as usize] = p as u32;
        match pack.experts.last_mut() {
            Some(last) if last.0 == e => last.2 += 1,
            _ => pack.experts.push((e, p, 1)),
        }
    }
    pack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_groups_rows_by_ascending_expert_and_maps_every_pick_back() {
        let ids = [5.0, 1.0, 1.0, 7.0, 5.0, 0.0];
        let p = pack_routes(&ids, 2);
        assert_eq!(p.experts, vec![(0, 0, 1), (1, 1, 2), (5, 3, 2), (7, 5, 1)]);
        assert_eq!(p.rows, vec![2, 0, 1, 0, 2, 1]);
        for (s, &slot) in p.slot_map.iter().enumerate() {
            assert_eq!(p.picks[slot as usize] as usize, s);
        }
    }
}
