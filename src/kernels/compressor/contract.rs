//! Contract registration of compressor pooling.
use crate::kernels::compressor::{self, pool_groups};
use crate::kernels::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, tiny, words, FLUSH, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Gpu, GpuError, Recorder};

static COMPRESS_POOL_KERNEL: CompressPoolKernel = CompressPoolKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&COMPRESS_POOL_KERNEL]
}


/// One pooling shape: channels, ratio, buffered rows before the call, and where run() splits the call in two (0: one call).
struct PoolShape {
    hd: usize,
    ratio: usize,
    pending: usize,
    split: usize,
}

const POOL_SHAPES: [PoolShape; 8] = [
    PoolShape { hd: 512, ratio: 2, pending: 1, split: 3 },
    PoolShape { hd: 64, ratio: 2, pending: 1, split: 3 },
    PoolShape { hd: 512, ratio: 2, pending: 1, split: 0 },
    PoolShape { hd: 512, ratio: 2, pending: 0, split: 0 },
    PoolShape { hd: 512, ratio: 1, pending: 0, split: 2 },
    PoolShape { hd: 48, ratio: 4, pending: 3, split: 1 },
    PoolShape { hd: 8, ratio: 40, pending: 17, split: 30 },
    PoolShape { hd: 64, ratio: 2, pending: 1, split: 0 },
];

/// Compressor pooling registration; `case.n` indexes the shape table, `case.rows` is the call's rows. run() makes the call as two calls when the shape splits it, so gate 2 also proves chunk invariance.
pub struct CompressPoolKernel;

fn pool_shape(case: &Case) -> &'static PoolShape {
    &POOL_SHAPES[case.n]
}

impl Kernel for CompressPoolKernel {
    fn name(&self) -> &'static str {
        "compress_pool"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::compressor::COMPRESS_POOL])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            Case::new("release ratio 2, pending 1, calls 3 + 5", if quick { 8 } else { 1000 }, 0, 0),
            Case::new("tiny ratio 2, pending 1, calls 3 + 3", 6, 1, 0),
            Case::new("release ratio 2 decode closing a group", 1, 2, 0),
            Case::new("release ratio 2 decode opening a group", 1, 3, 0),
            Case::new("release ratio 1, calls 2 + 3", 5, 4, 0),
            Case::new("awkward ratio 4 x 48, pending 3", 6, 5, 0),
            Case::new("awkward ratio 40 x 8, pending 17", 70, 6, 0),
            Case::new("tiny ratio 2 x 64", 8, 7, 0).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let sh = pool_shape(case);
        let n = case.rows * sh.hd;
        let mut k: Vec<f32> = (0..n).map(|_| rng.normal() * 2.0).collect();
        let mut g: Vec<f32> = (0..n).map(|_| rng.normal() * 3.0).collect();
        let partial: Vec<f32> = (0..(sh.ratio - 1) * 2 * sh.hd).map(|_| rng.normal()).collect();
        if case.edge {
            let tie = f32::from_bits(0x3f80_8000);
            for (i, (kv, gv)) in k.iter_mut().zip(g.iter_mut()).enumerate() {
                match (i % sh.hd) % 6 {
                    0 => (*kv, *gv) = (tie, 0.5),
                    1 => (*kv, *gv) = (-0.0, *gv),
                    2 => *gv = if (i / sh.hd).is_multiple_of(2) { 200.0 } else { -200.0 },
                    3 => *kv *= 1e30,
                    4 => *gv = 87.0,
                    _ => *kv = tiny(rng, -126, -123),
                }
            }
        }
        Inputs { data: vec![Data::rows_f32(&k, sh.hd), Data::rows_f32(&g, sh.hd), Data::shared(bytemuck::cast_slice(&partial).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![pool_shape(case).hd, 0]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let sh = pool_shape(case);
        let (k, g, partial) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s());
        let (pooled, rest) = compressor::pool_call(&k, &g, &partial, sh.hd, sh.pending, sh.ratio);
        vec![words(&pooled), words(&rest)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        pool_reference(case, inputs).0
    }
    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        pool_reference(case, inputs).1
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        outputs.iter().flat_map(|o| f64s(o)).collect()
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let sh = pool_shape(case);
        let (k, g) = (inputs.data[0].f32s(), inputs.data[1].f32s());
        let partial = gpu.upload(&inputs.data[2].bytes)?;
        let calls = if sh.split > 0 && sh.split < case.rows { vec![(0, sh.split), (sh.split, case.rows)] } else { vec![(0, case.rows)] };
        let (mut pending, mut pooled) = (sh.pending, Vec::new());
        for (lo, hi) in calls {
            let (kb, gb) = (gpu.upload_pod(&k[lo * sh.hd..hi * sh.hd])?, gpu.upload_pod(&g[lo * sh.hd..hi * sh.hd])?);
            let n = pool_groups(hi - lo, pending, sh.ratio) * sh.hd;
            let out = poisoned(gpu, n.max(1))?;
            let mut rec = Recorder::new(gpu);
            compressor::record_compress_pool(&mut rec, &kb, &gb, &partial, &out, hi - lo, sh.hd, pending, sh.ratio, control)?;
            rec.submit()?;
            pooled.extend(read_outputs(gpu, &[(&out, n)])?.remove(0));
            pending = (pending + hi - lo) % sh.ratio;
        }
        let rest = read_outputs(gpu, &[(&partial, (sh.ratio - 1) * 2 * sh.hd)])?.remove(0);
        Ok(vec![pooled, rest])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "skip the last member of the weighted sum"),
            Control::new(2, "read the next channel's gates"),
            Control::new(3, "pool the next group's members"),
            Control::new(4, "leave the first carried word unwritten"),
            Control::new(5, "double the softmax weights"),
            KEEP_SUBNORMALS,
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 4 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
}

