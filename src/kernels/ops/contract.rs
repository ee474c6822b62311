//! Contract registrations of act_quant, RMSNorm, SwiGLU and the elementwise ops.
use crate::kernels::ops::{self, Elementwise, RmsNorm};
use crate::kernels::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, tiny, words, FLUSH, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::numerics::{e4m3_to_f32, pow2, round_bf16};

/// Nearest value of a sorted non-negative grid to |x| with its sign, ties to the even index, saturating at the top.
pub(crate) fn nearest_on_grid(x: f64, grid: &[f64]) -> f64 {
    let a = x.abs();
    let top = grid.len() - 1;
    let i = grid.partition_point(|&g| g <= a);
    let pick = if i > top {
        top
    } else if i == 0 {
        0
    } else {
        let (lo, hi) = (grid[i - 1], grid[i]);
        if a - lo < hi - a || (a - lo == hi - a && (i - 1) % 2 == 0) {
            i - 1
        } else {
            i
        }
    };
    grid[pick].copysign(x)
}

fn e4m3_grid() -> Vec<f64> {
    (0..0x7fu8).map(|c| f64::from(e4m3_to_f32(c))).collect()
}

/// Exact bf16 rounding by comparing the two neighbours in f64.
pub(crate) fn bf16_reference(x: f32) -> f64 {
    let lo = f32::from_bits(x.to_bits() & 0xffff_0000);
    let hi_bits = (x.to_bits() & 0xffff_0000) + 0x1_0000;
    let hi = if hi_bits & 0x7fff_ffff == 0x7f80_0000 { 2f64.powi(128).copysign(f64::from(x)) } else { f64::from(f32::from_bits(hi_bits)) };
    let (dl, dh) = ((f64::from(x) - f64::from(lo)).abs(), (hi - f64::from(x)).abs());
    if dl < dh || (dl == dh && (lo.to_bits() >> 16) % 2 == 0) {
        f64::from(lo)
    } else if hi.abs() == 2f64.powi(128) {
        f64::INFINITY.copysign(hi)
    } else {
        hi
    }
}

fn normal_rows(rng: &mut Rng, m: usize, d: usize, spread: i32) -> Vec<f32> {
    let mut v = Vec::with_capacity(m * d);
    for _ in 0..m {
        let s = pow2(rng.below(2 * spread as u64 + 1) as i32 - spread);
        v.extend((0..d).map(|_| rng.normal() * s));
    }
    v
}

fn rows_case(label: &str, rows: usize, d: usize) -> Case {
    Case::new(&format!("{label} {rows}x{d}"), rows, d, 0)
}

const fn fp(workgroup_size: u32, workgroup_bytes: u32, bindings: u32) -> Footprint {
    Footprint { workgroup_size, workgroup_bytes, bindings }
}

/// act_quant registration.
pub struct ActQuantKernel;

