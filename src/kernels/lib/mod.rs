//! Contract registrations of the numerics library: each software function and the format conversions, on the device.
#[cfg(test)]
mod twin_tests;

use crate::kernels::ops::contract::{bf16_reference, nearest_on_grid};
use crate::kernels::util::{f64s, poisoned, read_outputs, words};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant};
use crate::gpu::{Arg, Gpu, GpuError, PipelineKey, Recorder, Shader};
use crate::numerics::{act_scale_exp, bf16_from_f32, bf16_to_f32, e2m1_from_f32, e2m1_to_f32, e4m3_from_f32, e4m3_to_f32, math};

pub(crate) const PROBE: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "lib", variant: "ref", source: include_str!("../../../wgsl/lib/probe.wgsl") };
/// The same probe in MSL over `msl/lib/`, so gate 4 holds the MSL library to the WGSL one bit for bit.
pub(crate) const PROBE_MSL: Shader = Shader { lang: crate::gpu::Lang::Msl, kernel: "lib", variant: "msl", source: crate::gpu::msl_lib!("msl/lib/probe.metal") };
const VARIANTS: &[Variant] = &[Variant::new("ref", &[PROBE]), Variant::new("msl", &[PROBE_MSL])];
const ROW: usize = 1024;
const CONTROLS: &[Control] = &[
    Control::new(1, "round the result to bf16 (formats: truncate)"),
    Control::new(2, "read the next input"),
    Control::new(3, "leave one output unwritten"),
];

/// One software function as the contract sees it.
pub struct LibFn {
    pub name: &'static str,
    id: u32,
    rust: fn(f32, f32) -> f32,
    reference: fn(f64, f64) -> f64,
    /// Random inputs are uniform in [lo, hi) or, when `bits`, positive normal bit patterns.
    lo: f32,
    hi: f32,
    bits: bool,
    edges: &'static [f32],
}

