//! Contract registrations of the packed state's two kernels: packing QAT values into a cache's rows, and unpacking every row or the picked rows.
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, POISON};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::kernels::qat::Qat;
use crate::kernels::state::{self, Packing};
use crate::kernels::util::{f64s, poisoned, read_outputs, words};
use crate::numerics::{e2m1_to_f32, e4m3_to_f32, pow2};

/// Rows a pack case's cache holds before the packed ones.
const ROW0: usize = 3;
/// Rows a pack case's cache holds after the packed ones.
const AFTER: usize = 2;

/// The packing of a case: `case.n` values per row, `case.k & 1` the kind (0 compressed rows, 1 index keys).
fn packing(case: &Case) -> Packing {
    let kind = if case.k & 1 == 1 { Qat::Fp4Index } else { Qat::Fp4Rows };
    Packing::new(kind, case.n).expect("registered shapes are whole blocks")
}

/// Whether an unpack case picks rows (`case.k & 2`).
fn picks(case: &Case) -> bool {
    case.k & 2 != 0
}

/// Random values exact in `p`'s format, `rows` rows: random codes (the largest magnitude random too) times a random scale per block; edge rows add zero blocks, negative zeros and the extreme scales.
fn grid_values(p: Packing, rows: usize, rng: &mut Rng, edge: bool) -> Vec<f32> {
    let bs = p.kind.block();
    let mut x = Vec::with_capacity(rows * p.cols);
    for b in 0..rows * p.blocks() {
        let s = match p.kind {
            Qat::Fp4Index => pow2(if edge && b % 5 == 1 { [-125, 125][b % 2] } else { rng.below(61) as i32 - 30 }),
            _ => e4m3_to_f32(if edge && b % 5 == 1 { [1u8, 0x7e][b % 2] } else { 1 + rng.below(0x7d) as u8 }),
        };
        let top = 1 + rng.below(7) as u32;
        for i in 0..bs {
            let code = if edge && b % 5 == 0 { [0u8, 8][i % 2] } else { (rng.below(u64::from(top) + 1) as u8) | if rng.next_u32() & 1 == 1 { 8 } else { 0 } };
            x.push(e2m1_to_f32(code) * s);
        }
    }
    x
}

/// Registration of `pack_rows`: rows of grid values packed into rows `ROW0..` of a cache whose other rows keep their words.
pub struct PackRowsKernel;

impl Kernel for PackRowsKernel {
    fn name(&self) -> &'static str {
        "pack_rows"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[state::PACK])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            Case::new("compressed kv 512", if quick { 4 } else { 64 }, 512, 0),
            Case::new("index keys 128", if quick { 6 } else { 256 }, 128, 1),
            Case::new("tiny kv 64", 5, 64, 0),
            Case::new("tiny index keys 32", 7, 32, 1),
            Case::new("awkward kv 80", 3, 80, 0),
            Case::new("awkward index keys 160", 2, 160, 1),
            Case::new("edge kv 512", 4, 512, 0).edge(),
            Case::new("edge index keys 128", 5, 128, 1).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let p = packing(case);
        let x = grid_values(p, case.rows, rng, case.edge);
        let before = state::pack_rows(p, &grid_values(p, ROW0, rng, false));
        let after = state::pack_rows(p, &grid_values(p, AFTER, rng, false));
        let cache: Vec<u32> = before.into_iter().chain(std::iter::repeat_n(POISON, case.rows * p.row_words())).chain(after).collect();
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&x).to_vec()), Data::shared(bytemuck::cast_slice(&cache).to_vec())] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![(ROW0 + case.rows + AFTER) * packing(case).row_words()]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let p = packing(case);
        let mut cache: Vec<u32> = bytemuck::pod_collect_to_vec(&inputs.data[1].bytes);
        let packed = state::pack_rows(p, &inputs.data[0].f32s());
        cache[ROW0 * p.row_words()..(ROW0 + case.rows) * p.row_words()].copy_from_slice(&packed);
        vec![cache]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let p = packing(case);
        let cache: Vec<u32> = bytemuck::pod_collect_to_vec(&inputs.data[1].bytes);
        let rw = p.row_words();
        let (before, _) = state::unpack_rows(p, &cache[..ROW0 * rw], None);
        let (after, _) = state::unpack_rows(p, &cache[(ROW0 + case.rows) * rw..], None);
        before.into_iter().chain(inputs.data[0].f32s()).chain(after).map(f64::from).collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, case: &Case, outputs: &Outputs) -> Vec<f64> {
        state::unpack_rows(packing(case), &outputs[0], None).0.into_iter().map(f64::from).collect()
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = packing(case);
        let (x, cache) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let mut rec = Recorder::new(gpu);
        state::record_pack(&mut rec, p, &x, &cache, case.rows, ROW0, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&cache, self.out_row_words(case)[0])])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "drop the codes' sign bits"),
            Control::new(2, "try only the lead 6"),
            Control::new(3, "flip the low bit of block 0's scale"),
            Control::new(4, "leave block 0's first code word unwritten"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 256, bindings: 2 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
}

