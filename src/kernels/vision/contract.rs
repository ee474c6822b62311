//! Contract registrations of the bias add, the erf GELU (`case.k` = 1 for bf16 output) and the cell unfold (`case.n` = channels, `case.k` = grid_h | grid_w << 10 | cell << 20).
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::kernels::hc::stream_contract::BF16_HALF;
use crate::kernels::lib::erf64;
use crate::kernels::util::{f64s, poisoned, read_outputs, tiny, words, FLUSH, U};
use crate::kernels::vision::{self, RowOp, Unfold};
use crate::numerics::{pow2, round_bf16};

/// Registration of one row op.
pub struct RowOpKernel(pub RowOp);

fn row_case(label: &str, rows: usize, d: usize, bf16_out: bool) -> Case {
    Case::new(&format!("{label} {rows}x{d}{}", if bf16_out { " bf16" } else { "" }), rows, d, usize::from(bf16_out))
}

impl Kernel for RowOpKernel {
    fn name(&self) -> &'static str {
        vision::ROW_OPS[self.0 as usize].kernel
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 2] = [&[Variant::new("ref", &[vision::ROW_OPS[0]])], &[Variant::new("ref", &[vision::ROW_OPS[1]])]];
        V[self.0 as usize]
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 4 } else { 64 };
        let wide = if self.0 == RowOp::Gelu { 5120 } else { 3072 };
        vec![
            row_case("vit", r, wide, false),
            row_case("vit", r, 1024, true),
            row_case("tiny", 9, 64, false),
            row_case("tiny", 7, 192, true),
            row_case("awkward", 3, 37, false),
            row_case("edge", 4, 64, false).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let n = case.rows * case.n;
        let mut x: Vec<f32> = (0..case.rows).flat_map(|_| {
            let s = pow2(rng.below(9) as i32 - 4);
            (0..case.n).map(|_| rng.normal() * s).collect::<Vec<_>>()
        }).collect();
        let mut b: Vec<f32> = (0..case.n).map(|_| round_bf16(rng.normal() * 0.5)).collect();
        if case.edge {
            let specials = [0.0f32, -0.0, 1e-30, -1e-30, 9.5, -9.5, 30.0, -30.0, f32::from_bits(0x3f80_8000), -5.0];
            for i in (0..n).step_by(2) {
                x[i] = specials[i / 2 % specials.len()];
            }
            // Sums that cancel below 2^-126 and products below it.
            for i in (1..n).step_by(4) {
                x[i] = f32::from_bits(0x0080_0000 + rng.below(0x80_0000) as u32);
                b[i % case.n] = -f32::from_bits(0x0080_0000 + rng.below(0x80_0000) as u32);
            }
            for i in (3..n).step_by(4) {
                x[i] = tiny(rng, -126, -120);
            }
        }
        Inputs { data: vec![Data::rows_f32(&x, case.n), Data::shared(bytemuck::cast_slice(&b).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&vision::row_op(self.0, &inputs.data[0].f32s(), &inputs.data[1].f32s(), case.n, case.k == 1))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (x, b) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let v = f64::from(v);
                match self.0 {
                    RowOp::BiasAdd => v + f64::from(b[i % case.n]),
                    RowOp::Gelu => 0.5 * v * (1.0 + erf64(v * std::f64::consts::FRAC_1_SQRT_2)),
                }
            })
            .collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let x = inputs.data[0].f32s();
        x.iter()
            .zip(reference)
            .map(|(&v, &r)| {
                let e = match self.0 {
                    RowOp::BiasAdd => U * r.abs() + FLUSH,
                    RowOp::Gelu => {
                        // t = x/sqrt2 rounded, erf within 2 ulp (slope at most 2/sqrt(pi)), 1 + erf and the two products rounded.
                        let a = f64::from(v).abs();
                        let t = a * std::f64::consts::FRAC_1_SQRT_2;
                        let er = erf64(t);
                        let de = 1.13 * (U * t + FLUSH) + 4.0 * U * er + FLUSH;
                        1.01 * (0.5 * a * (de + U * (1.0 + er)) + 3.0 * U * r.abs()) + 3.0 * FLUSH
                    }
                };
                if case.k == 1 {
                    e + BF16_HALF * (r.abs() + e)
                } else {
                    e
                }
            })
            .collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, d) = (case.rows, case.n);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let b = gpu.upload(&inputs.data[1].bytes)?;
        let y = poisoned(gpu, m * d)?;
        let mut rec = Recorder::new(gpu);
        vision::record_row_op(&mut rec, self.0, &x, &b, &y, m, d, case.k == 1, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * d)])
    }
    fn controls(&self) -> &'static [Control] {
        match self.0 {
            RowOp::BiasAdd => const { &[
                Control::new(1, "leave the last output unwritten"),
                Control::new(2, "add the next column's bias"),
                Control::new(5, "flip the bf16 rounding"),
                KEEP_SUBNORMALS,
            ] },
            RowOp::Gelu => const { &[
                Control::new(1, "leave the last output unwritten"),
                Control::new(2, "erf of x instead of x / sqrt 2"),
                Control::new(3, "drop the half"),
                Control::new(5, "flip the bf16 rounding"),
                KEEP_SUBNORMALS,
            ] },
        }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 3 }
    }
}

