//! Contract registrations of the MoE family: the router and the join (row gathers and the embedding in moe_rows_contract.rs).
use crate::kernels::moe::{self, RouteParams, ScoreFunc};
use crate::kernels::util::{rows_u32, u32s, bf16_normal, canonical_depth, f64s, gamma, run_uploaded, tiny, words, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError};
use crate::numerics::round_bf16;

static MOE_ROUTE: MoeRouteKernel = MoeRouteKernel;
static MOE_JOIN: MoeJoinKernel = MoeJoinKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&MOE_ROUTE, &MOE_JOIN]
}


/// Router registration: `case.n` experts, `case.k` = picks | func << 8 | temperature << 12 | normalize << 13.
pub struct MoeRouteKernel;

fn route_case(label: &str, rows: usize, experts: usize, k: usize, func: u32, temp: bool, normalize: bool) -> Case {
    Case::new(label, rows, experts, k | (func as usize) << 8 | usize::from(temp) << 12 | usize::from(normalize) << 13)
}

fn route_params(case: &Case) -> RouteParams {
    let func = match (case.k >> 8) & 3 {
        0 => ScoreFunc::SqrtSoftplus,
        1 => ScoreFunc::Sigmoid,
        _ => ScoreFunc::Softmax,
    };
    let normalize = (case.k >> 13) & 1 == 1;
    RouteParams {
        k: case.k & 0xff,
        func,
        inv_temp: ((case.k >> 12) & 1 == 1).then_some((1.0f64 / 1.5) as f32),
        normalize,
        route_scale: if normalize { 1.5 } else { 2.5 },
    }
}

impl MoeRouteKernel {
    /// Scores in f64 and each score's relative error bound.
    fn scores(&self, p: &RouteParams, z: &[f32]) -> (Vec<f64>, Vec<f64>) {
        let t = p.inv_temp.map_or(1.0, f64::from);
        let tu = if p.inv_temp.is_some() { U } else { 0.0 };
        let x: Vec<f64> = z.iter().map(|&v| f64::from(v) * t).collect();
        match p.func {
            ScoreFunc::SqrtSoftplus => x
                .iter()
                .map(|&v| {
                    let sp = if v > 30.0 { v + (-v).exp().ln_1p() } else { v.exp().ln_1p() };
                    (sp.sqrt(), 0.5 * (v.abs().max(1.0) * tu + 4.0 * U) + 4.0 * U)
                })
                .unzip(),
            ScoreFunc::Sigmoid => x.iter().map(|&v| (1.0 / (1.0 + (-v).exp()), v.abs() * tu + 4.0 * U)).unzip(),
            ScoreFunc::Softmax => {
                let mx = x.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = x.iter().map(|&v| (v - mx).exp()).collect();
                let total: f64 = e.iter().sum();
                let arg: Vec<f64> = x.iter().map(|&v| 1.01 * (U * (v - mx).abs() + tu * (v.abs() + mx.abs()))).collect();
                let worst = arg.iter().copied().fold(0.0, f64::max);
                let rel = gamma(canonical_depth(x.len())) + 14.0 * U;
                e.iter().zip(&arg).map(|(&ei, &a)| (ei / total, a + worst + rel)).unzip()
            }
        }
    }

