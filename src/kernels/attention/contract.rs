//! Contract registrations of sparse attention with sink, compressor pooling and row copies.
use crate::kernels::attention::{self, split, AttnDims};
use crate::kernels::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, tiny, words, TERM, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Lang, Recorder};
use crate::numerics::round_bf16;

static SPARSE_ATTENTION: SparseAttentionKernel = SparseAttentionKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&SPARSE_ATTENTION]
}


/// One attention shape: heads, head dim, window, selection width, position of row 0, compressed rows, block kv rows (0: causal).
struct Shape {
    heads: usize,
    dim: usize,
    window: usize,
    topk: usize,
    start: usize,
    ncomp: usize,
    block: usize,
}

const SHAPES: [Shape; 11] = [
    Shape { heads: 8, dim: 512, window: 128, topk: 512, start: 1000, ncomp: 1500, block: 0 },
    Shape { heads: 4, dim: 64, window: 8, topk: 4, start: 3, ncomp: 20, block: 0 },
    Shape { heads: 64, dim: 512, window: 128, topk: 512, start: 5000, ncomp: 2500, block: 0 },
    Shape { heads: 64, dim: 512, window: 128, topk: 512, start: 3000, ncomp: 1600, block: 0 },
    Shape { heads: 64, dim: 512, window: 128, topk: 0, start: 0, ncomp: 0, block: 0 },
    Shape { heads: 3, dim: 80, window: 5, topk: 37, start: 2, ncomp: 50, block: 0 },
    Shape { heads: 2, dim: 1000, window: 3, topk: 300, start: 10, ncomp: 400, block: 0 },
    Shape { heads: 4, dim: 64, window: 8, topk: 16, start: 5, ncomp: 30, block: 0 },
    Shape { heads: 4, dim: 64, window: 8, topk: 0, start: 3, ncomp: 0, block: 4 },
    Shape { heads: 64, dim: 512, window: 128, topk: 0, start: 1000, ncomp: 0, block: 5 },
    Shape { heads: 3, dim: 80, window: 5, topk: 0, start: 12, ncomp: 0, block: 7 },
];

fn shape(case: &Case) -> &'static Shape {
    &SHAPES[case.n]
}

/// Sparse attention registration; `case.n` indexes the shape table. Inputs: q, row index (per row), selection (per row), the call's kv, the ring before the call, compressed rows, sinks.
pub struct SparseAttentionKernel;

/// A call's state at its first row `lo`: (start, kv rows of the call, ring with the call's earlier rows written); a block's rows all see the whole block.
fn call_state(case: &Case, inputs: &Inputs) -> (usize, Vec<f32>, Vec<f32>) {
    let sh = shape(case);
    if sh.block > 0 {
        return (sh.start, inputs.data[3].f32s(), inputs.data[4].f32s());
    }
    let lo = inputs.data[1].bytes.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let (kv_all, mut ring) = (inputs.data[3].f32s(), inputs.data[4].f32s());
    for j in 0..lo {
        let slot = (sh.start + j) % sh.window;
        ring[slot * sh.dim..(slot + 1) * sh.dim].copy_from_slice(&kv_all[j * sh.dim..(j + 1) * sh.dim]);
    }
    (sh.start + lo, kv_all[lo * sh.dim..(lo + case.rows) * sh.dim].to_vec(), ring)
}

fn scale_of(sh: &Shape) -> f32 {
    (1.0 / (sh.dim as f64).sqrt()) as f32
}

/// Ascending distinct picks from 0..n, `count` of them, padded with -1 to `k` (interleaved when `scatter`).
fn selection(rng: &mut Rng, n: usize, k: usize, count: usize, scatter: bool) -> Vec<f32> {
    let mut all: Vec<usize> = (0..n).collect();
    let count = count.min(n);
    for i in 0..count {
        let j = i + rng.below((n - i) as u64) as usize;
        all.swap(i, j);
    }
    let mut picks = all[..count].to_vec();
    picks.sort_unstable();
    let mut out: Vec<f32> = picks.iter().map(|&i| i as f32).collect();
    while out.len() < k {
        let at = if scatter { rng.below(out.len() as u64 + 1) as usize } else { out.len() };
        out.insert(at, -1.0);
    }
    out
}

