//! Contract registrations of RoPE, forward, inverse and split-half (`case.n` = head_dim, `case.k` = heads | rd << 16).
use crate::kernels::ops::contract::bf16_reference;
use crate::kernels::rope::{self, table_row, Pairs};
use crate::kernels::util::{f64s, gamma, poisoned, read_outputs, tiny, words, FLUSH};
use crate::kernels::hc::stream_contract::BF16_HALF;
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::numerics::pow2;

/// Registration of RoPE (`inverse` rotates by the negated angle).
pub struct RopeKernel {
    pub inverse: bool,
    pub pairs: Pairs,
}

fn dims(case: &Case) -> (usize, usize, usize) {
    (case.k & 0xffff, case.n, case.k >> 16)
}

fn shape(label: &str, rows: usize, heads: usize, head_dim: usize, rd: usize) -> Case {
    Case::new(&format!("{label} {rows}x{heads}x{head_dim} rd {rd}"), rows, head_dim, heads | rd << 16)
}

impl Kernel for RopeKernel {
    fn name(&self) -> &'static str {
        match (self.pairs, self.inverse) {
            (Pairs::Halves, _) => "rope_halves",
            (_, true) => "rope_inverse",
            _ => "rope",
        }
    }
    fn variants(&self) -> &'static [Variant] {
        const V: [&[Variant]; 3] = [&[Variant::new("ref", &[rope::ROPE])], &[Variant::new("ref", &[rope::ROPE_INVERSE])], &[Variant::new("ref", &[rope::ROPE_HALVES])]];
        match (self.pairs, self.inverse) {
            (Pairs::Halves, _) => V[2],
            (_, true) => V[1],
            _ => V[0],
        }
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 2 } else { 32 };
        if self.pairs == Pairs::Halves {
            return vec![
                shape("vit q", if quick { 4 } else { 64 }, 16, 64, 64),
                shape("tiny vit", 9, 2, 32, 32),
                shape("awkward", 3, 3, 40, 10),
                shape("edge", 4, 4, 64, 16).edge(),
            ];
        }
        let many = if quick { 100 } else { 1000 };
        vec![
            shape("q", r, 64, 512, 64),
            shape("kv", 5, 1, 512, 64),
            shape("index q", r, 32, 128, 64),
            shape("index k", many, 1, 128, 64),
            shape("tiny q", 7, 4, 64, 16),
            shape("tiny index q", 6, 2, 32, 16),
            shape("hf test", 5, 4, 32, 8),
            shape("awkward", 3, 3, 40, 10),
            shape("one row", 1, 64, 512, 64),
            shape("edge", 4, 4, 64, 16).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (heads, hd, rd) = dims(case);
        let width = heads * hd;
        let mut x = Vec::with_capacity(case.rows * width);
        let mut cs = Vec::with_capacity(case.rows * rd);
        let theta = if (rd == 64 && hd == 512) || self.pairs == Pairs::Halves { 10_000f64 } else { 160_000f64 };
        let inv_freq: Vec<f64> = (0..rd / 2).map(|i| theta.powf(-2.0 * i as f64 / rd as f64)).collect();
        for r in 0..case.rows {
            let s = pow2(rng.below(13) as i32 - 6);
            x.extend((0..width).map(|i| {
                if case.edge && i % 3 == 0 {
                    [0.0f32, -0.0, f32::from_bits(0x3f80_8000), -1.0e30, f32::from_bits(0x4040_8000), 65280.0][i / 3 % 6]
                } else if case.edge && i % 3 == 1 {
                    tiny(rng, -126, -110)
                } else {
                    rng.normal() * s
                }
            }));
            let pos = if case.edge { r % 2 } else { rng.below(1 << 20) as usize };
            cs.extend(table_row(pos, &inv_freq));
        }
        Inputs { data: vec![Data::rows_f32(&x, width), Data::rows_f32(&cs, rd)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        let (heads, hd, _) = dims(case);
        vec![heads * hd]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (heads, hd, rd) = dims(case);
        let (x, cs) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let y: Vec<f32> = (0..case.rows).flat_map(|r| rope::rotate(&x[r * heads * hd..(r + 1) * heads * hd], &cs[r * rd..(r + 1) * rd], heads, hd, self.inverse, self.pairs)).collect();
        vec![words(&y)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.terms(case, inputs).iter().map(|t| t.map_or_else(|| f64::NAN, |(p, q)| p + q)).zip(inputs.data[0].f32s()).map(|(v, x)| if v.is_nan() { bf16_reference(x) } else { v }).collect()
    }
    fn bound(&self, case: &Case, inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        self.terms(case, inputs)
            .iter()
            .zip(reference)
            .map(|(t, r)| match t {
                Some((p, q)) => {
                    let e = gamma(2) * (p.abs() + q.abs()) + 3.0 * FLUSH;
                    e + BF16_HALF * (r.abs() + e)
                }
                None => 0.0,
            })
            .collect()
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (heads, hd, rd) = dims(case);
        let n = case.rows * heads * hd;
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let cs = gpu.upload(&inputs.data[1].bytes)?;
        let y = poisoned(gpu, n)?;
        let mut rec = Recorder::new(gpu);
        rope::record_rope(&mut rec, &x, &cs, &y, case.rows, heads, hd, rd, self.inverse, self.pairs, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "rotate by the opposite angle"),
            Control::new(2, "use the next row's table"),
            Control::fusion(3, "products fused into the add"),
            Control::new(4, "leave the last output unwritten"),
            Control::new(5, "skip the bf16 rounding"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 3 }
    }
}

impl RopeKernel {
    /// The two exact f64 products of each rotated output (None for dims outside the rope part).
    fn terms(&self, case: &Case, inputs: &Inputs) -> Vec<Option<(f64, f64)>> {
        let (heads, hd, rd) = dims(case);
        let (x, cs) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let half = rd / 2;
        let mut out = Vec::with_capacity(x.len());
        for (r, row) in x.chunks(heads * hd).enumerate() {
            let t = &cs[r * rd..(r + 1) * rd];
            for i in 0..heads * hd {
                let p = i % hd;
                if p < hd - rd {
                    out.push(None);
                    continue;
                }
                let q = p - (hd - rd);
                let (pair, second, ia, ib) = match self.pairs {
                    Pairs::Interleaved => (q / 2, q % 2 == 1, i - q % 2, i - q % 2 + 1),
                    Pairs::Halves => {
                        let pair = q % half;
                        (pair, q >= half, i - q + pair, i - q + pair + half)
                    }
                };
                let (a, b) = (f64::from(row[ia]), f64::from(row[ib]));
                let c = f64::from(t[pair]);
                let s = f64::from(t[half + pair]) * if self.inverse { -1.0 } else { 1.0 };
                out.push(Some(if second { (a * s, b * c) } else { (a * c, -(b * s)) }));
            }
        }
        out
    }
}

static ROPE_KERNELS: [RopeKernel; 3] = [
    RopeKernel { inverse: false, pairs: Pairs::Interleaved },
    RopeKernel { inverse: true, pairs: Pairs::Interleaved },
    RopeKernel { inverse: false, pairs: Pairs::Halves },
];

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    ROPE_KERNELS.iter().map(|r| r as &dyn Kernel).collect()
}

