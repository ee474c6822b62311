//! Contract registration of the mHC mixes (`case.n` = d, `case.k` = hc | Sinkhorn iterations << 8); inputs h, hc_fn, scale, base.
use crate::kernels::hc::{self, HcParams};
use crate::kernels::util::{canonical_depth, f64s, gamma, run_uploaded, tiny, words, FLUSH, U};
use crate::kernels::hc::stream_contract::stream_rows;
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError};
use crate::numerics::pow2;

/// mHC mixes registration.
pub struct MixesKernel;

fn params(case: &Case) -> HcParams {
    HcParams { hc: case.k & 0xff, iters: case.k >> 8, norm_eps: 1e-20, hc_eps: 1e-6 }
}

fn shape(label: &str, rows: usize, d: usize, hc: usize, iters: usize) -> Case {
    Case::new(&format!("{label} {rows}x{hc}x{d} iters {iters}"), rows, d, hc | iters << 8)
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// One row in f64: the mixes and their bounds, following the oracle's algorithm without rounding.
fn row_reference(x: &[f64], f: &[f64], scale: &[f64], base: &[f64], p: &HcParams) -> (Vec<f64>, Vec<f64>) {
    let (hc, n) = (p.hc, x.len());
    let nmix = p.mix_dim();
    let (eps, norm_eps) = (f64::from(p.hc_eps), f64::from(p.norm_eps));
    let depth = canonical_depth(n);
    let r = 1.0 / (x.iter().map(|v| v * v).sum::<f64>() / n as f64 + norm_eps).sqrt();
    let rel_r = 0.5 * gamma(depth + 3) + 4.0 * U;
    let mut mu = Vec::with_capacity(nmix);
    let mut dmu = Vec::with_capacity(nmix);
    for m in 0..nmix {
        let w = &f[m * n..(m + 1) * n];
        let s: f64 = (0..n).map(|t| x[t] * w[t]).sum();
        let a: f64 = (0..n).map(|t| (x[t] * w[t]).abs()).sum();
        mu.push(s * r);
        dmu.push(1.01 * (r * gamma(depth) * a + (s * r).abs() * (rel_r + U)) + 2.0 * r * n as f64 * FLUSH);
    }
    let z = |m: usize, k: usize| mu[m] * scale[k] + base[m];
    let dz = |m: usize, k: usize| dmu[m] * scale[k].abs() + U * (mu[m] * scale[k]).abs() + U * z(m, k).abs();
    let (mut val, mut bnd) = (Vec::with_capacity(nmix), Vec::with_capacity(nmix));
    for m in 0..2 * hc {
        let k = usize::from(m >= hc);
        let sg = sigmoid(z(m, k));
        let e = 1.01 * sg * (1.0 - sg) * dz(m, k) + 4.0 * U * sg;
        if k == 0 {
            val.push(sg + eps);
            bnd.push(e + U * (sg + eps));
        } else {
            val.push(2.0 * sg);
            bnd.push(2.0 * e);
        }
    }
    let mut c: Vec<f64> = (0..hc * hc).map(|e| z(2 * hc + e, 2)).collect();
    let mut delta = 0.0f64;
    for i in 0..hc {
        let row = &mut c[i * hc..(i + 1) * hc];
        let mx = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
        let arg = (0..hc).map(|j| dz(2 * hc + i * hc + j, 2) + U * (row[j] - mx).abs()).fold(0.0, f64::max);
        delta = delta.max(2.0 * arg + (hc + 11) as f64 * U);
        let e: Vec<f64> = row.iter().map(|&v| (v - mx).exp()).collect();
        let t: f64 = e.iter().sum();
        (0..hc).for_each(|j| row[j] = e[j] / t + eps);
    }
    let pass = |c: &mut Vec<f64>, rows: bool| {
        let sums: Vec<f64> = (0..hc).map(|a| (0..hc).map(|b| if rows { c[a * hc + b] } else { c[b * hc + a] }).sum::<f64>() + eps).collect();
        (0..hc * hc).for_each(|e| c[e] /= sums[if rows { e / hc } else { e % hc }]);
    };
    pass(&mut c, false);
    for _ in 1..p.iters {
        pass(&mut c, true);
        pass(&mut c, false);
    }
    delta += (2 * p.iters - 1) as f64 * (hc + 6) as f64 * U;
    val.extend(&c);
    bnd.extend(c.iter().map(|&v| 2.0 * (hc as f64 * v.abs()).sqrt() * delta + 1e-30));
    (val, bnd)
}

impl Kernel for MixesKernel {
    fn name(&self) -> &'static str {
        "hc_mixes"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::hc::dispatch::HC_MIXES])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 2 } else { 32 };
        let many = if quick { 30 } else { 300 };
        vec![
            shape("release", r, 5120, 4, 20),
            shape("tiny", 9, 64, 4, 20),
            shape("hf test", 5, 64, 2, 3),
            shape("awkward", 3, 37, 3, 5),
            shape("one row", 1, 5120, 4, 20),
            shape("many rows", many, 64, 4, 20),
            shape("edge", 4, 64, 4, 20).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let p = params(case);
        let n = p.hc * case.n;
        let nmix = p.mix_dim();
        let mut h = stream_rows(rng, case.rows, n, false);
        let mut f = Vec::with_capacity(nmix * n);
        for _ in 0..nmix {
            let s = 0.01 * pow2(rng.below(4) as i32 - 1);
            f.extend((0..n).map(|_| rng.normal() * s));
        }
        // Edge: the last row's products with fn and its squares fall below 2^-126; scales of 2^80 make its mixes visible.
    let scale: Vec<f32> = (0..3).map(|_| rng.uniform(0.3, 0.8) * if case.edge { pow2(80) } else { 1.0 }).collect();
        let mut base: Vec<f32> = (0..nmix).map(|_| rng.normal() * 0.1).collect();
        if case.edge {
            h[..n].fill(0.0);
            h[n..2 * n].iter_mut().enumerate().for_each(|(i, v)| *v = if i % 2 == 0 { 65280.0 } else { -0.0 });
            base[2 * p.hc..].iter_mut().enumerate().for_each(|(e, v)| *v = [8.0, -8.0, 0.0, 30.0][e % 4]);
            let last = case.rows - 1;
            h[last * n..(last + 1) * n].iter_mut().for_each(|v| *v = tiny(rng, -126, -112));
        }
        let bytes = |v: &[f32]| Data::shared(bytemuck::cast_slice(v).to_vec());
        Inputs { data: vec![Data::rows_f32(&h, n), bytes(&f), bytes(&scale), bytes(&base)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![params(case).mix_dim()]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let p = params(case);
        let n = p.hc * case.n;
        let d: Vec<Vec<f32>> = inputs.data.iter().map(|x| x.f32s()).collect();
        let y: Vec<f32> = (0..case.rows).flat_map(|r| hc::mixes(&d[0][r * n..(r + 1) * n], &d[1], &d[2], &d[3], &p)).collect();
        vec![words(&y)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.rows(case, inputs).into_iter().flat_map(|(v, _)| v).collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        self.rows(case, inputs).into_iter().flat_map(|(_, b)| b).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = params(case);
        let words = case.rows * p.mix_dim();
        let seg = gpu.alloc(4 * hc::hc_mixes_scratch_words(case.rows, p.hc * case.n, p.mix_dim() + 1) as u64)?;
        run_uploaded(gpu, inputs, &[words], |rec, b, y| hc::record_hc_mixes(rec, &b[0], &b[1], &b[2], &b[3], &y[0], &seg, case.rows, case.n, &p, control))
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last block of the sums"),
            Control::new(2, "reverse the order inside each block"),
            Control::fusion(3, "products fused into the block sums"),
            Control::new(7, "double the pre scale"),
            KEEP_SUBNORMALS,
            Control::new(5, "leave the last output unwritten"),
            Control::new(6, "skip the column pass after the softmax"),
            Control::new(7, "double the pre scale"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 128, workgroup_bytes: (128 + 25 + 16 + 1024) * 4, bindings: 6 }
    }
}

impl MixesKernel {
    /// Each row's f64 mixes and bounds.
    fn rows(&self, case: &Case, inputs: &Inputs) -> Vec<(Vec<f64>, Vec<f64>)> {
        let p = params(case);
        let n = p.hc * case.n;
        let d: Vec<Vec<f64>> = inputs.data.iter().map(|x| x.f32s().iter().map(|&v| f64::from(v)).collect()).collect();
        (0..case.rows).map(|r| row_reference(&d[0][r * n..(r + 1) * n], &d[1], &d[2], &d[3], &p)).collect()
    }
}
