//! Contract registration of the row copy (slices, stream repeat, cache appends and window-ring writes).
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, POISON, Variant};
use crate::gpu::{Gpu, GpuError, Recorder};
use crate::kernels::rows;
use crate::kernels::util::{f64s, read_outputs};

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
    fn variants(&self) -> &'static [Variant] {
        const V: &[Variant] = &[Variant::new("ref", &[crate::kernels::rows::COPY_ROWS])];
        V
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
        vec![rows::copy_rows(&src, &dst, case.rows, sh.cols, sh.src_row0, sh.dst_row0, sh.ring, sh.repeat)]
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
    fn run(&self, gpu: &Gpu, _variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        let sh = copy_shape(case);
        let (src, dst) = (gpu.upload(&inputs.data[0].bytes)?, gpu.upload(&inputs.data[1].bytes)?);
        let mut rec = Recorder::new(gpu);
        rows::record_copy_rows(&mut rec, &src, &dst, case.rows, sh.cols, sh.src_row0, sh.dst_row0, sh.ring, sh.repeat, control)?;
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
    fn footprint(&self, _variant: &Variant) -> Footprint {
        Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings: 2 }
    }
    fn row_invariant(&self) -> bool {
        false
    }
}