/// Registration of `unpack_rows`: every row of a packed cache, or the rows a selection names (ascending, -1 at the end) with each pick's place.
pub struct UnpackRowsKernel;

impl Kernel for UnpackRowsKernel {
    fn name(&self) -> &'static str {
        "unpack_rows"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[state::UNPACK])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        vec![
            Case::new("decode picks 512 of kv 512", if quick { 96 } else { 512 }, 512, 2),
            Case::new("every index key 128", if quick { 40 } else { 4096 }, 128, 1),
            Case::new("every kv row 512", if quick { 8 } else { 300 }, 512, 0),
            Case::new("picks of index keys 128", 33, 128, 3),
            Case::new("tiny picks of kv 64", 9, 64, 2),
            Case::new("awkward index keys 160", 3, 160, 1),
            Case::new("edge picks of kv 512", 12, 512, 2).edge(),
            Case::new("edge index keys 128", 10, 128, 1).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let p = packing(case);
        let rows = if picks(case) { case.rows + 7 } else { case.rows };
        let x = grid_values(p, rows, rng, case.edge);
        let cache = state::pack_rows(p, &x);
        let mut data = vec![Data::shared(bytemuck::cast_slice(&cache).to_vec()), Data::shared(bytemuck::cast_slice(&x).to_vec())];
        if picks(case) {
            let mut sel: Vec<f32> = (0..rows).filter(|_| rng.below(4) != 0).map(|r| r as f32).take(case.rows).collect();
            sel.resize(case.rows, -1.0);
            data.push(Data::rows_f32(&sel, 1));
        }
        Inputs { data }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        if picks(case) { vec![case.n, 1] } else { vec![case.n] }
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let cache: Vec<u32> = bytemuck::pod_collect_to_vec(&inputs.data[0].bytes);
        let sel = picks(case).then(|| inputs.data[2].f32s());
        let (y, places) = state::unpack_rows(packing(case), &cache, sel.as_deref());
        std::iter::once(words(&y)).chain(places.map(|p| words(&p))).collect()
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (x, n) = (inputs.data[1].f32s(), case.n);
        if !picks(case) {
            return x.into_iter().map(f64::from).collect();
        }
        let sel = inputs.data[2].f32s();
        let rows = sel.iter().flat_map(|&v| if v >= 0.0 { x[v as usize * n..(v as usize + 1) * n].to_vec() } else { vec![0.0; n] });
        let places = sel.iter().enumerate().map(|(j, &v)| if v >= 0.0 { j as f32 } else { -1.0 });
        rows.chain(places).map(f64::from).collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        outputs.iter().flat_map(|o| f64s(o)).collect()
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let p = packing(case);
        let cache = gpu.upload(&inputs.data[0].bytes)?;
        let rows = inputs.data[0].bytes.len() / p.row_bytes();
        let y = poisoned(gpu, case.rows * case.n)?;
        let places = poisoned(gpu, case.rows.max(1))?;
        let sel = if picks(case) { Some(gpu.upload(&inputs.data[2].bytes)?) } else { None };
        let mut rec = Recorder::new(gpu);
        state::record_unpack(&mut rec, p, &cache, rows, sel.as_ref().map(|s| (s, case.rows)), &y, &places, control)?;
        rec.submit()?;
        if picks(case) { read_outputs(gpu, &[(&y, case.rows * case.n), (&places, case.rows)]) } else { read_outputs(gpu, &[(&y, case.rows * case.n)]) }
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "drop the codes' sign bits"),
            Control::new(2, "scale 1"),
            Control::new(3, "read the next row"),
            Control::new(4, "leave the last value unwritten"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 4 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
}

/// The packed state's registered kernels, in contract order.
pub fn kernels() -> Vec<&'static dyn crate::contract::Kernel> {
    static PACK: PackRowsKernel = PackRowsKernel;
    static UNPACK: UnpackRowsKernel = UnpackRowsKernel;
    vec![&PACK, &UNPACK]
}