/// Registration of the aligner's cell unfold.
pub struct UnfoldKernel;

fn unfold_of(case: &Case) -> Unfold {
    Unfold { grid_h: case.k & 0x3ff, grid_w: (case.k >> 10) & 0x3ff, channels: case.n, cell: case.k >> 20 }
}

fn unfold_case(label: &str, gh: usize, gw: usize, channels: usize, cell: usize) -> Case {
    Case::new(&format!("{label} {gh}x{gw}x{channels} cell {cell}"), gh * gw, channels, gh | gw << 10 | cell << 20)
}

impl Kernel for UnfoldKernel {
    fn name(&self) -> &'static str {
        "unfold_cells"
    }
    fn variants(&self) -> &'static [Variant] {
        const { &[Variant::new("ref", &[vision::UNFOLD])] }
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            if quick { unfold_case("vit", 8, 7, 1024, 3) } else { unfold_case("vit 1024x701", 51, 74, 1024, 3) },
            unfold_case("tiny", 8, 8, 64, 3),
            unfold_case("exact", 6, 9, 32, 3),
            unfold_case("awkward", 5, 4, 7, 2),
            unfold_case("one patch", 1, 1, 16, 3),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let x: Vec<f32> = (0..case.rows * case.n).map(|_| rng.normal()).collect();
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&x).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        let u = unfold_of(case);
        let (ch, cw) = u.cells();
        vec![ch * cw * u.width()]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&vision::unfold(&inputs.data[0].f32s(), &unfold_of(case)))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        // The unfold as torch writes it: for each output index, the source pixel by position arithmetic in the other order (cell, channel, offset).
        let u = unfold_of(case);
        let x = inputs.data[0].f32s();
        let (ch, cw) = u.cells();
        let a = u.cell * u.cell;
        (0..ch * cw * u.width())
            .map(|i| {
                let (cell, e) = (i / u.width(), i % u.width());
                let (c, ky, kx) = (e / a, e % a / u.cell, e % u.cell);
                let (r, col) = (cell / cw * u.cell + ky, cell % cw * u.cell + kx);
                if r < u.grid_h && col < u.grid_w { f64::from(x[(r * u.grid_w + col) * u.channels + c]) } else { 0.0 }
            })
            .collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let u = unfold_of(case);
        let (ch, cw) = u.cells();
        let n = ch * cw * u.width();
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let y = poisoned(gpu, n)?;
        let mut rec = Recorder::new(gpu);
        vision::record_unfold(&mut rec, &x, &y, &u, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "leave the last output unwritten"),
            Control::new(2, "offset-major instead of channel-major"),
            Control::new(3, "repeat the edge column instead of zero padding"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
}

static ROW_OP_KERNELS: [RowOpKernel; 2] = [RowOpKernel(RowOp::BiasAdd), RowOpKernel(RowOp::Gelu)];
static UNFOLD_KERNEL: UnfoldKernel = UnfoldKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    let mut k: Vec<&'static dyn Kernel> = ROW_OP_KERNELS.iter().map(|r| r as &dyn Kernel).collect();
    k.push(&UNFOLD_KERNEL);
    k.push(&super::attention_contract::VIT_ATTENTION_KERNEL);
    k
}