impl Kernel for SparseAttentionKernel {
    fn name(&self) -> &'static str {
        "sparse_attention"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[attention::SPARSE_ATTENTION]), Variant::new("msl_simd", &[attention::SPARSE_ATTENTION_MSL]), Variant::new("split", &attention::split::SPLIT)];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = |q: usize, f: usize| if quick { q } else { f };
        vec![
            Case::new("8 heads x 512, 128 + 512 keys", r(6, 16), 0, 0),
            Case::new("DSpark tiny block 4 x 64, ring filling, block 4", 4, 8, 0),
            Case::new("tiny 4 x 64, window 8, top-4", 9, 1, 0),
            Case::new("release decode 64 x 512", r(1, 2), 2, 0),
            Case::new("release prefill 64 x 512", r(2, 48), 3, 0),
            Case::new("release window only", r(3, 200), 4, 0),
            Case::new("awkward 3 x 80, window 5, top-37", 7, 5, 0),
            Case::new("awkward 2 x 1000, window 3, top-300", 3, 6, 0),
            Case::new("4 x 64, window 8, top-16", 6, 7, 0).edge(),
            Case::new("DSpark release block 64 x 512, ring 128 + block 5", 5, 9, 0),
            Case::new("DSpark block 3 x 80, ring 5 + block 7", 7, 10, 0).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let sh = shape(case);
        let (m, hd) = (case.rows, sh.heads * sh.dim);
        let mut q = Vec::with_capacity(m * hd);
        for _ in 0..m {
            for h in 0..sh.heads {
                let s = [0.5f32, 1.0, 2.0, 4.0][h % 4];
                q.extend((0..sh.dim).map(|i| match (case.edge, h % 4) {
                    (true, 0) => 0.0,
                    (true, 1) => round_bf16(rng.normal() * 64.0),
                    (true, 2) if i % 3 == 0 => -0.0,
                    _ => round_bf16(rng.normal() * s),
                }));
            }
        }
        let kv_rows = |rng: &mut Rng, n: usize, s: f32| -> Vec<f32> {
            (0..n * sh.dim)
                .map(|i| match (case.edge, (i / sh.dim) % 5) {
                    (true, 0) => if i % 2 == 0 { 0.0 } else { -0.0 },
                    (true, _) if i % sh.dim % 7 == 3 => tiny(rng, -126, -100),
                    (true, 1) => round_bf16(rng.normal() * 448.0),
                    _ => round_bf16(rng.normal() * s),
                })
                .collect()
        };
        let kv = kv_rows(rng, if sh.block > 0 { sh.block } else { m }, 1.0);
        let ring = kv_rows(rng, sh.window, 1.0);
        let comp = kv_rows(rng, sh.ncomp, 0.5);
        let mut sel = Vec::with_capacity(m * sh.topk);
        for i in 0..m {
            let full = sh.topk.min(sh.ncomp);
            let count = if i % 3 == 2 { rng.below(full as u64 + 1) as usize } else { full };
            sel.extend(selection(rng, sh.ncomp, sh.topk, count, case.edge));
        }
        let sink: Vec<f32> = (0..sh.heads).map(|h| if case.edge { [0.0, -1e4, 60.0, 1.0][h % 4] } else { rng.normal() }).collect();
        let index: Vec<u32> = (0..m as u32).collect();
        Inputs {
            data: vec![
                Data::rows_f32(&q, hd),
                Data { bytes: bytemuck::cast_slice(&index).to_vec(), row_bytes: Some(4) },
                Data::rows_f32(&sel, sh.topk),
                Data::shared(bytemuck::cast_slice(&kv).to_vec()),
                Data::shared(bytemuck::cast_slice(&ring).to_vec()),
                Data::shared(bytemuck::cast_slice(&comp).to_vec()),
                Data::shared(bytemuck::cast_slice(&sink).to_vec()),
            ],
        }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![shape(case).heads * shape(case).dim]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let sh = shape(case);
        let (start, kv, ring) = call_state(case, inputs);
        let (q, sel, comp, sink) = (inputs.data[0].f32s(), inputs.data[2].f32s(), inputs.data[5].f32s(), inputs.data[6].f32s());
        let hd = sh.heads * sh.dim;
        let mut out = Vec::with_capacity(case.rows * hd);
        for i in 0..case.rows {
            let keys = attention::call_keys(&kv, &ring, &comp, &sel[i * sh.topk..(i + 1) * sh.topk], sh.dim, start, sh.window, i, sh.block > 0);
            out.extend(attention::attend_row(&q[i * hd..(i + 1) * hd], &keys, &sink, sh.dim, scale_of(sh)));
        }
        vec![words(&out)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        reference_and_bound(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        reference_and_bound(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let sh = shape(case);
        let (start, kv, ring) = call_state(case, inputs);
        let up = |v: &[u8]| gpu.upload(v);
        let (q, sel, comp, sink) = (up(&inputs.data[0].bytes)?, up(&inputs.data[2].bytes)?, up(&inputs.data[5].bytes)?, up(&inputs.data[6].bytes)?);
        let (kv, ring) = (gpu.upload_pod(&kv)?, gpu.upload_pod(&ring)?);
        let words_out = case.rows * sh.heads * sh.dim;
        let o = poisoned(gpu, words_out)?;
        let d = AttnDims { rows: case.rows, heads: sh.heads, dim: sh.dim, start, window: sh.window, topk: sh.topk, scale: scale_of(sh), block: sh.block };
        let mut rec = Recorder::new(gpu);
        if variant.name == "split" {
            // Chunks of about half the rows, so a case of several rows runs two chunks over one scratch.
            let chunk = case.rows.div_ceil(2).max(1);
            let [kb, cb, sb] = split::scratch_bytes(&d, chunk).map(|b| poisoned(gpu, (b / 4) as usize));
            let (keys, counts, scores) = (kb?, cb?, sb?);
            let scratch = split::SplitScratch { keys: &keys, counts: &counts, scores: &scores, rows: chunk };
            split::record_split(&mut rec, &q, &kv, &ring, &comp, &sel, &sink, &o, &d, &scratch, control)?;
            rec.submit()?;
            return read_outputs(gpu, &[(&o, words_out)]);
        }
        attention::record_sparse_attention(&mut rec, &q, &kv, &ring, &comp, &sel, &sink, &o, &d, variant.lang(), control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&o, words_out)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last key"),
            Control::new(2, "sum the weighted values in one running sum"),
            Control::new(3, "gather the next row's selection"),
            Control::new(4, "leave one output unwritten"),
            Control::new(5, "drop the sink from the denominator"),
            Control::fusion(6, "weight values without mul_rn"),
            Control::new(7, "read ring slot (pos + 1) mod window"),
            Control::new(8, "a block row sees only the block rows up to its own"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, variant: &Variant) -> Footprint {
        let workgroup_bytes = match (variant.lang(), variant.name) {
            (Lang::Msl, _) => 4096 + 4096 + 1024 + 32 + 8,
            (_, "split") => 8192 + 4096 + 4,
            _ => 4096 + 4096 + 1024 + 1024 + 8,
        };
        Footprint { workgroup_size: 256, workgroup_bytes, bindings: 7 }
    }
}

/// The float64 attention of every output element and its gate-1 bound (docs/ops.md, sparse_attention).
fn reference_and_bound(case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    let sh = shape(case);
    let (start, kv, ring) = call_state(case, inputs);
    let (q, sel, comp, sink) = (inputs.data[0].f32s(), inputs.data[2].f32s(), inputs.data[5].f32s(), inputs.data[6].f32s());
    let (hd, scale) = (sh.heads * sh.dim, f64::from(scale_of(sh)));
    let (mut refs, mut bounds) = (Vec::new(), Vec::new());
    let dim = sh.dim;
    let kv_rows = kv.len() / dim;
    let history: Vec<&[f32]> = (0..start + kv_rows)
        .map(|pos| if pos >= start { &kv[(pos - start) * dim..(pos - start + 1) * dim] } else { &ring[(pos % sh.window) * dim..(pos % sh.window + 1) * dim] })
        .collect();
    for i in 0..case.rows {
        let (first, end) = if sh.block > 0 { (start.saturating_sub(sh.window), start + kv_rows) } else { ((start + i + 1).saturating_sub(sh.window), start + i + 1) };
        let mut keys: Vec<&[f32]> = history[first..end].to_vec();
        for &v in &sel[i * sh.topk..(i + 1) * sh.topk] {
            if v >= 0.0 {
                keys.push(&comp[v as usize * dim..(v as usize + 1) * dim]);
            }
        }
        let n = keys.len();
        let (gd, gn) = (gamma(canonical_depth(sh.dim)), gamma(canonical_depth(n) + 1));
        for h in 0..sh.heads {
            let qh = &q[i * hd + h * sh.dim..i * hd + (h + 1) * sh.dim];
            let dots: Vec<(f64, f64)> = keys
                .iter()
                .map(|k| qh.iter().zip(k.iter()).fold((0.0, 0.0), |(s, a), (&x, &y)| (s + f64::from(x) * f64::from(y), a + (f64::from(x) * f64::from(y)).abs())))
                .collect();
            let s: Vec<f64> = dots.iter().map(|d| d.0 * scale).collect();
            let ds: Vec<f64> = dots.iter().zip(&s).map(|(d, sv)| gd * d.1 * scale + U * sv.abs() + sh.dim as f64 * TERM * scale).collect();
            let m = s.iter().fold(-1e30f64, |a, &v| a.max(v));
            let dmax = ds.iter().fold(0.0f64, |a, &v| a.max(v));
            let sink_h = f64::from(sink[h]);
            let e_arg = s.iter().zip(&ds).map(|(sv, d)| d + U * (sv - m).abs()).fold(U * (sink_h - m).abs(), f64::max);
            let e = (e_arg + dmax + 4.0 * U) * 1.01;
            let p: Vec<f64> = s.iter().map(|sv| (sv - m).exp()).collect();
            let den = p.iter().sum::<f64>() + (sink_h - m).exp();
            for d in 0..sh.dim {
                let num: f64 = p.iter().zip(&keys).map(|(pk, k)| pk * f64::from(k[d])).sum();
                let abs: f64 = p.iter().zip(&keys).map(|(pk, k)| pk * f64::from(k[d]).abs()).sum();
                let vmax = keys.iter().fold(0.0f64, |a, k| a.max(f64::from(k[d]).abs()));
                let o = num / den;
                let f32_err = ((abs / den) * (e + U + gn) + o.abs() * (e + gn) + 4.0 * U * o.abs()) * 1.02 + n as f64 * (vmax * 2f64.powi(-126) + TERM) / den;
                refs.push(o);
                bounds.push(f32_err + (o.abs() + f32_err) / 256.0 + 1e-37);
            }
        }
    }
    (refs, bounds)
}
