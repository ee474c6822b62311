//! Contract registrations of the indexer's selections: level-one candidate blocks and the top-k.
use crate::kernels::indexer;
use crate::kernels::util::{f64s, poisoned, read_outputs, words};
use crate::kernels::util::{bf16_normal, rows_u32, u32s};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant};
use crate::gpu::{Gpu, GpuError, Recorder};

pub(super) static CANDIDATE_MASK: CandidateMaskKernel = CandidateMaskKernel;
pub(super) static INDEX_TOPK: IndexTopkKernel = IndexTopkKernel;

/// Workgroup memory of the radix selection (histogram, finite count, scan, pick).
const RADIX_BYTES: u32 = 1024 + 4 + 1024 + 16;

/// Indices of the top `k` of `v` by (value desc, index asc) in f64, values at -inf dropped.
fn top_indices(v: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    order.into_iter().take(k).filter(|&i| v[i] > f64::NEG_INFINITY).collect()
}

/// Indices of the top `min(k, visible)` of `v[..visible]` by (value desc, index asc) in f64, -inf kept.
fn top_visible(v: &[f64], visible: usize, k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..visible.min(v.len())).collect();
    order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
    order.truncate(k);
    order
}

/// Sets all but `keep` random entries of a row to -inf, as a candidate mask does.
fn mask_all_but(rng: &mut Rng, row: &mut [f32], keep: usize) {
    let n = row.len();
    let mut kept = 0;
    for (t, v) in row.iter_mut().enumerate() {
        if rng.below((n - t) as u64) < (keep - kept.min(keep)) as u64 {
            kept += 1;
        } else {
            *v = f32::NEG_INFINITY;
        }
    }
}

/// Scores as f64 with -0 folded into +0 (the selections compare values, not bits).
fn f64_scores(s: &[f32]) -> Vec<f64> {
    s.iter().map(|&v| f64::from(v) + 0.0).collect()
}

/// A score on a grid of 1/8 (many exact ties, as relu makes), -0 and infinities kept.
fn coarse(v: f32) -> f32 {
    if v.is_finite() && v != 0.0 {
        (v * 8.0).round() * 0.125
    } else {
        v
    }
}

/// Candidate blocks registration: `case.n` positions, `case.k` = blocks << 8 | block size.
pub struct CandidateMaskKernel;

fn blocks_of(case: &Case) -> (usize, usize) {
    (case.k >> 8, case.k & 0xff)
}

