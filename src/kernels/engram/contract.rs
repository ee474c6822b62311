//! Contract registration of the engram gate (`case.n` = d, `case.k` = hc); inputs h, kv, q_weight, k_weight, live.
use crate::kernels::engram::{self, EngramGate};
use crate::kernels::util::{canonical_depth, f64s, gamma, run_uploaded, tiny, words, FLUSH, U};
use crate::kernels::hc::stream_contract::{stream_rows, BF16_HALF};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError};
use crate::numerics::round_bf16;

/// Engram gate registration.
pub struct EngramKernel;

const EPS: f32 = 1e-20;
const FLOOR: f32 = 1e-6;

fn params(case: &Case) -> EngramGate {
    EngramGate { hc: case.k, d: case.n, eps: EPS }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Per (row, stream): the f64 gate and a bound on the f32 gate's error.
fn gates(case: &Case, inputs: &Inputs) -> Vec<(f64, f64)> {
    let p = params(case);
    let (hc, d) = (p.hc, p.d);
    let f: Vec<Vec<f64>> = inputs.data[..4].iter().map(|x| x.f32s().iter().map(|&v| f64::from(v)).collect()).collect();
    let live = &inputs.data[4].bytes;
    let depth = canonical_depth(d);
    let rel = gamma(depth + 2) + 13.0 * U;
    let (eps, floor) = (f64::from(EPS), f64::from(FLOOR));
    let mut out = Vec::with_capacity(case.rows * hc);
    for r in 0..case.rows {
        for c in 0..hc {
            let hs = &f[0][(r * hc + c) * d..(r * hc + c + 1) * d];
            let ks = &f[1][(r * (hc + 1) + c) * d..(r * (hc + 1) + c + 1) * d];
            let w: Vec<f64> = (0..d).map(|i| f[2][c * d + i] * f[3][c * d + i]).collect();
            let ms = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>() / d as f64;
            let scale = 1.0 / (ms(hs) + eps).sqrt() / (ms(ks) + eps).sqrt() / (d as f64).sqrt();
            let dot = (0..d).map(|i| hs[i] * w[i] * ks[i]).sum::<f64>() * scale;
            let abs_terms = (0..d).map(|i| (hs[i] * w[i] * ks[i]).abs()).sum::<f64>() * scale;
            let kmax = ks.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            let dd = 1.01 * (gamma(depth) * abs_terms * (1.0 + rel) + dot.abs() * rel) + d as f64 * FLUSH * (2.0 + kmax) * scale;
            let root = dot.abs().max(floor).sqrt();
            let (lo, hi) = (((dot.abs() - dd).max(floor)).sqrt(), (dot.abs() + dd).max(floor).sqrt());
            let g = sigmoid(if dot < 0.0 { -root } else { root });
            let mut dg = 0.25 * (hi - lo + 4.0 * U * hi) + 4.0 * U * g;
            if dot.abs() <= dd {
                dg += sigmoid(hi) - sigmoid(-hi);
            }
            let is_live = live[r * 4..r * 4 + 4] != [0, 0, 0, 0];
            out.push(if is_live { (g, dg) } else { (0.0, 0.0) });
        }
    }
    out
}

impl Kernel for EngramKernel {
    fn name(&self) -> &'static str {
        "engram_gate"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::engram::ENGRAM_GATE])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 32 };
        let many = if quick { 40 } else { 400 };
        vec![
            Case::new("hidden 4x5120", r, 5120, 4),
            Case::new("tiny 4x64", 9, 64, 4),
            Case::new("awkward 3x100", 3, 100, 3),
            Case::new("one row 4x5120", 1, 5120, 4),
            Case::new("many rows 4x64", many, 64, 4),
            Case::new("edge 4x96", 4, 96, 4).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (hc, d) = (case.k, case.n);
        let mut h = stream_rows(rng, case.rows, hc * d, false);
        let mut kv: Vec<f32> = (0..case.rows * (hc + 1) * d).map(|_| rng.normal()).collect();
        let q: Vec<f32> = (0..hc * d).map(|_| round_bf16(1.0 + 0.1 * rng.normal())).collect();
        let k: Vec<f32> = (0..hc * d).map(|_| round_bf16(1.0 + 0.1 * rng.normal())).collect();
        let live: Vec<u32> = (0..case.rows).map(|r| u32::from(r % 3 != 1)).collect();
        if case.edge {
            h[..d].fill(0.0);
            kv[(hc + 1) * d + d..(hc + 1) * d + 2 * d].fill(0.0);
            h[2 * hc * d + 2 * d..2 * hc * d + 3 * d].copy_from_slice(&kv[2 * (hc + 1) * d + 2 * d..2 * (hc + 1) * d + 3 * d].iter().map(|&v| round_bf16(v)).collect::<Vec<_>>());
            h[3 * hc * d..3 * hc * d + 8].copy_from_slice(&[-0.0, 65280.0, -65280.0, 1e-20, 0.0, -0.0, 3.0, -3.0]);
            // The last row: streams and values near 2^-126, so squares, products and the gated sums fall below it.
            let last = case.rows - 1;
            h[last * hc * d..(last + 1) * hc * d].iter_mut().for_each(|v| *v = tiny(rng, -126, -118));
            kv[(last * (hc + 1) + hc) * d..(last + 1) * (hc + 1) * d].iter_mut().for_each(|v| *v = tiny(rng, -126, -112));
        }
        Inputs {
            data: vec![
                Data::rows_f32(&h, hc * d),
                Data::rows_f32(&kv, (hc + 1) * d),
                Data::shared(bytemuck::cast_slice(&q).to_vec()),
                Data::shared(bytemuck::cast_slice(&k).to_vec()),
                Data { bytes: bytemuck::cast_slice(&live).to_vec(), row_bytes: Some(4) },
            ],
        }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.k * case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let p = params(case);
        let (hc, d) = (p.hc, p.d);
        let f: Vec<Vec<f32>> = inputs.data[..4].iter().map(|x| x.f32s()).collect();
        let live = &inputs.data[4].bytes;
        let w = engram::gate_weight(&f[2], &f[3]);
        let mut y = Vec::with_capacity(case.rows * hc * d);
        for r in 0..case.rows {
            let is_live = live[r * 4..r * 4 + 4] != [0, 0, 0, 0];
            y.extend(engram::gate_row(&f[0][r * hc * d..(r + 1) * hc * d], &f[1][r * (hc + 1) * d..(r + 1) * (hc + 1) * d], &w, &p, is_live));
        }
        vec![words(&y)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.outputs(case, inputs).into_iter().map(|(v, _)| v).collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        self.outputs(case, inputs).into_iter().map(|(_, b)| b).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = params(case);
        let n = case.rows * p.hc * p.d;
        run_uploaded(gpu, inputs, &[n], |rec, b, y| engram::record_engram_gate(rec, &b[0], &b[1], &b[2], &b[3], &b[4], &y[0], case.rows, &p, control))
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last block of the sums"),
            Control::fusion(3, "products fused into the sums"),
            Control::new(4, "read the next row's keys and value"),
            Control::new(5, "leave the last output unwritten"),
            Control::new(6, "ignore the live flag"),
            Control::new(7, "drop the sign of the dot"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: 768 * 4 + 4, bindings: 6 }
    }
}

impl EngramKernel {
    /// Per output: the f64 value h + g v and its bound.
    fn outputs(&self, case: &Case, inputs: &Inputs) -> Vec<(f64, f64)> {
        let (hc, d) = (case.k, case.n);
        let (h, kv) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let g = gates(case, inputs);
        let mut out = Vec::with_capacity(h.len());
        for r in 0..case.rows {
            for c in 0..hc {
                let (gv, dg) = g[r * hc + c];
                for i in 0..d {
                    let (hv, v) = (f64::from(h[(r * hc + c) * d + i]), f64::from(kv[(r * (hc + 1) + hc) * d + i]));
                    let val = hv + gv * v;
                    let e = dg * v.abs() + U * (gv * v).abs() + U * (hv.abs() + (gv * v).abs()) + 2.0 * FLUSH;
                    out.push((val, e + BF16_HALF * (val.abs() + e)));
                }
            }
        }
        out
    }
}

static ENGRAM: EngramKernel = EngramKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&ENGRAM]
}