/// Float64 pooling of every complete group then the carried words exactly, with the gate-1 bounds (docs/ops.md, compress_pool).
fn pool_reference(case: &Case, inputs: &Inputs) -> (Vec<f64>, Vec<f64>) {
    let sh = pool_shape(case);
    let (k, g, partial) = (inputs.data[0].f32s(), inputs.data[1].f32s(), inputs.data[2].f32s());
    let (hd, r) = (sh.hd, sh.ratio);
    let member = |u: usize, c: usize, gate: bool| -> f64 {
        let off = if gate { hd } else { 0 };
        if u < sh.pending {
            f64::from(partial[u * 2 * hd + off + c])
        } else if gate {
            f64::from(g[(u - sh.pending) * hd + c])
        } else {
            f64::from(k[(u - sh.pending) * hd + c])
        }
    };
    let groups = pool_groups(case.rows, sh.pending, r);
    let gs = gamma(canonical_depth(r) + 1);
    let (mut refs, mut bounds) = (Vec::new(), Vec::new());
    for j in 0..groups {
        for c in 0..hd {
            let gv: Vec<f64> = (0..r).map(|t| member(j * r + t, c, true)).collect();
            let mx = gv.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
            let e: Vec<f64> = gv.iter().map(|v| (v - mx).exp()).collect();
            let total: f64 = e.iter().sum();
            let o: f64 = (0..r).map(|t| e[t] / total * member(j * r + t, c, false)).sum();
            let abs: f64 = (0..r).map(|t| e[t] / total * member(j * r + t, c, false).abs()).sum();
            let arg = gv.iter().map(|v| U * (v - mx).abs() + 4.0 * U).fold(0.0, f64::max);
            let ep = 2.0 * arg + gs + 5.0 * U;
            let kmax = (0..r).map(|t| member(j * r + t, c, false).abs()).fold(0.0, f64::max);
            let f = abs * (ep + U + gs) * 1.01 + r as f64 * FLUSH * (2.0 + kmax);
            refs.push(o);
            bounds.push(f + (o.abs() + f) / 256.0 + 1e-37);
        }
    }
    let (_, rest) = compressor::pool_call(&k, &g, &partial, hd, sh.pending, r);
    refs.extend(rest.iter().map(|&v| f64::from(v)));
    bounds.extend(rest.iter().map(|_| 0.0));
    (refs, bounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::round_bf16;

    #[test]
    fn pool_call_matches_pool_group_and_carries_the_remainder() {
        let hd = 3;
        let k: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        let g: Vec<f32> = (0..12).map(|i| (i as f32 * 0.7).sin()).collect();
        let partial = vec![4.0, 5.0, 6.0, 0.1, 0.2, 0.3];
        let (pooled, rest) = compressor::pool_call(&k, &g, &partial, hd, 1, 2);
        assert_eq!(pooled.len(), 2 * hd);
        assert_eq!(&pooled[..hd], compressor::pool_group(&[&partial[..3], &k[..3]], &[&partial[3..], &g[..3]]).as_slice());
        assert_eq!(rest, [&k[9..12], &g[9..12]].concat());
        assert_eq!(round_bf16(pooled[0]), pooled[0]);
    }
}