pub(crate) fn erf64(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 3.0 {
        let (mut term, mut sum, x2) = (a, a, a * a);
        for n in 1..200 {
            term *= -x2 / n as f64;
            let t = term / (2 * n + 1) as f64;
            sum += t;
            if t.abs() < 1e-18 * sum.abs() {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let mut k = a;
        for n in (1..80).rev() {
            k = a + (n as f64 * 0.5) / k;
        }
        1.0 - (-a * a).exp() / (k * std::f64::consts::PI.sqrt())
    };
    r.copysign(x)
}

macro_rules! lib_fn {
    ($name:literal, $id:expr, $rust:expr, $reference:expr, $lo:expr, $hi:expr, $bits:expr, $edges:expr) => {
        LibFn { name: $name, id: $id, rust: $rust, reference: $reference, lo: $lo, hi: $hi, bits: $bits, edges: $edges }
    };
}

/// The registered functions.
pub static LIB_FNS: [LibFn; 13] = [
    lib_fn!("lib_exp2", 0, |a, _| math::exp2(a), |a, _| a.exp2(), -126.0, 127.99, false, &[0.0, -0.0, 1.0, -1.0, 0.5, -0.5, -126.0, 127.0, 1e-8]),
    lib_fn!("lib_exp", 1, |a, _| math::exp(a), |a, _| a.exp(), -87.3, 88.7, false, &[0.0, -0.0, 1.0, -1.0, 0.3465736, -0.3465736, -87.0, 88.0, 1e-8]),
    lib_fn!("lib_log2", 2, |a, _| math::log2(a), |a, _| a.log2(), 0.0, 0.0, true, &[1.0, 2.0, 0.5, 1.0000001, 0.99999994, std::f32::consts::SQRT_2, std::f32::consts::FRAC_1_SQRT_2, 3e38, 1.2e-38]),
    lib_fn!("lib_log", 3, |a, _| math::log(a), |a, _| a.ln(), 0.0, 0.0, true, &[1.0, 2.0, 0.5, 1.0000001, 0.99999994, 2.7182817, 3e38, 1.2e-38]),
    lib_fn!("lib_log1p", 4, |a, _| math::log1p(a), |a, _| a.ln_1p(), -0.999, 16.0, false, &[0.0, 1e-30, -1e-30, 1e-7, 0.41421357, -0.29289323, 1.0, 1e30]),
    lib_fn!("lib_rsqrt", 5, |a, _| math::rsqrt(a), |a, _| 1.0 / a.sqrt(), 0.0, 0.0, true, &[1.0, 2.0, 4.0, 0.25, 3.0, 1e-20, 1.2e-38, 3e38]),
    lib_fn!("lib_recip", 6, |a, _| math::recip(a), |a, _| 1.0 / a, 0.0, 0.0, true, &[1.0, 2.0, 3.0, 0.1, 1.5, 7.0, 1e30, 1.2e-38]),
    lib_fn!("lib_sqrt", 7, |a, _| math::sqrt(a), |a, _| a.sqrt(), 0.0, 0.0, true, &[1.0, 2.0, 4.0, 0.25, 3.0, 1e-20, 1.2e-38, 3e38]),
    lib_fn!("lib_div", 8, math::div, |a, b| a / b, -1e6, 1e6, false, &[1.0, 3.0, -7.0, 0.1, 1e-10, 448.0]),
    lib_fn!("lib_sigmoid", 9, |a, _| math::sigmoid(a), |a, _| 1.0 / (1.0 + (-a).exp()), -87.0, 88.0, false, &[0.0, -0.0, 1.0, -1.0, 20.0, -20.0, 16.635532, -87.0]),
    lib_fn!("lib_silu", 10, |a, _| math::silu(a), |a, _| a / (1.0 + (-a).exp()), -87.0, 88.0, false, &[1.0, -1.0, 10.0, -10.0, 20.0, -20.0, 1e-20, 1e4]),
    lib_fn!("lib_softplus", 11, |a, _| math::softplus(a), |a, _| a.max(0.0) + (-a.abs()).exp().ln_1p(), -87.0, 100.0, false, &[0.0, -0.0, 1.0, -1.0, 20.0, -20.0, 1e-8, 1e4]),
    lib_fn!("lib_erf", 12, |a, _| math::erf(a), |a, _| erf64(a), -10.0, 10.0, false, &[0.0, -0.0, 1e-20, 0.5, 0.84, 1.0, 2.0, 3.0, 3.9, 6.0, -1.5]),
];

fn ulp_f32(r: f64) -> f64 {
    let a = r.abs().max(f64::from(f32::MIN_POSITIVE));
    2f64.powi(a.log2().floor() as i32 - 23)
}

fn grid(codes: std::ops::Range<u8>, dec: fn(u8) -> f32) -> Vec<f64> {
    codes.map(|c| f64::from(dec(c))).collect()
}

impl LibFn {
    fn sample(&self, rng: &mut Rng) -> (f32, f32) {
        let a = if self.bits {
            f32::from_bits(0x0080_0000 + rng.below(0x7f00_0000 - 0x0080_0000) as u32)
        } else if rng.below(4) == 0 {
            (rng.normal() * 1e-3).clamp(self.lo, self.hi - 1e-3)
        } else {
            rng.uniform(self.lo, self.hi)
        };
        let b = if self.id == 8 { rng.uniform(0.5, 1e4) * if rng.below(2) == 0 { 1.0 } else { -1.0 } } else { 0.0 };
        (a, b)
    }
}

impl Kernel for LibFn {
    fn in_forward(&self) -> bool {
        false
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn variants(&self) -> &'static [Variant] {
        VARIANTS
    }
    fn cases(&self, _quick: bool) -> Vec<Case> {
        vec![Case::new("2^20 random", ROW, ROW, 0), Case::new("edges", 1, ROW, 0).edge()]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let mut v = Vec::with_capacity(2 * case.rows * case.n);
        for i in 0..case.rows * case.n {
            let (a, b) = if case.edge {
                let e = self.edges[i % self.edges.len()];
                let e = if i / self.edges.len() % 2 == 1 { f32::from_bits(e.to_bits() + 1) } else { e };
                (e, if self.id == 8 { self.edges[(i / 3) % self.edges.len()].max(0.5) } else { 0.0 })
            } else {
                self.sample(rng)
            };
            v.extend([a, b]);
        }
        Inputs { data: vec![Data::rows_f32(&v, 2 * case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, _case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&inputs.data[0].f32s().chunks(2).map(|p| (self.rust)(p[0], p[1])).collect::<Vec<_>>())]
    }
    fn reference(&self, _case: &Case, inputs: &Inputs) -> Vec<f64> {
        inputs.data[0].f32s().chunks(2).map(|p| (self.reference)(f64::from(p[0]), f64::from(p[1]))).collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let tiny = f64::from(f32::MIN_POSITIVE);
        reference.iter().map(|&r| if r.abs() < tiny { tiny } else { 2.0 * ulp_f32(r) }).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        run_probe(gpu, variant.shaders[0], self.id, case.rows * case.n, 1, inputs, control)
    }
    fn controls(&self) -> &'static [Control] {
        CONTROLS
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
}

fn run_probe(gpu: &Gpu, shader: Shader, func: u32, n: usize, out_per: usize, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
    let x = gpu.upload(&inputs.data[0].bytes)?;
    let y = poisoned(gpu, n * out_per)?;
    let groups = (n as u32).div_ceil(64);
    let gx = groups.min(32768);
    let key = PipelineKey::new(shader, &[("FUNC", f64::from(func)), ("CONTROL", f64::from(control))]);
    let mut rec = Recorder::new(gpu);
    rec.dispatch(&key, &[n as u32, gx], &[Arg::Whole(&x), Arg::Whole(&y)], [gx, groups.div_ceil(gx), 1])?;
    rec.submit()?;
    read_outputs(gpu, &[(&y, n * out_per)])
}

/// The format conversions: bf16, e4m3 and e2m1 encodes and the act_quant scale exponent, per input.
pub struct LibFormats;

impl Kernel for LibFormats {
    fn in_forward(&self) -> bool {
        false
    }
    fn name(&self) -> &'static str {
        "lib_formats"
    }
    fn variants(&self) -> &'static [Variant] {
        VARIANTS
    }
    fn cases(&self, _quick: bool) -> Vec<Case> {
        vec![Case::new("tie classes", 256, 1024, 0), Case::new("random bits", 256, 1024, 1)]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let mut ties: Vec<f32> = Vec::new();
        for g in [grid(0..0x7f, e4m3_to_f32), grid(0..8, e2m1_to_f32)] {
            for w in g.windows(2) {
                let mid = ((w[0] + w[1]) * 0.5) as f32;
                ties.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1), w[1] as f32, 1000.0]);
            }
        }
        let mut v = Vec::with_capacity(2 * case.rows * case.n);
        for i in 0..case.rows * case.n {
            let a = if case.k == 1 {
                f32::from_bits(rng.next_u32() & 0xff7f_ffff)
            } else if i < ties.len() {
                ties[i]
            } else {
                let h = (rng.next_u32() & 0x7f7f) << 16;
                f32::from_bits(h | [0, 1, 0x7fff, 0x8000, 0x8001, 0xffff][i % 6])
            };
            let a = if rng.below(2) == 0 { -a } else { a };
            v.extend([a, 0.0]);
        }
        Inputs { data: vec![Data::rows_f32(&v, 2 * case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![4 * case.n]
    }
    fn oracle(&self, _case: &Case, inputs: &Inputs) -> Outputs {
        let f = inputs.data[0].f32s();
        let w = f.chunks(2).flat_map(|p| {
            let a = p[0];
            [u32::from(bf16_from_f32(a)), u32::from(e4m3_from_f32(a)), u32::from(e2m1_from_f32(a)), act_scale_exp(a.abs()) as u32]
        });
        vec![w.collect()]
    }
    fn reference(&self, _case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (g4, g2) = (grid(0..0x7f, e4m3_to_f32), grid(0..8, e2m1_to_f32));
        let f = inputs.data[0].f32s();
        f.chunks(2)
            .flat_map(|p| {
                let a = f64::from(p[0]);
                let s = (a.abs().max(f64::from(1e-4f32)) / 448.0).log2().ceil();
                [bf16_reference(p[0]), nearest_on_grid(a, &g4), nearest_on_grid(a, &g2), s]
            })
            .collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        outputs[0]
            .chunks(4)
            .flat_map(|w| {
                [f64::from(bf16_to_f32(w[0] as u16)), f64::from(e4m3_to_f32(w[1] as u8)), f64::from(e2m1_to_f32(w[2] as u8)), f64::from(w[3] as i32)]
            })
            .collect()
    }
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        run_probe(gpu, variant.shaders[0], 100, case.rows * case.n, 4, inputs, control)
    }
    fn controls(&self) -> &'static [Control] {
        CONTROLS
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
}
