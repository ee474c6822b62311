//! Contract registrations of mHC collapse and expand (`case.n` = d, `case.k` = hc | mix columns << 8).
use crate::kernels::hc;
use crate::kernels::util::{f64s, gamma, poisoned, read_outputs, tiny, words, FLUSH};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::numerics::{pow2, round_bf16};

/// Half a bf16 ulp relative to the value.
pub(crate) const BF16_HALF: f64 = 1.0 / 256.0;

/// Registration of mHC collapse (`expand` false) or expand.
pub struct StreamKernel {
    pub expand: bool,
}

fn hc_of(case: &Case) -> usize {
    case.k & 0xff
}

fn mix_cols(case: &Case) -> usize {
    case.k >> 8
}

fn shape(label: &str, rows: usize, d: usize, hc: usize, cols: usize) -> Case {
    Case::new(&format!("{label} {rows}x{hc}x{d}"), rows, d, hc | cols << 8)
}

/// Rows of bf16 stream values with a per-row power-of-two spread.
pub(crate) fn stream_rows(rng: &mut Rng, rows: usize, width: usize, edge: bool) -> Vec<f32> {
    let mut v = Vec::with_capacity(rows * width);
    for r in 0..rows {
        let s = pow2(rng.below(13) as i32 - 6);
        v.extend((0..width).map(|i| {
            if edge && i % 5 == r % 5 {
                [0.0f32, -0.0, 65280.0, -1.0e-20, f32::from_bits(0x3f80_8000)][i % 5]
            } else if edge && i % 3 == 1 {
                tiny(rng, -126, -100)
            } else {
                round_bf16(rng.normal() * s)
            }
        }));
    }
    v
}

/// Every eighth column: streams 0 and 1 large and cancelling under weights `mix[w0]`, `mix[w0 + step]`, the rest small, so the summation order shows after bf16 rounding.
#[allow(clippy::too_many_arguments)]
fn cancel_pairs(rng: &mut Rng, h: &mut [f32], mix: &[f32], hc: usize, d: usize, cols: usize, w0: usize, step: usize) {
    for (r, row) in h.chunks_mut(hc * d).enumerate() {
        let (a, b) = (mix[r * cols + w0], mix[r * cols + w0 + step]);
        for k in (3..d).step_by(8) {
            let t = rng.normal() * 1024.0;
            row[k] = t;
            row[d + k] = -(t * a) / b;
            (2..hc).for_each(|i| row[i * d + k] = rng.normal() * 1e-3);
        }
    }
}

