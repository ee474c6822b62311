//! Contract registrations of softmax, argmax and top-k.
use crate::kernels::ops;
use crate::kernels::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, words, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::numerics::round_bf16;

/// Row softmax registration (`case.k` holds the scale's bits).
pub struct SoftmaxKernel;

fn scale_of(case: &Case) -> f32 {
    f32::from_bits(case.k as u32)
}

impl Kernel for SoftmaxKernel {
    fn in_forward(&self) -> bool {
        false
    }
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::ops::SOFTMAX])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 64 };
        let attn = (1.0f64 / 512f64.sqrt()) as f32;
        vec![
            Case::new("vocab 129280", 4, 129_280, 1f32.to_bits() as usize),
            Case::new("attention 640", r, 640, attn.to_bits() as usize),
            Case::new("attention 300", 5, 300, attn.to_bits() as usize),
            Case::new("router 384", 4, 384, 1f32.to_bits() as usize),
            Case::new("sinkhorn 4", 9, 4, 1f32.to_bits() as usize),
            Case::new("awkward 33", 3, 33, 0.7f32.to_bits() as usize),
            Case::new("awkward 1", 2, 1, 1f32.to_bits() as usize),
            Case::new("edge 64", 4, 64, 1f32.to_bits() as usize).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let mut x: Vec<f32> = (0..case.rows * case.n).map(|_| rng.normal() * 6.0).collect();
        if case.edge {
            // Two maxima, +0 and -0, halve the weights; e^x near 2^-126 for x near -87.2 then falls below it; tiny entries give tiny differences.
            for (i, v) in x.iter_mut().enumerate() {
                *v = match i % case.n {
                    0 => 0.0,
                    1 => -0.0,
                    j if j % 3 == 0 => -87.0 - 0.3 * rng.uniform(0.0, 1.0),
                    j if j % 3 == 1 => crate::kernels::util::tiny(rng, -126, -100),
                    _ => -20.0 * rng.uniform(0.0, 1.0),
                };
            }
        }
        Inputs { data: vec![Data::rows_f32(&x, case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&ops::softmax(&inputs.data[0].f32s(), case.n, scale_of(case)))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let s = f64::from(scale_of(case));
        let mut out = Vec::new();
        for row in inputs.data[0].f32s().chunks(case.n) {
            let mx = row.iter().fold(f64::MIN, |a, &v| a.max(f64::from(v) * s));
            let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) * s - mx).exp()).collect();
            let t: f64 = e.iter().sum();
            out.extend(e.iter().map(|v| v / t));
        }
        out
    }
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let s = f64::from(scale_of(case));
        let mut out = Vec::new();
        for (row, r) in inputs.data[0].f32s().chunks(case.n).zip(reference.chunks(case.n)) {
            let mx = row.iter().fold(0.0f64, |a, &v| a.max((f64::from(v) * s).abs()));
            let arg = |v: f32| 2.0 * U * ((f64::from(v) * s).abs() + mx) * 1.01;
            let worst = row.iter().map(|&v| arg(v)).fold(0.0, f64::max);
            out.extend(row.iter().zip(r).map(|(&v, &y)| y * (arg(v) + worst + gamma(canonical_depth(case.n)) + 14.0 * U) + 1e-37));
        }
        out
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, d) = (case.rows, case.n);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let y = poisoned(gpu, m * d)?;
        let mut rec = Recorder::new(gpu);
        ops::record_softmax(&mut rec, &x, &y, m, d, scale_of(case), control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * d)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last block of the denominator"),
            Control::new(2, "reverse the segment order"),
            Control::fusion(3, "scale and subtract the max without mul_rn"),
            Control::new(4, "take the max from the next row"),
            Control::new(5, "leave one output unwritten"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: 4096 + 1024 + 4, bindings: 2 }
    }
}

/// Argmax (k = 1) and top-k registrations; `case.k` is k.
pub struct SelectKernel {
    pub name: &'static str,
    pub argmax: bool,
}

impl Kernel for SelectKernel {
    fn in_forward(&self) -> bool {
        false
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 2] = [&[Variant::new("ref", &[crate::kernels::ops::ARGMAX])], &[Variant::new("ref", &[crate::kernels::ops::SELECT])]];
        if self.argmax { V[0] } else { V[1] }
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 2 } else { 16 };
        if self.argmax {
            vec![Case::new("vocab 129280", r, 129_280, 1), Case::new("router 384", 5, 384, 1), Case::new("awkward 17", 3, 17, 1), Case::new("awkward 1", 2, 1, 1)]
        } else {
            vec![
                Case::new("router 384 top-6", 5, 384, 6),
                Case::new("indexer 2048 top-512", r, 2048, if quick { 64 } else { 512 }),
                Case::new("candidates 640 top-64", 3, 640, 64),
                Case::new("tiny 8 top-2", 9, 8, 2),
                Case::new("awkward 33 top-33", 2, 33, 33),
            ]
        }
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let x: Vec<f32> = (0..case.rows * case.n).map(|_| round_bf16(rng.normal()).max(0.0) * 4.0).collect();
        let mut x: Vec<f32> = x.iter().map(|&v| if rng.below(8) == 0 { -0.0 } else { round_bf16(v * 0.125) }).collect();
        for (r, row) in x.chunks_mut(case.n).enumerate() {
            let top = row.iter().fold(0.0f32, |a, &v| a.max(v));
            let at = rng.below(case.n as u64) as usize;
            match r % 3 {
                0 => row[case.n - 1] = top + 1.0,
                1 => row[at] = top,
                _ => {}
            }
        }
        Inputs { data: vec![Data::rows_f32(&x, case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.k, case.k]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (i, v) = ops::topk(&inputs.data[0].f32s(), case.n, case.k);
        vec![i, words(&v)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let mut out = Vec::new();
        for row in inputs.data[0].f32s().chunks(case.n) {
            let mut order: Vec<usize> = (0..case.n).collect();
            order.sort_by(|&a, &b| {
                let (va, vb) = (f64::from(row[a]) + 0.0, f64::from(row[b]) + 0.0);
                vb.partial_cmp(&va).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
            });
            out.extend(order.iter().take(case.k).map(|&i| i as f64));
        }
        out
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        outputs[0].iter().map(|&i| f64::from(i)).collect()
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, d, k) = (case.rows, case.n, case.k);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let (idx, val) = (poisoned(gpu, m * k)?, poisoned(gpu, m * k)?);
        let mut rec = Recorder::new(gpu);
        ops::record_topk(&mut rec, &x, &idx, &val, m, d, k, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&idx, m * k), (&val, m * k)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "break ties to the higher index"),
            Control::new(2, "skip the last element"),
            Control::new(3, "leave the last pick of row 0 unwritten"),
            Control::new(4, "select from the next row"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: 2048, bindings: 3 }
    }
}
