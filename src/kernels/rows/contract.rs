//! Contract registrations of the row gathers: the embedding (bf16 rows by token id) and gather_rows (f32 rows by an index list).
use crate::kernels::util::{rows_u32, u32s};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::kernels::rows;
use crate::kernels::util::{f64s, poisoned, read_outputs, words};
use crate::numerics::bf16_to_f32;

static EMBED: EmbedKernel = EmbedKernel;
static GATHER_ROWS: GatherRowsKernel = GatherRowsKernel;
static COPY_ROWS: super::copy_contract::CopyRowsKernel = super::copy_contract::CopyRowsKernel;

/// The row gathers' registrations.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    vec![&EMBED, &GATHER_ROWS]
}

/// The row copy's registration (contract order puts it beside the pooling).
pub fn copy_kernels() -> Vec<&'static dyn Kernel> {
    vec![&COPY_ROWS]
}


/// Embedding registration: `case.n` = d, `case.k` = vocabulary rows.
pub struct EmbedKernel;

/// A random finite bf16 code (edge: signed zeros, the largest and smallest values, subnormals).
fn bf16_code(rng: &mut Rng, edge: bool) -> u16 {
    if edge {
        return [0x0000, 0x8000, 0x7f7f, 0xff7f, 0x0001, 0x8001, 0x0080, 0x3f80][rng.below(8) as usize];
    }
    loop {
        let c = rng.next_u32() as u16;
        if c & 0x7f80 != 0x7f80 {
            return c;
        }
    }
}

impl Kernel for EmbedKernel {
    fn name(&self) -> &'static str {
        "embed"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::rows::EMBED])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 3 } else { 64 };
        vec![
            Case::new("release 5120 of 2048 rows", r, 5120, 2048),
            Case::new("tiny 64 of 1000 rows", 9, 64, 1000),
            Case::new("awkward odd 33 of 17 rows", 5, 33, 17),
            Case::new("awkward 1 row", 1, 64, 3),
            Case::new("edge 64 of 16 rows", 4, 64, 16).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (d, v) = (case.n, case.k);
        let table: Vec<u16> = (0..d * v).map(|_| bf16_code(rng, case.edge)).collect();
        let ids: Vec<u32> = (0..case.rows).map(|i| if i == 0 { v as u32 - 1 } else { rng.below(v as u64) as u32 }).collect();
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&table).to_vec()), rows_u32(&ids, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&rows::embed_rows(&inputs.data[0].bytes, case.n, &u32s(&inputs.data[1])))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let table = &inputs.data[0].bytes;
        let d = case.n;
        u32s(&inputs.data[1])
            .iter()
            .flat_map(|&id| (0..d).map(move |c| (id as usize * d + c) * 2))
            .map(|o| f64::from(bf16_to_f32(u16::from(table[o]) | u16::from(table[o + 1]) << 8)))
            .collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (m, d) = (case.rows, case.n);
        let (table, ids) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let y = poisoned(gpu, m * d)?;
        let mut rec = Recorder::new(gpu);
        rows::record_embed(&mut rec, &table, &ids, &y, m, d, case.k, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, m * d)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "take the other half of each word"),
            Control::new(2, "gather the next row's token"),
            Control::new(3, "leave the last output unwritten"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 3 }
    }
}

/// Row gather registration: `case.n` columns, `case.k` source rows, `case.rows` gathered rows.
pub struct GatherRowsKernel;

impl Kernel for GatherRowsKernel {
    fn name(&self) -> &'static str {
        "gather_rows"
    }
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::rows::GATHER_ROWS])];
        V
    }
    fn cases(&self, quick: bool) -> Vec<Case> {
        let r = if quick { 4 } else { 64 };
        vec![
            Case::new("release x rows 5120 packed by expert", r * 6, 5120, r),
            Case::new("route weights as rows of 1", 36, 1, 36),
            Case::new("tiny 64", 18, 64, 9),
            Case::new("awkward 33 columns", 5, 33, 7),
            Case::new("awkward 1 row", 1, 100, 1),
            Case::new("edge 64", 6, 64, 3).edge(),
        ]
    }
    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (c, r) = (case.n, case.k);
        let src: Vec<f32> = (0..r * c).map(|_| if case.edge { bf16_to_f32(bf16_code(rng, true)) } else { rng.normal() }).collect();
        let idx: Vec<u32> = (0..case.rows).map(|i| if i == 0 { r as u32 - 1 } else { rng.below(r as u64) as u32 }).collect();
        Inputs { data: vec![Data::shared(bytemuck::cast_slice(&src).to_vec()), rows_u32(&idx, 1)] }
    }
    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }
    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        vec![words(&rows::gather_rows(&inputs.data[0].f32s(), case.n, &u32s(&inputs.data[1])))]
    }
    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let src = inputs.data[0].f32s();
        u32s(&inputs.data[1]).iter().flat_map(|&i| (0..case.n).map(move |c| i as usize * case.n + c)).map(|o| f64::from(src[o])).collect()
    }
    fn bound(&self, _case: &Case, _inputs: &Inputs, reference: &[f64]) -> Vec<f64> {
        vec![0.0; reference.len()]
    }
    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let (p, c) = (case.rows, case.n);
        let (src, idx) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let y = poisoned(gpu, p * c)?;
        let mut rec = Recorder::new(gpu);
        rows::record_gather_rows(&mut rec, &src, &idx, &y, p, c, case.k, control)?;
        rec.submit()?;
        read_outputs(gpu, &[(&y, p * c)])
    }
    fn controls(&self) -> &'static [Control] {
        const { &[
            Control::new(1, "read the neighbouring source row"),
            Control::new(2, "leave the last output unwritten"),
            Control::new(3, "use the next packed row's index"),
        ] }
    }
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 3 }
    }
}