impl Kernel for StreamKernel {
    fn name(&self) -> &'static str {
        if self.expand {
            "hc_expand"
        } else {
            "hc_collapse"
        }
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 2] = [&[Variant::new("ref", &[crate::kernels::hc::dispatch::HC_COLLAPSE])], &[Variant::new("ref", &[crate::kernels::hc::dispatch::HC_EXPAND])]];
        if self.expand { V[1] } else { V[0] }
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 32 };
        let many = if quick { 60 } else { 500 };
        let mut v = vec![
            shape("hidden", r, 5120, 4, 24),
            shape("tiny", 9, 64, 4, 24),
            shape("hf test", 5, 64, 2, 8),
            shape("awkward", 3, 37, 3, 15),
            shape("one row", 1, 5120, 4, 24),
            shape("many rows", many, 64, 4, 24),
            shape("edge", 4, 96, 4, 24).edge(),
        ];
        if !self.expand {
            v.push(shape("one-hot pre", 4, 64, 4, 4));
        }
        v
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (hc, d, cols) = (hc_of(case), case.n, mix_cols(case));
        let h = stream_rows(rng, case.rows, hc * d, case.edge);
        let mix: Vec<f32> = (0..case.rows * cols)
            .map(|i| match i % cols {
                c if c < hc => rng.uniform(0.0, 1.0),
                c if c < 2 * hc => rng.uniform(0.0, 2.0),
                _ => rng.uniform(0.0, 1.0),
            })
            .collect();
        let mut h = h;
        if !case.edge && hc >= 2 {
            cancel_pairs(rng, &mut h, &mix, hc, d, cols, if self.expand { 2 * hc } else { 0 }, if self.expand { hc } else { 1 });
        }
        let mut out = stream_rows(rng, case.rows, d, case.edge);
        if case.edge {
            // Every fourth column just above 2^-126 in every stream and in the layer output: its products and sums fall below it.
            for r in 0..case.rows {
                for k in (1..d).step_by(4) {
                    (0..hc).for_each(|s| h[(r * hc + s) * d + k] = tiny(rng, -126, -124));
                    out[r * d + k] = tiny(rng, -126, -124);
                }
            }
        }
        let mut data = vec![Data::rows_f32(&h, hc * d), Data::rows_f32(&mix, cols)];
        if self.expand {
            data.insert(0, Data::rows_f32(&out, d));
        }
        Inputs { data }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![if self.expand { hc_of(case) * case.n } else { case.n }]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (hc, d, cols) = (hc_of(case), case.n, mix_cols(case));
        let f: Vec<Vec<f32>> = inputs.data.iter().map(|x| x.f32s()).collect();
        let mut y = Vec::new();
        for r in 0..case.rows {
            if self.expand {
                let (o, h, m) = (&f[0][r * d..(r + 1) * d], &f[1][r * hc * d..(r + 1) * hc * d], &f[2][r * cols..(r + 1) * cols]);
                y.extend(hc::expand(o, h, &m[hc..2 * hc], &m[2 * hc..], hc, d));
            } else {
                y.extend(hc::collapse(&f[0][r * hc * d..(r + 1) * hc * d], &f[1][r * cols..r * cols + hc], hc, d));
            }
        }
        vec![words(&y)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.terms(case, inputs).iter().map(|t| t.iter().sum()).collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        let n = hc_of(case) + 2;
        self.terms(case, inputs)
            .iter()
            .zip(reference)
            .map(|(t, r)| {
                let e = gamma(n) * t.iter().map(|v| v.abs()).sum::<f64>() + 2.0 * n as f64 * FLUSH;
                e + BF16_HALF * (r.abs() + e)
            })
            .collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, hc, d) = (case.rows, hc_of(case), case.n);
        let bufs = inputs.data.iter().map(|x| gpu.upload(&x.bytes)).collect::<Result<Vec<_>, _>>()?;
        let words = if self.expand { m * hc * d } else { m * d };
        let y = poisoned(gpu, words)?;
        let mut rec = Recorder::new(gpu);
        if self.expand {
            hc::record_hc_expand(&mut rec, &bufs[0], &bufs[1], &bufs[2], &y, m, hc, d, control)?;
        } else {
            hc::record_hc_collapse(&mut rec, &bufs[0], &bufs[1], &y, m, hc, d, mix_cols(case), control)?;
        }
        rec.submit()?;
        read_outputs(gpu, &[(&y, words)])
    }
    fn controls(&self) -> &'static [Control] {
        if self.expand {
            const { &[
                Control::new(1, "skip the last stream of the sum"),
                Control::new(2, "sum the streams in reverse order"),
                Control::fusion(3, "products fused into the sum"),
                Control::new(4, "use the next row's mix"),
                Control::new(5, "leave the last output unwritten"),
                Control::new(6, "double the post scale"),
                KEEP_SUBNORMALS,
            ] }
        } else {
            const { &[
                Control::new(1, "skip the last stream of the sum"),
                Control::new(2, "sum the streams in reverse order"),
                Control::fusion(3, "products fused into the sum"),
                Control::new(4, "use the next row's pre"),
                Control::new(5, "leave the last output unwritten"),
                Control::new(6, "skip the bf16 rounding"),
                KEEP_SUBNORMALS,
            ] }
        }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: if self.expand { 4 } else { 3 } }
    }
}

impl StreamKernel {
    /// The exact f64 terms of every output element (expand: the post term first).
    fn terms(&self, case: &Case, inputs: &Inputs) -> Vec<Vec<f64>> {
        let (hc, d, cols) = (hc_of(case), case.n, mix_cols(case));
        let f: Vec<Vec<f64>> = inputs.data.iter().map(|x| x.f32s().iter().map(|&v| f64::from(v)).collect()).collect();
        let mut out = Vec::new();
        for r in 0..case.rows {
            if self.expand {
                let (o, h, m) = (&f[0][r * d..], &f[1][r * hc * d..], &f[2][r * cols..]);
                for j in 0..hc {
                    out.extend((0..d).map(|k| std::iter::once(m[hc + j] * o[k]).chain((0..hc).map(|i| m[2 * hc + i * hc + j] * h[i * d + k])).collect()));
                }
            } else {
                let (h, m) = (&f[0][r * hc * d..], &f[1][r * cols..]);
                out.extend((0..d).map(|k| (0..hc).map(|i| m[i] * h[i * d + k]).collect()));
            }
        }
        out
    }
}
