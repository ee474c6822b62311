//! Contract registrations of the indexer family (scores, level-two masking) and the wiring of the whole family.
use super::select_contract::{self as select, random_scores};

use crate::kernels::indexer;
use crate::kernels::util::{rows_u32, u32s, bf16_normal, canonical_depth, f64s, gamma, poisoned, read_outputs, run_uploaded, tiny, words, TERM};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::kernels::qat::Qat;
use crate::kernels::state::{pack_rows, Packing};
use crate::numerics::{e2m1_to_f32, pow2};

static INDEX_SCORES: IndexScoresKernel = IndexScoresKernel;
static MASK_SCORES: MaskScoresKernel = MaskScoresKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&INDEX_SCORES, &select::CANDIDATE_MASK, &MASK_SCORES, &select::INDEX_TOPK]
}


/// Relative error of one bf16 rounding (half a bf16 ulp).
const BF: f64 = 1.0 / 256.0;

/// Index scores registration: `case.n` keys, `case.k` = heads << 16 | dim.
pub struct IndexScoresKernel;

fn heads_dim(case: &Case) -> (usize, usize) {
    (case.k >> 16, case.k & 0xffff)
}

fn scores_case(label: &str, rows: usize, t: usize, heads: usize, dim: usize) -> Case {
    Case::new(label, rows, t, heads << 16 | dim)
}

/// An fp4 QAT value: e2m1 code times a power of two.
fn fp4_value(rng: &mut Rng, e: i32) -> f32 {
    e2m1_to_f32(rng.below(16) as u8) * pow2(e)
}

/// Exact per-key terms of one query against one key: for each head (relu(dot) * |w|, bound of the head's term error).
fn head_terms(q: &[f32], w: &[f32], k: &[f32], dim: usize) -> (f64, f64, f64) {
    let gd = gamma(canonical_depth(dim));
    let (mut exact, mut mag, mut err) = (0.0f64, 0.0f64, 0.0f64);
    for (h, &wh) in w.iter().enumerate() {
        let qh = &q[h * dim..(h + 1) * dim];
        let d: f64 = qh.iter().zip(k).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
        let a: f64 = qh.iter().zip(k).map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs()).sum();
        let wa = f64::from(wh).abs();
        let e_h = gd * a + dim as f64 * TERM + BF * (d.abs() + gd * a + dim as f64 * TERM);
        let f_h = wa * e_h + TERM + BF * wa * (d.max(0.0) + e_h);
        exact += d.max(0.0) * f64::from(wh);
        mag += wa * d.max(0.0) + f_h;
        err += f_h;
    }
    (exact, mag, err)
}

/// Keys repeat block 0 as block 1 and half the query heads cancel there at 2^14 scale: exact zero in the canonical order, visible when the block order changes.
fn cancel_blocks(rng: &mut Rng, q: &mut [f32], keys: &mut [f32], dim: usize) {
    for k in keys.chunks_mut(dim) {
        let (a, b) = k.split_at_mut(32);
        b[..32].copy_from_slice(a);
    }
    for qh in q.chunks_mut(dim) {
        if rng.below(2) == 0 {
            for i in 0..32 {
                qh[i] *= pow2(14);
                qh[32 + i] = -qh[i];
            }
        }
    }
}

impl IndexScoresKernel {
    /// (reference, bound) of every output.
    fn reference_and_bound(&self, case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
        let (heads, dim) = heads_dim(case);
        let gh = gamma(canonical_depth(heads));
        let (q, w, keys, vis) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s(), u32s(&inputs.data[3]));
        let (mut r, mut b) = (Vec::new(), Vec::new());
        for i in 0..case.rows {
            for t in 0..case.n {
                if t >= vis[i] as usize {
                    r.push(f64::NEG_INFINITY);
                    b.push(0.0);
                    continue;
                }
                let qr = &q[i * heads * dim..(i + 1) * heads * dim];
                let (exact, mag, err) = head_terms(qr, &w[i * heads..(i + 1) * heads], &keys[t * dim..(t + 1) * dim], dim);
                let sum_err = err + gh * mag;
                r.push(exact);
                b.push(1.001 * (sum_err * (1.0 + BF) + BF * exact.abs()) + 1e-37);
            }
        }
        (r, b)
    }
}

