//! Contract registrations of the three QAT round trips (fp8 window KV, fp4 compressed KV rows, fp4 indexer q/k).
use crate::kernels::ops::contract::nearest_on_grid;
use crate::kernels::qat::{self, Qat};
use crate::kernels::util::{f64s, poisoned, read_outputs, words, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::numerics::{e4m3_to_f32, pow2};

/// Registration of one QAT kind.
pub struct QatKernel(pub Qat);

fn e4m3_grid() -> Vec<f64> {
    (0..0x7fu8).map(|c| f64::from(e4m3_to_f32(c))).collect()
}

const E2M1_GRID: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The grid value RNE picks for `v`, plus its other neighbour when `v` lies within 8u of their midpoint (the f32 quotient may cross it).
fn grid_candidates(v: f64, grid: &[f64]) -> Vec<f64> {
    let r = nearest_on_grid(v, grid);
    let a = v.abs();
    let i = grid.partition_point(|&g| g <= a);
    if i == 0 || i >= grid.len() {
        return vec![r];
    }
    let (lo, hi) = (grid[i - 1], grid[i]);
    if (a - 0.5 * (lo + hi)).abs() <= 8.0 * U * a {
        vec![lo.copysign(v), hi.copysign(v)]
    } else {
        vec![r]
    }
}

fn block_amax(blk: &[f32]) -> f64 {
    blk.iter().fold(0.0f64, |a, &v| a.max(f64::from(v).abs()))
}

/// The exact f64 round trip of one block with scale `s`.
fn fp4_values(blk: &[f32], s: f64) -> Vec<f64> {
    blk.iter().map(|&v| nearest_on_grid((f64::from(v) / s).clamp(-6.0, 6.0), &E2M1_GRID) * s).collect()
}

impl QatKernel {
    fn rows_scale_candidates(blk: &[f32], grid: &[f64]) -> Vec<f64> {
        grid_candidates(block_amax(blk).max(6.0 * 2f64.powi(-9)) / 6.0, grid)
    }
}

impl Kernel for QatKernel {
    fn name(&self) -> &'static str {
        qat::QAT[self.0 as usize].kernel
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 3] = [&[Variant::new("ref", &[crate::kernels::qat::QAT[0]])], &[Variant::new("ref", &[crate::kernels::qat::QAT[1]])], &[Variant::new("ref", &[crate::kernels::qat::QAT[2]])]];
        V[self.0 as usize]
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 4 } else { 64 };
        let many = if quick { 40 } else { 600 };
        let mut v = match self.0 {
            Qat::Fp8 => vec![Case::new("window kv 512", r, 512, 0), Case::new("tiny kv 64", 9, 64, 0), Case::new("many rows 512", many, 512, 0)],
            Qat::Fp4Rows => vec![Case::new("compressed kv 512", r, 512, 0), Case::new("tiny kv 64", 9, 64, 0), Case::new("many rows 512", many, 512, 0), Case::new("awkward 16", 3, 16, 0)],
            Qat::Fp4Index => vec![
                Case::new("index q 32x128", r, 4096, 0),
                Case::new("index k 128", many, 128, 0),
                Case::new("tiny index q 2x32", 9, 64, 0),
                Case::new("tiny index k 32", 5, 32, 0),
            ],
        };
        v.push(Case::new("awkward 1 row 96", 1, 96, 0));
        v.push(Case::new("edge 256", 6, 256, 0).edge());
        v
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let bs = self.0.block();
        let mut x: Vec<f32> = (0..case.rows * case.n).map(|_| rng.normal()).collect();
        for (b, blk) in x.chunks_mut(bs).enumerate() {
            let s = pow2(rng.below(41) as i32 - 20);
            blk.iter_mut().for_each(|v| *v *= s);
            if b % 3 == 0 {
                blk[bs - 1] *= 16.0;
            }
            if case.edge {
                match b % 7 {
                    0 => blk.fill(0.0),
                    1 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = f32::from(i as u8) * 1e-30),
                    2 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = [6.0, 0.25, -0.75, 1.25, 1.75, -2.5, 3.5, 5.0][i % 8]),
                    3 => blk.iter_mut().for_each(|v| *v *= 1e30),
                    4 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = [448.0, 432.0, -7.5, 1.0625, -0.0, 0.0][i % 6]),
                    5 => blk.iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 8.0) * 0.375),
                    _ => blk[bs - 1] = 6.0 * pow2(-9),
                }
            }
        }
        Inputs { data: vec![Data::rows_f32(&x, case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, _case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&qat::qat(self.0, &inputs.data[0].f32s()))]
    }
    fn reference(&self, _case: &Case, inputs: &Inputs) -> Vec<f64> {
        let x = inputs.data[0].f32s();
        let e4m3 = e4m3_grid();
        let mut out = Vec::with_capacity(x.len());
        for blk in x.chunks(self.0.block()) {
            let amax = block_amax(blk);
            match self.0 {
                Qat::Fp8 => {
                    let s = 2f64.powf((amax.max(f64::from(1e-4f32)) / 448.0).log2().ceil());
                    out.extend(blk.iter().map(|&v| nearest_on_grid(f64::from(v) / s, &e4m3) * s));
                }
                Qat::Fp4Rows => out.extend(fp4_values(blk, nearest_on_grid(amax.max(6.0 * 2f64.powi(-9)) / 6.0, &e4m3))),
                Qat::Fp4Index => {
                    let e = (amax.max(6.0 * 2f64.powi(-126)) / 6.0).log2().ceil().clamp(-126.0, 126.0);
                    out.extend(fp4_values(blk, 2f64.powf(e)));
                }
            }
        }
        out
    }
    fn bound(&self, _case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        if self.0 != Qat::Fp4Rows {
            return vec![0.0; reference.len()];
        }
        let x = inputs.data[0].f32s();
        let e4m3 = e4m3_grid();
        let mut out = Vec::with_capacity(x.len());
        for (blk, r) in x.chunks(16).zip(reference.chunks(16)) {
            let mut worst = vec![0.0f64; blk.len()];
            for s in Self::rows_scale_candidates(blk, &e4m3) {
                for (i, &v) in blk.iter().enumerate() {
                    for q in grid_candidates((f64::from(v) / s).clamp(-6.0, 6.0), &E2M1_GRID) {
                        worst[i] = worst[i].max((q * s - r[i]).abs());
                    }
                }
            }
            out.extend(worst);
        }
        out
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, n) = (case.rows, case.n);
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let y = poisoned(gpu, m * n)?;
        let mut rec = Recorder::new(gpu);
        qat::record_qat(&mut rec, self.0, &x, &y, m, n, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last element of the amax reduction"),
            Control::new(2, "drop the scale on the way back"),
            Control::new(3, "leave one output unwritten"),
            Control::new(4, "take amax from the next row's block"),
            Control::new(5, "truncate instead of rounding to nearest even"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
}

static QAT_KERNELS: [QatKernel; 3] = [QatKernel(Qat::Fp8), QatKernel(Qat::Fp4Rows), QatKernel(Qat::Fp4Index)];

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    QAT_KERNELS.iter().map(|q| q as &dyn Kernel).collect()
}