impl Kernel for CandidateMaskKernel {
    fn name(&self) -> &'static str {
        "candidate_mask"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::indexer::CANDIDATE_MASK])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let (r, n) = if quick { (2, 20000) } else { (8, 65536) };
        vec![
            Case::new(&format!("release {n} positions, 2048 blocks of 8"), r, n, 2048 << 8 | 8),
            Case::new("awkward 1001 positions, 37 blocks of 8", 5, 1001, 37 << 8 | 8),
            Case::new("tiny 40 positions, 3 blocks of 2", 9, 40, 3 << 8 | 2),
            Case::new("release 4000 positions, all blocks", 3, 4000, 2048 << 8 | 8),
            Case::new("awkward 1 position", 2, 1, 3 << 8 | 2),
            Case::new("edge 300 positions, 5 blocks of 8", 4, 300, 5 << 8 | 8).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (mut s, vis) = random_scores(rng, case.rows, case.n, case.edge);
        s.iter_mut().for_each(|v| *v = coarse(*v));
        Inputs { data: vec![Data::rows_f32(&s, case.n), rows_u32(&vis, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (blocks, block) = blocks_of(case);
        let (s, vis) = (inputs.data[0].f32s(), u32s(&inputs.data[1]));
        let out: Vec<f32> = (0..case.rows).flat_map(|i| indexer::candidate_mask_row(&s[i * case.n..(i + 1) * case.n], vis[i] as usize, blocks, block)).collect();
        vec![words(&out)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (blocks, block) = blocks_of(case);
        let (s, vis) = (f64_scores(&inputs.data[0].f32s()), u32s(&inputs.data[1]));
        let n = case.n;
        let mut out = Vec::with_capacity(case.rows * n);
        for i in 0..case.rows {
            let row = &s[i * n..(i + 1) * n];
            let nb = n.div_ceil(block);
            let mut bs: Vec<f64> = (0..nb).map(|b| row[b * block..((b + 1) * block).min(n)].iter().copied().fold(f64::NEG_INFINITY, f64::max)).collect();
            let v = (vis[i] as usize).min(n);
            if v > 0 {
                bs[(v - 1) / block] = f64::INFINITY;
            }
            let mut keep = vec![false; nb];
            top_indices(&bs, blocks).into_iter().for_each(|b| keep[b] = true);
            out.extend((0..n).map(|t| if keep[t / block] { 1.0 } else { 0.0 }));
        }
        out
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (blocks, block) = blocks_of(case);
        let (m, n) = (case.rows, case.n);
        let (s, vis) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let y = poisoned(gpu, m * n)?;
        let mut rec = Recorder::new(gpu);
        indexer::record_candidate_mask(&mut rec, &s, &vis, &y, m, n, blocks, block, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * n)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "keep tied blocks from the highest index"),
            Control::new(2, "skip the last position of each block's max"),
            Control::new(3, "do not pin the newest block"),
            Control::new(4, "leave the last output unwritten"),
            Control::new(5, "score blocks from the next row"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: RADIX_BYTES, bindings: 3 }
    }
}

/// Indexer top-k registration: `case.n` scores per row, `case.k` picks.
pub struct IndexTopkKernel;

impl Kernel for IndexTopkKernel {
    fn name(&self) -> &'static str {
        "index_topk"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::indexer::INDEX_TOPK])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let (r, n) = if quick { (3, 40000) } else { (8, 65536) };
        vec![
            Case::new(&format!("release {n} keys top-512"), r, n, 512),
            Case::new("tiny 20 keys top-4", 9, 20, 4),
            Case::new("masked 40 keys top-4, fewer finite than 4", 6, 40, 4),
            Case::new("few visible 300 keys top-512", 4, 300, 512),
            Case::new("awkward 1000 keys top-33", 5, 1000, 33),
            Case::new("awkward 1 key top-4", 2, 1, 4),
            Case::new("edge 700 keys top-512", 4, 700, 512).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (mut s, vis) = random_scores(rng, case.rows, case.n, case.edge);
        let finite = case.k.saturating_sub(1).max(1);
        for (i, row) in s.chunks_mut(case.n).enumerate() {
            match i % 3 {
                0 if !case.edge && vis[i] as usize == case.n => row[case.n - 1] = 4.0,
                2 => row.iter_mut().for_each(|v| *v = coarse(*v)),
                _ => {}
            }
            if i % 2 == 1 {
                mask_all_but(rng, &mut row[..vis[i] as usize], finite);
            }
        }
        Inputs { data: vec![Data::rows_f32(&s, case.n), rows_u32(&vis, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.k]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (s, vis) = (inputs.data[0].f32s(), u32s(&inputs.data[1]));
        let out: Vec<f32> = s.chunks(case.n).zip(vis).flat_map(|(row, v)| indexer::select_row(row, v as usize, case.k)).collect();
        vec![words(&out)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (s, vis) = (f64_scores(&inputs.data[0].f32s()), u32s(&inputs.data[1]));
        let mut out = Vec::with_capacity(case.rows * case.k);
        for (row, v) in s.chunks(case.n).zip(vis) {
            let mut picks = top_visible(row, v as usize, case.k);
            picks.sort_unstable();
            out.extend(picks.iter().map(|&i| i as f64));
            out.extend(std::iter::repeat_n(-1.0, case.k - picks.len()));
        }
        out
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, n, k) = (case.rows, case.n, case.k);
        let (s, vis) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let y = poisoned(gpu, m * k)?;
        let mut rec = Recorder::new(gpu);
        indexer::record_index_topk(&mut rec, &s, &vis, &y, m, n, k, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * k)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "keep tied scores from the highest index"),
            Control::new(2, "skip the last score"),
            Control::new(3, "leave the last slot of row 0 unwritten"),
            Control::new(4, "select from the next row"),
            Control::new(5, "drop picks at -inf"),
            Control::new(6, "select past the visible count"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 256, workgroup_bytes: RADIX_BYTES, bindings: 3 }
    }
}

/// Random indexer scores of rows of `n`: exact zeros (relu), signed zeros, bf16 values, -inf from a per-row visible count on.
pub(super) fn random_scores(rng: &mut Rng, rows: usize, n: usize, edge: bool) -> (Vec<f32>, Vec<u32>) {
    let mut s = Vec::with_capacity(rows * n);
    let mut vis = Vec::with_capacity(rows);
    for i in 0..rows {
        let v = match i % 3 {
            0 => n,
            1 => rng.below(n.min(600) as u64 + 1) as usize,
            _ => rng.below(n as u64 + 1) as usize,
        };
        vis.push(v as u32);
        s.extend((0..n).map(|t| {
            if t >= v {
                f32::NEG_INFINITY
            } else if edge {
                [0.0, -0.0, 1.0, 0.5][rng.below(4) as usize]
            } else {
                match rng.below(10) {
                    0..=2 => 0.0,
                    3 => -0.0,
                    _ => bf16_normal(rng, 0.25),
                }
            }
        }));
    }
    (s, vis)
}