impl Kernel for ActQuantKernel {
    fn name(&self) -> &'static str {
        "act_quant"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::ops::ACT_QUANT])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 64 };
        vec![
            Case::new("hidden 5120", r, 5120, 5120),
            Case::new("wo_b input 8192", 2, 8192, 8192),
            Case::new("expert w2 input 2304", r, 2304, 2304),
            Case::new("q rank 1280", 5, 1280, 1280),
            Case::new("tiny 64", 9, 64, 64),
            Case::new("awkward 32", 1, 32, 32),
            Case::new("edge 256", 4, 256, 256).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let k = case.k;
        let mut x = normal_rows(rng, case.rows, k, 12);
        for (b, blk) in x.chunks_mut(32).enumerate() {
            let e = rng.below(40) as i32 - 20;
            for v in blk.iter_mut() {
                *v *= pow2(e / 2);
            }
            if case.edge {
                match b % 6 {
                    0 => blk.fill(0.0),
                    1 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = f32::from(i as u8) * 1e-30),
                    2 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = [448.0, 0.5 * (448.0 + 416.0), -7.5, 1.0625][i % 4]),
                    3 => blk.iter_mut().for_each(|v| *v *= 1e30),
                    4 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 16.0) * 0.0625 * 3.0),
                    _ => blk[31] = 1e-4,
                }
            }
        }
        Inputs { data: vec![Data::rows_f32(&x, k)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.k, case.k / 32]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (q, s) = ops::act_quant(&inputs.data[0].f32s(), case.k);
        vec![words(&q), words(&s)]
    }
    fn reference(&self, _case: &Case, inputs: &Inputs) -> Vec<f64> {
        let grid = e4m3_grid();
        let x = inputs.data[0].f32s();
        let mut out = Vec::with_capacity(x.len());
        for blk in x.chunks(32) {
            let amax = blk.iter().fold(0.0f64, |a, &v| a.max(f64::from(v).abs())).max(f64::from(1e-4f32));
            let scale = 2f64.powf((amax / 448.0).log2().ceil());
            out.extend(blk.iter().map(|&v| nearest_on_grid(f64::from(v) / scale, &grid) * scale));
        }
        out
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, case: &Case, outputs: &Outputs) -> Vec<f64> {
        let (q, s) = (f64s(&outputs[0]), f64s(&outputs[1]));
        q.iter().enumerate().map(|(i, v)| v * s.get(i / 32).copied().unwrap_or(f64::NAN)).take(case.rows * case.k).collect()
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, k) = (case.rows, case.k);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let (q, s) = (poisoned(gpu, m * k)?, poisoned(gpu, m * k / 32)?);
        let mut rec = Recorder::new(gpu);
        ops::record_act_quant(&mut rec, &x, &q, &s, m, k, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&q, m * k), (&s, m * k / 32)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last element of the amax reduction"),
            Control::new(2, "halve the scale"),
            Control::new(3, "leave one output unwritten"),
            Control::new(4, "take amax from the next row's block"),
            Control::new(5, "truncate instead of rounding to nearest even"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        fp(256, 1024, 3)
    }
}

/// RMSNorm registration.
pub struct RmsNormKernel;