    /// (reference, bound): ids of every row, then weights of every row.
    fn reference_and_bound(&self, case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let p = route_params(case);
        let (e, k) = (case.n, p.k);
        let (z, bias, bias_vl, image) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s(), u32s(&inputs.data[3]));
        let (mut ids, mut idb, mut w, mut wb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..case.rows {
            let zr = &z[i * e..(i + 1) * e];
            let b = if image[i] != 0 { &bias_vl } else { &bias };
            let (s, rel) = self.scores(&p, zr);
            let biased: Vec<f64> = s.iter().zip(b.iter()).map(|(&a, &c)| a + f64::from(c)).collect();
            let mut order: Vec<usize> = (0..e).collect();
            order.sort_by(|&a, &c| biased[c].total_cmp(&biased[a]).then(a.cmp(&c)));
            let near = |a: usize, c: usize| {
                let gap = (biased[a] - biased[c]).abs();
                let same = zr[a] == zr[c] && b[a] == b[c];
                !same && gap <= 1e-4 * (biased[a].abs() + biased[c].abs()) + 1e-30
            };
            let ambiguous = (0..k.min(e - 1)).any(|j| near(order[j], order[j + 1]));
            let picks = &order[..k];
            let sum: f64 = picks.iter().map(|&j| s[j]).sum();
            let worst = picks.iter().map(|&j| rel[j]).fold(0.0, f64::max);
            for &j in picks {
                let (v, r) = if p.normalize && k > 1 { (s[j] / (sum + 1e-20), rel[j] + worst + gamma(k + 1) + 4.0 * U) } else { (s[j], rel[j]) };
                ids.push(j as f64);
                idb.push(if ambiguous { f64::INFINITY } else { 0.0 });
                w.push(v * f64::from(p.route_scale));
                wb.push(if ambiguous { f64::INFINITY } else { 1.01 * (r + U) * v.abs() * f64::from(p.route_scale) + 1e-37 });
            }
        }
        ids.extend(w);
        idb.extend(wb);
        (ids, idb)
    }
}

/// The first half of the experts in pairs with equal logits and biases, so exact ties reach the picks.
fn tie_pairs(z: &mut [f32], bias: &mut [f32], e: usize) {
    for j in (0..e / 2).step_by(2) {
        bias[j + 1] = bias[j];
        z.chunks_mut(e).for_each(|row| row[j + 1] = row[j]);
    }
}

impl Kernel for MoeRouteKernel {
    fn name(&self) -> &'static str {
        "moe_route"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::moe::MOE_ROUTE])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 6 } else { 64 };
        vec![
            route_case("release 384 experts top-6 sqrtsoftplus", r, 384, 6, 0, false, true),
            route_case("softmax 64 experts top-4 with temperature, unnormalized", 5, 64, 4, 2, true, false),
            route_case("dspark 128 experts top-3", 5, 128, 3, 0, false, true),
            route_case("tiny 8 experts top-2", 9, 8, 2, 0, false, true),
            route_case("sigmoid 256 experts top-8 with temperature", 3, 256, 8, 1, true, true),
            route_case("awkward 1000 experts top-32", 2, 1000, 32, 0, true, true),
            route_case("awkward 1 expert top-1", 2, 1, 1, 0, false, true),
            route_case("edge 384 experts top-6 tied", 4, 384, 6, 0, false, true).edge(),
            route_case("edge sigmoid 16 experts top-4 near 2^-126", 3, 16, 4, 1, false, true).edge(),
            route_case("edge softmax 8 experts top-2 over zeros of both signs", 3, 8, 2, 2, false, true).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let e = case.n;
        let z: Vec<f32> = (0..case.rows * e).map(|_| if case.edge { [0.0, -0.0, 1.0][rng.below(3) as usize] } else { rng.normal() * 3.0 }).collect();
        let bias = |rng: &mut Rng| -> Vec<f32> { (0..e).map(|_| if case.edge { 0.0 } else { rng.normal() * 0.1 }).collect() };
        let (mut b, vl) = (bias(rng), bias(rng));
        let mut z = z;
        if !case.edge {
            tie_pairs(&mut z, &mut b, e);
        }
        if case.edge && route_params(case).func == ScoreFunc::Sigmoid {
            // Every fourth expert scores just above 2^-126 and its bias takes it below; the others score 0: the flush decides the picks.
            for (i, v) in z.iter_mut().enumerate() {
                *v = if i % 4 == 0 { -87.0 - 0.2 * rng.uniform(0.0, 1.0) } else { -100.0 };
            }
            b.iter_mut().enumerate().for_each(|(j, v)| *v = if j % 4 == 0 { -f32::MIN_POSITIVE } else { 0.0 });
        }
        let image: Vec<u32> = (0..case.rows as u32).map(|i| i % 2).collect();
        Inputs {
            data: vec![Data::rows_f32(&z, e), Data::shared(bytemuck::cast_slice(&b).to_vec()), Data::shared(bytemuck::cast_slice(&vl).to_vec()), rows_u32(&image, 1)],
        }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        let k = route_params(case).k;
        vec![k, k]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let p = route_params(case);
        let (z, bias, bias_vl, image) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s(), u32s(&inputs.data[3]));
        let (mut ids, mut w) = (Vec::new(), Vec::new());
        for (i, zr) in z.chunks(case.n).enumerate() {
            let (ri, rw) = moe::route_row(zr, if image[i] != 0 { &bias_vl } else { &bias }, &p);
            ids.extend(ri.iter().map(|&v| v as f32));
            w.extend(rw);
        }
        vec![words(&ids), words(&w)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.reference_and_bound(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        self.reference_and_bound(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        let mut v = f64s(&outputs[0]);
        v.extend(f64s(&outputs[1]));
        v
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = route_params(case);
        let (m, e) = (case.rows, case.n);
        run_uploaded(gpu, inputs, &[m * p.k, m * p.k], |rec, b, o| moe::record_moe_route(rec, &b[0], &b[1], &b[2], &b[3], &o[0], &o[1], m, e, &p, control))
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "break ties to the higher index"),
            Control::new(2, "route image rows with bias"),
            Control::new(3, "drop the route scale"),
            Control::new(4, "leave the last weight unwritten"),
            Control::new(5, "skip the last pick in the denominator"),
            Control::new(6, "route from the next row's logits"),
            Control::fusion(7, "softmax probability times recip without mul_rn before the bias add"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: 4096 * 2 + 1024 * 2 + 128 + 8, bindings: 6 }
    }
}

