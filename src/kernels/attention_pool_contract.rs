//! Contract registrations of compressor pooling and row copies.
use super::super::attention::{self, COPY_ROWS};
use super::super::compressor::{self, pool_groups, COMPRESS_POOL};
use super::super::util::{canonical_depth, f64s, gamma, poisoned, read_outputs, words, U};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, POISON};
use crate::gpu::{Gpu, GpuError, Recorder, Shader};

static COMPRESS_POOL_KERNEL: CompressPoolKernel = CompressPoolKernel;
static COPY_ROWS_KERNEL: CopyRowsKernel = CopyRowsKernel;

/// Pooling and copy kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&COMPRESS_POOL_KERNEL, &COPY_ROWS_KERNEL]
}

/// Pooling and copy WGSL sources.
pub fn shaders() -> Vec<Shader> {
    vec![COMPRESS_POOL, COPY_ROWS]
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
    fn variants(&self) -> &'static [&'static str] {
        &["ref"]
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
                    _ => {}
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
    fn run(&self, gpu: &Gpu, _variant: &str, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
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
        ] }
    }
    fn footprint(&self, _variant: &str) -> Footprint {
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
            let f = abs * (ep + U + gs) * 1.01;
            refs.push(o);
            bounds.push(f + (o.abs() + f) / 256.0 + 1e-37);
        }
    }
    let (_, rest) = compressor::pool_call(&k, &g, &partial, hd, sh.pending, r);
    refs.extend(rest.iter().map(|&v| f64::from(v)));
    bounds.extend(rest.iter().map(|_| 0.0));
    (refs, bounds)
}

/// One copy shape: columns, first src row, src rows after the copied ones, dst rows after the copied ones, first dst row, ring length, repeats.
struct CopyShape {
    cols: usize,
    src_row0: usize,
    src_extra: usize,
    dst_extra: usize,
    dst_row0: usize,
    ring: usize,
    repeat: usize,
}

const COPY_SHAPES: [CopyShape; 9] = [
    CopyShape { cols: 512, src_row0: 0, src_extra: 0, dst_extra: 0, dst_row0: 50, ring: 128, repeat: 1 },
    CopyShape { cols: 5120, src_row0: 0, src_extra: 0, dst_extra: 0, dst_row0: 0, ring: 0, repeat: 4 },
    CopyShape { cols: 5120, src_row0: 6, src_extra: 0, dst_extra: 0, dst_row0: 0, ring: 0, repeat: 1 },
    CopyShape { cols: 512, src_row0: 0, src_extra: 0, dst_extra: 3, dst_row0: 300, ring: 0, repeat: 1 },
    CopyShape { cols: 512, src_row0: 0, src_extra: 0, dst_extra: 0, dst_row0: 1000, ring: 128, repeat: 1 },
    CopyShape { cols: 64, src_row0: 0, src_extra: 0, dst_extra: 0, dst_row0: 3, ring: 8, repeat: 1 },
    CopyShape { cols: 64, src_row0: 0, src_extra: 0, dst_extra: 0, dst_row0: 0, ring: 0, repeat: 4 },
    CopyShape { cols: 33, src_row0: 4, src_extra: 2, dst_extra: 0, dst_row0: 0, ring: 0, repeat: 1 },
    CopyShape { cols: 64, src_row0: 1, src_extra: 1, dst_extra: 1, dst_row0: 2, ring: 0, repeat: 2 },
];

impl CopyShape {
    fn src_words(&self, rows: usize) -> usize {
        (self.src_row0 + rows + self.src_extra) * self.cols
    }
    fn dst_words(&self, rows: usize) -> usize {
        let dst_rows = if self.ring > 0 { self.ring } else { self.dst_row0 + rows + self.dst_extra };
        dst_rows * self.cols * self.repeat
    }
}

/// Row copy registration; `case.n` indexes the shape table, `case.rows` is the rows copied. The output is the whole dst: rows the copy leaves keep their old words.
pub struct CopyRowsKernel;

fn copy_shape(case: &Case) -> &'static CopyShape {
    &COPY_SHAPES[case.n]
}

impl Kernel for CopyRowsKernel {
    fn name(&self) -> &'static str {
        "copy_rows"
    }
    fn variants(&self) -> &'static [&'static str] {
        &["ref"]
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            Case::new("ring_write 200 rows at 50, window 128", 200, 0, 0),
            Case::new("hc_repeat 5120 x 4", if quick { 3 } else { 64 }, 1, 0),
            Case::new("slice_rows last of 7 x 5120", 1, 2, 0),
            Case::new("append_rows 5 x 512 at 300", 5, 3, 0),
            Case::new("ring_write decode at 1000, window 128", 1, 4, 0),
            Case::new("tiny ring_write 13 x 64 at 3, window 8", 13, 5, 0),
            Case::new("tiny hc_repeat 64 x 4", 9, 6, 0),
            Case::new("awkward slice 5 x 33 at 4", 5, 7, 0),
            Case::new("special words 6 x 64 x 2", 6, 8, 0).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let sh = copy_shape(case);
        let specials = [0u32, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 1, 0x807f_ffff, 0x7f7f_ffff, 0x3f80_8000];
        let src: Vec<u32> = (0..sh.src_words(case.rows))
            .map(|i| if case.edge && i % 3 == 0 { specials[(i / 3) % specials.len()] } else { rng.normal().to_bits() })
            .collect();
        let mut dst: Vec<u32> = (0..sh.dst_words(case.rows)).map(|_| rng.normal().to_bits()).collect();
        let width = sh.cols * sh.repeat;
        for i in 0..case.rows {
            let dr = if sh.ring > 0 { (sh.dst_row0 + i) % sh.ring } else { sh.dst_row0 + i };
            dst[dr * width..(dr + 1) * width].fill(POISON);
        }
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&src).to_vec()), Data::shared(bytemuck::cast_slice(&dst).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![copy_shape(case).dst_words(case.rows)]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let sh = copy_shape(case);
        let (src, dst): (Vec<u32>, Vec<u32>) = (bytemuck::pod_collect_to_vec(&inputs.data[0].bytes), bytemuck::pod_collect_to_vec(&inputs.data[1].bytes));
        vec![attention::copy_rows(&src, &dst, case.rows, sh.cols, sh.src_row0, sh.dst_row0, sh.ring, sh.repeat)]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        f64s(&self.oracle(case, inputs)[0])
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &str, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let sh = copy_shape(case);
        let (src, dst) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let mut rec = Recorder::new(gpu);
        attention::record_copy_rows(&mut rec, &src, &dst, case.rows, sh.cols, sh.src_row0, sh.dst_row0, sh.ring, sh.repeat, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&dst, sh.dst_words(case.rows))])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "leave the last word unwritten"),
            Control::new(2, "read the next src row"),
            Control::new(3, "write ring slot (pos + 1) mod ring"),
            Control::new(4, "skip the last repeat"),
        ] }
    }
    fn footprint(&self, _variant: &str) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
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