impl Kernel for RmsNormKernel {
    fn name(&self) -> &'static str {
        "rmsnorm"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::ops::RMSNORM])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 32 };
        vec![
            rows_case("hc flat", 8, 20480),
            rows_case("attn_norm", r, 5120),
            rows_case("q_norm", 4, 1280),
            rows_case("kv_norm", 5, 512),
            rows_case("k_norm", 3, 128),
            rows_case("tiny", 9, 64),
            rows_case("awkward", 2, 100),
            rows_case("awkward", 3, 1),
            rows_case("bf16 out", 4, 4096),
            rows_case("edge", 4, 256).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        // Edge rows: squares below 2^-126 in the sum, weights that take the outputs below it.
        let x = if case.edge { (0..case.rows * case.n).map(|_| tiny(rng, -68, -60)).collect() } else { normal_rows(rng, case.rows, case.n, 10) };
        let w: Vec<f32> = (0..case.n).map(|i| if case.edge && i % 2 == 0 { tiny(rng, -100, -90) } else { round_bf16(1.0 + 0.1 * rng.normal()) }).collect();
        Inputs { data: vec![Data::rows_f32(&x, case.n), Data::shared(bytemuck::cast_slice(&w).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&ops::rmsnorm(&self.params(case), &inputs.data[0].f32s(), &inputs.data[1].f32s()))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (x, w) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let mut out = Vec::with_capacity(x.len());
        for row in x.chunks(case.n) {
            let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / case.n as f64;
            let r = 1.0 / (ms + 1e-20).sqrt();
            out.extend(row.iter().zip(&w).map(|(&v, &wi)| f64::from(wi) * f64::from(v) * r));
        }
        out
    }
    fn bound(&self, case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let rel = 0.5 * gamma(canonical_depth(case.n) + 3) + 6.0 * U + if case.label.starts_with("bf16") { 1.0 / 256.0 } else { 0.0 };
        reference.iter().map(|r| r.abs() * rel + FLUSH).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = self.params(case);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let w = gpu.upload(&inputs.data[1].bytes)?;
        let y = poisoned(gpu, p.m * p.d)?;
        let mut rec = Recorder::new(gpu);
        ops::record_rmsnorm(&mut rec, &p, &x, &w, &y, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, p.m * p.d)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last block of the sum of squares"),
            Control::new(2, "reverse the segment order"),
            Control::fusion(3, "square and add without mul_rn"),
            Control::new(4, "leave one output unwritten"),
            Control::new(5, "normalise by the next row's statistics"),
            Control::new(6, "double one weight"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        fp(256, 4096 + 1024 + 4, 3)
    }
}

impl RmsNormKernel {
    fn params(&self, case: &Case) -> RmsNorm {
        RmsNorm { m: case.rows, d: case.n, eps: 1e-20, bf16_out: case.label.starts_with("bf16") }
    }
}

/// Clamped SwiGLU registration.
pub struct SwigluKernel;

const SWIGLU_LIMIT: f32 = 10.0;

impl Kernel for SwigluKernel {
    fn name(&self) -> &'static str {
        "swiglu"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::ops::SWIGLU])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 4 } else { 64 };
        vec![rows_case("expert", r, 2304), rows_case("tiny", 6, 64), rows_case("awkward", 3, 33), Case { k: 1, ..rows_case("bf16 out", 5, 2304) }, rows_case("edge", 4, 64).edge()]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        // Edge: silu(g) u below 2^-126.
        let g: Vec<f32> = (0..case.rows * case.n).map(|_| if case.edge { tiny(rng, -72, -60) } else { rng.normal() * 8.0 }).collect();
        let u: Vec<f32> = (0..case.rows * case.n).map(|_| if case.edge { tiny(rng, -70, -56) } else { rng.normal() * 8.0 }).collect();
        let w: Vec<f32> = (0..case.rows).map(|_| rng.uniform(0.05, 1.5)).collect();
        Inputs { data: vec![Data::rows_f32(&g, case.n), Data::rows_f32(&u, case.n), Data::rows_f32(&w, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let d = &inputs.data;
        vec![words(&ops::swiglu(&d[0].f32s(), &d[1].f32s(), &d[2].f32s(), case.n, SWIGLU_LIMIT, case.k == 1))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let d = &inputs.data;
        let (g, u, w) = (d[0].f32s(), d[1].f32s(), d[2].f32s());
        let l = f64::from(SWIGLU_LIMIT);
        (0..g.len())
            .map(|i| {
                let gv = f64::from(g[i]).min(l);
                gv / (1.0 + (-gv).exp()) * f64::from(u[i]).clamp(-l, l) * f64::from(w[i / case.n])
            })
            .collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let rel = 8.0 * U + if case.k == 1 { 1.0 / 256.0 } else { 0.0 };
        let w = inputs.data[2].f32s();
        // A flushed silu(g) u moves the result by at most 2^-126 w, the final flush by 2^-126.
        reference.iter().enumerate().map(|(i, r)| r.abs() * rel + FLUSH * (1.0 + f64::from(w[i / case.n]).abs())).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, f) = (case.rows, case.n);
        let bufs = inputs.data.iter().map(|d| gpu.upload(&d.bytes)).collect::<Result<Vec<_>, _>>()?;
        let a = poisoned(gpu, m * f)?;
        let mut rec = Recorder::new(gpu);
        ops::record_swiglu(&mut rec, &bufs[0], &bufs[1], &bufs[2], &a, m, f, SWIGLU_LIMIT, case.k == 1, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&a, m * f)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "drop the clamp on u"),
            Control::new(2, "clamp g from below too"),
            Control::new(3, "leave one output unwritten"),
            Control::new(4, "use the next row's routing weight"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        fp(64, 0, 4)
    }
}

/// Registration of one elementwise op.
pub struct ElementwiseKernel(pub Elementwise);

impl Kernel for ElementwiseKernel {
    fn name(&self) -> &'static str {
        ops::ELEMENTWISE[self.0 as usize].kernel
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 3] = [&[Variant::new("ref", &[crate::kernels::ops::ELEMENTWISE[0]])], &[Variant::new("ref", &[crate::kernels::ops::ELEMENTWISE[1]])], &[Variant::new("ref", &[crate::kernels::ops::ELEMENTWISE[2]])]];
        V[self.0 as usize]
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 4 } else { 64 };
        vec![rows_case("hidden", r, 5120), rows_case("tiny", 7, 64), rows_case("awkward", 3, 37), rows_case("edge", 4, 64).edge()]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let mut a = normal_rows(rng, case.rows, case.n, 20);
        if case.edge {
            let specials = [0.0f32, -0.0, 1e-30, 1e30, -1e30, 1.0 + f32::EPSILON, f32::from_bits(0x3f80_8000), f32::from_bits(0x3f81_8000)];
            for (i, v) in a.iter_mut().enumerate() {
                *v = specials[i % specials.len()];
            }
        }
        let mut b: Vec<f32> = match self.0 {
            Elementwise::Scale => (0..case.rows).map(|_| rng.normal()).collect(),
            _ => normal_rows(rng, case.rows, case.n, 20),
        };
        if case.edge && self.0 == Elementwise::Add {
            // Sums of normals that cancel below 2^-126.
            for i in (0..a.len()).step_by(3) {
                a[i] = f32::from_bits(0x0080_0000 + rng.below(0x80_0000) as u32);
                b[i] = -f32::from_bits(0x0080_0000 + rng.below(0x80_0000) as u32);
            }
        }
        if case.edge && self.0 == Elementwise::Scale {
            // Products below 2^-126: tiny values times tiny row scales.
            b.iter_mut().for_each(|s| *s = tiny(rng, -70, -60));
            a.iter_mut().step_by(2).for_each(|v| *v = tiny(rng, -70, -56));
        }
        let b_row = if self.0 == Elementwise::Scale { 1 } else { case.n };
        Inputs { data: vec![Data::rows_f32(&a, case.n), Data::rows_f32(&b, b_row)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&ops::elementwise(self.0, &inputs.data[0].f32s(), &inputs.data[1].f32s(), case.n))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (a, b) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        a.iter()
            .enumerate()
            .map(|(i, &x)| match self.0 {
                Elementwise::Add => f64::from(x) + f64::from(b[i]),
                Elementwise::Scale => f64::from(x) * f64::from(b[i / case.n]),
                Elementwise::RoundBf16 => bf16_reference(x),
            })
            .collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let (rel, abs) = if self.0 == Elementwise::RoundBf16 { (0.0, 0.0) } else { (U, FLUSH) };
        reference.iter().map(|r| r.abs() * rel + abs).collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, d) = (case.rows, case.n);
        let a = gpu.upload(&inputs.data[0].bytes)?;
        let b = gpu.upload(&inputs.data[1].bytes)?;
        let y = poisoned(gpu, m * d)?;
        let mut rec = Recorder::new(gpu);
        ops::record_elementwise(&mut rec, self.0, &a, &b, &y, m, d, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * d)])
    }
    fn controls(&self) -> &'static [Control] {
        match self.0 {
            Elementwise::RoundBf16 => const { &[
                Control::new(1, "leave the last output unwritten"),
                Control::new(2, "read the next row"),
                Control::new(3, "truncate instead of rounding"),
            ] },
            _ => const { &[
                Control::new(1, "leave the last output unwritten"),
                Control::new(2, "read the next row's operand"),
                Control::new(4, "round the result to bf16"),
                KEEP_SUBNORMALS,
            ] },
        }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        fp(64, 0, 3)
    }
}