/// Join registration: `case.n` = d, `case.k` = picks | experts << 8.
pub struct MoeJoinKernel;

fn join_dims(case: &Case) -> (usize, usize) {
    (case.k & 0xff, case.k >> 8)
}

impl Kernel for MoeJoinKernel {
    fn name(&self) -> &'static str {
        "moe_join"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::moe::MOE_JOIN])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 32 };
        vec![
            Case::new("release 5120 top-6 of 384", r, 5120, 6 | 384 << 8),
            Case::new("tiny 64 top-2 of 8", 9, 64, 2 | 8 << 8),
            Case::new("dspark 1024 top-3 of 128", 4, 1024, 3 | 128 << 8),
            Case::new("awkward 33 top-1 of 4", 2, 33, 1 | 4 << 8),
            Case::new("awkward 1 row 100 top-5 of 16", 1, 100, 5 | 16 << 8),
            Case::new("edge 256 top-6 of 384", 3, 256, 6 | 384 << 8).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (k, experts) = join_dims(case);
        let (m, d) = (case.rows, case.n);
        let mut ids = Vec::with_capacity(m * k);
        for _ in 0..m {
            let mut row: Vec<u32> = Vec::with_capacity(k);
            while row.len() < k {
                let e = rng.below(experts as u64) as u32;
                if !row.contains(&e) {
                    row.push(e);
                }
            }
            ids.extend(row);
        }
        let idf: Vec<f32> = ids.iter().map(|&e| e as f32).collect();
        let map = moe::pack_routes(&idf, k).slot_map;
        let value = |rng: &mut Rng| if case.edge { [0.0, -0.0, 1.0, -1.0, 0.00390625, tiny(rng, -126, -124)][rng.below(6) as usize] } else { bf16_normal(rng, 0.05) };
        let mut routed: Vec<f32> = (0..m * k * d).map(|_| value(rng)).collect();
        if !case.edge && k > 1 {
            cancel_extremes(&mut routed, &ids, &map, k, d);
        }
        let mut shared: Vec<f32> = (0..m * d).map(|_| value(rng)).collect();
        if case.edge {
            // The last row's routed and shared outputs are all within 2^-125 of zero: their sums cancel below 2^-126.
            let last = m - 1;
            for j in 0..k {
                let r = map[last * k + j] as usize;
                routed[r * d..(r + 1) * d].iter_mut().for_each(|v| *v = tiny(rng, -126, -126));
            }
            shared[last * d..].iter_mut().for_each(|v| *v = tiny(rng, -126, -126));
        }
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&routed).to_vec()), rows_u32(&map, k), Data::rows_f32(&idf, k), Data::rows_f32(&shared, d)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (k, _) = join_dims(case);
        let d = case.n;
        let (routed, map, ids, shared) = (inputs.data[0].f32s(), u32s(&inputs.data[1]), inputs.data[2].f32s(), inputs.data[3].f32s());
        let mut out = Vec::with_capacity(case.rows * d);
        for i in 0..case.rows {
            let parts: Vec<(u32, &[f32])> = (0..k).map(|j| (ids[i * k + j] as u32, &routed[map[i * k + j] as usize * d..(map[i * k + j] as usize + 1) * d])).collect();
            out.extend(moe::join_row(&parts, &shared[i * d..(i + 1) * d]).into_iter().map(round_bf16));
        }
        vec![words(&out)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.reference_and_bound(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        self.reference_and_bound(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (k, _) = join_dims(case);
        let (m, d) = (case.rows, case.n);
        run_uploaded(gpu, inputs, &[m * d], |rec, b, y| moe::record_moe_join(rec, &b[0], &b[1], &b[2], &b[3], &y[0], m, d, k, control))
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "add routed outputs in pick order"),
            Control::new(2, "skip the last routed output"),
            Control::new(3, "leave the last output unwritten"),
            Control::new(4, "skip the bf16 rounding"),
            Control::new(5, "read the next row's packed rows"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 5 }
    }
}