impl Kernel for IndexScoresKernel {
    fn name(&self) -> &'static str {
        "index_scores"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::indexer::INDEX_SCORES]), Variant::new("packed", &[crate::kernels::indexer::INDEX_SCORES_PACKED])];
        V
    }
    fn supports(&self, variant: &Variant, case: &Case) -> bool {
        variant.name != "packed" || heads_dim(case).1.is_multiple_of(32)
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let (r, t) = if quick { (2, 1500) } else { (8, 16384) };
        vec![
            scores_case(&format!("release 32x128 over {t} keys"), r, t, 32, 128),
            scores_case("tiny 2x32 over 20 keys", 9, 20, 2, 32),
            scores_case("awkward 40 heads x 33 over 50 keys", 3, 50, 40, 33),
            scores_case("awkward 3 heads x 300 over 70 keys", 1, 70, 3, 300),
            scores_case("awkward 1 key", 4, 1, 32, 128),
            scores_case("edge 32x128 over 64 keys", 3, 64, 32, 128).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (heads, dim) = heads_dim(case);
        let (rows, t) = (case.rows, case.n);
        let mut q = Vec::with_capacity(rows * heads * dim);
        for bi in 0..rows * heads * dim.div_ceil(32) {
            let e = rng.below(5) as i32 - 3;
            // Edge: the last row's queries are tiny, so its products straddle 2^-103.
            let tiny_head = bi * 32 / (heads * dim) + 1 == rows;
            q.extend((0..32).map(|_| match (case.edge, tiny_head) {
                (true, true) => tiny(rng, -126, -98),
                (true, false) => [0.0, -0.0, 1.0, -1.0, 0.5][rng.below(5) as usize],
                _ => bf16_normal(rng, pow2(e)),
            }));
        }
        q.truncate(rows * heads * dim);
        let mut keys = Vec::with_capacity(t * dim);
        for _ in 0..t * dim.div_ceil(32) {
            let e = rng.below(4) as i32 - 2;
            keys.extend((0..32).map(|_| fp4_value(rng, e)));
        }
        keys.truncate(t * dim);
        if !case.edge && dim >= 64 {
            cancel_blocks(rng, &mut q, &mut keys, dim);
        }
        let scale = (1.0 / (dim as f64 * heads as f64).sqrt()) as f32;
        let w: Vec<f32> = (0..rows * heads)
            .map(|_| if case.edge { [0.0, -0.0, 0.25, -0.25][rng.below(4) as usize] } else { bf16_normal(rng, scale) })
            .collect();
        let vis: Vec<u32> = (0..rows)
            .map(|i| match i % 3 {
                0 => t as u32,
                1 => rng.below(t as u64 + 1) as u32,
                _ => (t as u32).saturating_sub(1),
            })
            .collect();
        Inputs { data: vec![Data::rows_f32(&q, heads * dim), Data::rows_f32(&w, heads), Data::shared(bytemuck::cast_slice(&keys).to_vec()), rows_u32(&vis, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (heads, dim) = heads_dim(case);
        let (q, w, keys, vis) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s(), u32s(&inputs.data[3]));
        let mut out = Vec::with_capacity(case.rows * case.n);
        for i in 0..case.rows {
            out.extend(indexer::scores_row(&q[i * heads * dim..(i + 1) * heads * dim], &w[i * heads..(i + 1) * heads], &keys, dim, vis[i] as usize));
        }
        vec![words(&out)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        self.reference_and_bound(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        self.reference_and_bound(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (heads, dim) = heads_dim(case);
        let (s, t) = (case.rows, case.n);
        if variant.name != "packed" {
            return run_uploaded(gpu, inputs, &[s * t], |rec, b, y| indexer::record_index_scores(rec, &b[0], &b[1], &b[2], &b[3], &y[0], s, t, heads, dim, None, control));
        }
        // The keys as the engine keeps them: packed rows of their e2m1 codes and e8m0 scales.
        let p = Packing::new(Qat::Fp4Index, dim).map_err(|message| GpuError::Shader { kernel: "index_scores/packed".into(), message })?;
        let mut packed = inputs.clone();
        packed.data[2] = Data::shared(bytemuck::cast_slice(&pack_rows(p, &inputs.data[2].f32s())).to_vec());
        run_uploaded(gpu, &packed, &[s * t], |rec, b, y| indexer::record_index_scores(rec, &b[0], &b[1], &b[2], &b[3], &y[0], s, t, heads, dim, Some(p), control))
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last block of each head's dot"),
            Control::new(2, "reverse the block order within a segment"),
            Control::new(3, "take the head weights from the next row"),
            Control::new(4, "leave one output unwritten"),
            Control::new(5, "skip the bf16 rounding of each head's dot"),
            Control::new(6, "drop head 0's weight"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: 12288, bindings: 6 }
    }
}

/// Level-two masking registration: `case.n` scores per row.
pub struct MaskScoresKernel;

impl Kernel for MaskScoresKernel {
    fn name(&self) -> &'static str {
        "mask_scores"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::indexer::MASK_SCORES])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 2 } else { 16 };
        vec![
            Case::new("release 20000 keys", r, 20000, 0),
            Case::new("tiny 20 keys", 9, 20, 0),
            Case::new("awkward 33 keys", 3, 33, 0),
            Case::new("awkward 1 key", 2, 1, 0),
            Case::new("edge 64 keys", 3, 64, 0).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (s, _) = random_scores(rng, case.rows, case.n, case.edge);
        let mask: Vec<f32> = (0..case.rows * case.n).map(|_| if rng.below(2) == 0 { 1.0 } else { 0.0 }).collect();
        Inputs { data: vec![Data::rows_f32(&s, case.n), Data::rows_f32(&mask, case.n)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (s, m) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let out: Vec<f32> = s.chunks(case.n.max(1)).zip(m.chunks(case.n.max(1))).flat_map(|(a, b)| indexer::mask_row(a, b)).collect();
        vec![words(&out)]
    }
    fn reference(&self, _case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (s, m) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        s.iter().zip(&m).map(|(&v, &k)| if k == 1.0 { f64::from(v) } else { f64::NEG_INFINITY }).collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, n) = (case.rows, case.n);
        let (s, k) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let y = poisoned(gpu, m * n)?;
        let mut rec = Recorder::new(gpu);
        indexer::record_mask_scores(&mut rec, &s, &k, &y, m, n, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "leave the last output unwritten"),
            Control::new(2, "read the next row's mask"),
            Control::new(3, "keep where the mask is 0"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 3 }
    }
}
