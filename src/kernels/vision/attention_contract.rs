//! Contract registration of the vision tower's bidirectional attention (`case.n` = keys, `case.k` = heads | dim << 16).
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Lang, Recorder};
use crate::kernels::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, tiny, words, TERM, U};
use crate::kernels::vision::{self, VitDims};
use crate::numerics::round_bf16;

/// Registration of `vit_attention`.
pub struct VitAttentionKernel;

/// The registered instance.
pub static VIT_ATTENTION_KERNEL: VitAttentionKernel = VitAttentionKernel;

fn dims(case: &Case) -> VitDims {
    let dim = case.k >> 16;
    VitDims { rows: case.rows, keys: case.n, heads: case.k & 0xffff, dim, scale: (1.0 / (dim as f64).sqrt()) as f32 }
}

fn shape(label: &str, rows: usize, keys: usize, heads: usize, dim: usize) -> Case {
    Case::new(&format!("{label} {rows} rows x {keys} keys, {heads}x{dim}"), rows, keys, heads | dim << 16)
}

impl Kernel for VitAttentionKernel {
    fn name(&self) -> &'static str {
        "vit_attention"
    }
    fn variants(&self) -> &'static [Variant] {
        const { &[Variant::new("ref", &[vision::VIT_ATTENTION]), Variant::new("msl_simd", &[vision::VIT_ATTENTION_MSL])] }
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            shape("vit 1024x701", if quick { 2 } else { 6 }, 3774, 16, 64),
            shape("vit segments", 5, 300, 16, 64),
            shape("tiny", 16, 64, 2, 32),
            shape("awkward", 5, 37, 3, 40),
            shape("one key", 1, 1, 2, 16),
            shape("edge", 4, 70, 4, 32).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let d = dims(case);
        let width = d.heads * d.dim;
        let q: Vec<f32> = (0..d.rows * width)
            .map(|i| {
                let h = i % width / d.dim;
                match (case.edge, h % 4) {
                    (true, 0) => 0.0,
                    (true, 1) => round_bf16(rng.normal() * 64.0),
                    (true, 2) if i % 3 == 0 => -0.0,
                    _ => round_bf16(rng.normal() * [0.5f32, 1.0, 2.0, 4.0][h % 4]),
                }
            })
            .collect();
        let rows = |rng: &mut Rng, s: f32| -> Vec<f32> {
            (0..d.keys * width)
                .map(|i| match (case.edge, (i / width) % 5) {
                    (true, 0) => if i % 2 == 0 { 0.0 } else { -0.0 },
                    (true, _) if i % d.dim % 7 == 3 => tiny(rng, -126, -100),
                    (true, 1) => round_bf16(rng.normal() * 448.0),
                    _ => round_bf16(rng.normal() * s),
                })
                .collect()
        };
        let (k, v) = (rows(rng, 1.0), rows(rng, 1.0));
        Inputs { data: vec![Data::rows_f32(&q, width), Data::shared(bytemuck::cast_slice(&k).to_vec()), Data::shared(bytemuck::cast_slice(&v).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        let d = dims(case);
        vec![d.heads * d.dim]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let d = dims(case);
        let width = d.heads * d.dim;
        let (q, k, v) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s());
        let o: Vec<f32> = (0..d.rows).flat_map(|r| vision::attend_all(&q[r * width..(r + 1) * width], &k, &v, d.heads, d.dim, d.scale)).collect();
        vec![words(&o)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        reference_and_bound(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        reference_and_bound(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let d = dims(case);
        let (q, k, v) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?, gpu.upload(&inputs.data[2].bytes)?);
        let n = d.rows * d.heads * d.dim;
        let o = poisoned(gpu, n)?;
        let mut rec = Recorder::new(gpu);
        vision::record_vit_attention(&mut rec, &q, &k, &v, &o, &d, variant.lang(), control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&o, n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last key"),
            Control::fusion(2, "weight values without mul_rn"),
            Control::new(3, "skip the score scale"),
            Control::new(4, "leave one output unwritten"),
            Control::new(5, "add one to the denominator"),
            Control::fusion(6, "score products without mul_rn"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, variant: &Variant) -> Footprint {
        let workgroup_bytes = if variant.lang() == Lang::Msl { 1024 * 2 + 32 + 8192 } else { 1024 * 3 + 8192 };
        Footprint { workgroup_size: 256, workgroup_bytes, bindings: 4 }
    }
}

/// The f64 attention of every row and its bound: the sparse attention's error analysis (kernels::attention::contract) without a sink.
fn reference_and_bound(case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    let d = dims(case);
    let width = d.heads * d.dim;
    let (q, k, v) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s());
    let scale = f64::from(d.scale);
    let n = d.keys;
    let (gd, gn) = (gamma(canonical_depth(d.dim)), gamma(canonical_depth(n) + 1));
    let (mut refs, mut bounds) = (Vec::new(), Vec::new());
    for r in 0..d.rows {
        for h in 0..d.heads {
            let qh = &q[r * width + h * d.dim..r * width + (h + 1) * d.dim];
            let dots: Vec<(f64, f64)> = (0..n)
                .map(|j| {
                    let kj = &k[j * width + h * d.dim..j * width + (h + 1) * d.dim];
                    qh.iter().zip(kj).fold((0.0, 0.0), |(s, a), (&x, &y)| (s + f64::from(x) * f64::from(y), a + (f64::from(x) * f64::from(y)).abs()))
                })
                .collect();
            let s: Vec<f64> = dots.iter().map(|t| t.0 * scale).collect();
            let ds: Vec<f64> = dots.iter().zip(&s).map(|(t, sv)| gd * t.1 * scale + U * sv.abs() + d.dim as f64 * TERM * scale).collect();
            let m = s.iter().fold(-1e30f64, |a, &x| a.max(x));
            let dmax = ds.iter().fold(0.0f64, |a, &x| a.max(x));
            let e_arg = s.iter().zip(&ds).map(|(sv, t)| t + U * (sv - m).abs()).fold(0.0, f64::max);
            let e = (e_arg + dmax + 4.0 * U) * 1.01;
            let p: Vec<f64> = s.iter().map(|sv| (sv - m).exp()).collect();
            let den: f64 = p.iter().sum();
            for i in 0..d.dim {
                let vi = |j: usize| f64::from(v[j * width + h * d.dim + i]);
                let num: f64 = (0..n).map(|j| p[j] * vi(j)).sum();
                let abs: f64 = (0..n).map(|j| p[j] * vi(j).abs()).sum();
                let vmax = (0..n).fold(0.0f64, |a, j| a.max(vi(j).abs()));
                let o = num / den;
                let f32_err = ((abs / den) * (e + U + gn) + o.abs() * (e + gn) + 4.0 * U * o.abs()) * 1.02 + n as f64 * (vmax * 2f64.powi(-126) + TERM) / den;
                refs.push(o);
                bounds.push(f32_err + (o.abs() + f32_err) / 256.0 + 1e-37);
            }
        }
    }
    (refs, bounds)
}