/// On even rows the lowest expert's output is 2^16 times a value and the highest's its negation: exact when they meet first, visible in any other order.
fn cancel_extremes(routed: &mut [f32], ids: &[u32], map: &[u32], k: usize, d: usize) {
    for i in (0..ids.len() / k).step_by(2) {
        let row = &ids[i * k..(i + 1) * k];
        let lo = (0..k).min_by_key(|&j| row[j]).unwrap_or(0);
        let hi = (0..k).max_by_key(|&j| row[j]).unwrap_or(0);
        let (plo, phi) = (map[i * k + lo] as usize * d, map[i * k + hi] as usize * d);
        for c in 0..d {
            routed[plo + c] *= 65536.0;
            routed[phi + c] = -routed[plo + c];
        }
    }
}

impl MoeJoinKernel {
    /// (reference, bound): the exact sum of the routed and shared outputs, within the f32 sum error and one bf16 rounding.
    fn reference_and_bound(&self, case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let (k, _) = join_dims(case);
        let d = case.n;
        let (routed, map, shared) = (inputs.data[0].f32s(), u32s(&inputs.data[1]), inputs.data[3].f32s());
        let g = gamma(k + 1);
        let (mut r, mut b) = (Vec::new(), Vec::new());
        for i in 0..case.rows {
            for c in 0..d {
                let terms: Vec<f64> = (0..k).map(|j| f64::from(routed[map[i * k + j] as usize * d + c])).chain([f64::from(shared[i * d + c])]).collect();
                let exact: f64 = terms.iter().sum();
                let mag: f64 = terms.iter().map(|t| t.abs()).sum();
                r.push(exact);
                b.push(1.001 * (g * mag * (1.0 + 1.0 / 256.0) + exact.abs() / 256.0) + 1e-37);
            }
        }
        (r, b)
    }
}
