//! Contract registrations of the three GEMM formats: shapes, random and edge inputs, controls.
use crate::kernels::gemm::{self, GemmArgs, GemmVariant, WeightFormat, GEMV_MAX_ROWS};
use crate::kernels::gemm::grouped::{self as gemm_grouped, GroupedArgs, GroupedHi, GroupedTile};
use crate::kernels::util::{bf16_normal, canonical_depth, e4m3_code, f64s, gamma, poisoned, read_outputs, tiny, words, TERM};
use crate::contract::{Case, Control, Data, Footprint, Inputs, Kernel, Outputs, Rng, Variant, KEEP_SUBNORMALS};
use crate::gpu::{Arg, Gpu, GpuError, Lang, Recorder};
use crate::numerics::{bf16_from_f32, e2m1_from_f32, e4m3_to_f32, pow2, round_bf16};

/// A GEMM format registered with the contract.
pub struct GemmKernel {
    fmt: WeightFormat,
    name: &'static str,
}

/// The three registrations.
pub static KERNELS: [GemmKernel; 3] = [
    GemmKernel { fmt: WeightFormat::Bf16, name: "gemm_bf16" },
    GemmKernel { fmt: WeightFormat::E4m3, name: "gemm_e4m3" },
    GemmKernel { fmt: WeightFormat::E2m1, name: "gemm_e2m1" },
];

/// The control planted against the bf16 stores.
const ROUND_CONTROL: u32 = 6;

const CONTROLS: &[Control] = &[
    Control::new(1, "skip the last K block"),
    Control::new(2, "reverse the segment order"),
    Control::new(3, "read the neighbouring row in the last block"),
    Control::new(4, "leave one output unwritten"),
    Control::new(5, "double the first block's scale"),
    Control::new(6, "store one output unrounded when asked to round"),
];

/// bf16 GEMMs drop products below 2^-103 (N7); e4m3 and e2m1 products and, with the loader's scale floors, scaled sums never come near 2^-126, so they have no flush to drop.
const BF16_CONTROLS: &[Control] = &[CONTROLS[0], CONTROLS[1], CONTROLS[2], CONTROLS[3], CONTROLS[4], CONTROLS[5], KEEP_SUBNORMALS];

/// (label, n, k) of the model's real shapes per format, with N trimmed when quick.
fn real_shapes(fmt: WeightFormat) -> &'static [(&'static str, usize, usize)] {
    match fmt {
        WeightFormat::Bf16 => &[("ffn.gate", 384, 5120), ("compressor.wkv", 512, 5120), ("indexer.wk", 128, 512), ("head", 129280, 5120)],
        WeightFormat::E4m3 => &[
            ("wq_a", 1280, 5120),
            ("wq_b", 32768, 1280),
            ("wo_a", 8192, 4096),
            ("wo_b", 5120, 8192),
            ("shared.w2", 5120, 2304),
        ],
        WeightFormat::E2m1 => &[("expert.w1", 2304, 5120), ("expert.w2", 5120, 2304)],
    }
}

impl GemmKernel {
    fn nb(k: usize) -> usize {
        k / 32
    }
}

/// The GEMM variants, in the order of `VARIANTS`' rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Ref,
    Gemv,
    Tiled,
    Grouped,
    GroupedTiled,
    GroupedSmall,
    MslSimd,
    MslTiled,
    MslDense,
}

impl Path {
    const ALL: [Path; 8] = [Path::Ref, Path::Gemv, Path::Tiled, Path::Grouped, Path::GroupedTiled, Path::GroupedSmall, Path::MslSimd, Path::MslTiled];

    /// The path of one of the formats' variants, by identity.
    fn of(v: &Variant) -> Path {
        if std::ptr::eq(v, &BF16_VARIANTS[6]) {
            return Path::MslDense;
        }
        [&BF16_VARIANTS[..6], &E4M3_VARIANTS[..], &E2M1_VARIANTS[..]].iter().find_map(|row| row.iter().position(|x| std::ptr::eq(x, v))).map_or(Path::Ref, |i| Path::ALL[i])
    }

    /// The engine's dense variant, for the plain paths.
    fn plain(self) -> Option<GemmVariant> {
        match self {
            Path::Ref => Some(GemmVariant::Ref),
            Path::Gemv => Some(GemmVariant::Gemv),
            Path::Tiled => Some(GemmVariant::Tiled),
            _ => None,
        }
    }

    /// How a grouped path covers its entries; `None` for the plain paths.
    fn grouped(self) -> Option<GroupedTile> {
        match self {
            Path::Grouped | Path::MslSimd => Some(GroupedTile::Blocks),
            Path::GroupedTiled | Path::MslTiled => Some(GroupedTile::Tiled),
            Path::GroupedSmall => Some(GroupedTile::Small),
            _ => None,
        }
    }
}

/// A format's variants: the reference, gemv and tiled dense kernels, and the grouped kernels over a one-entry-per-tile table.
const fn wgsl_row(f: usize) -> [Variant; 6] {
    [
        Variant::new("ref", std::slice::from_ref(&gemm::SHADERS[f][0])),
        Variant::new("gemv", std::slice::from_ref(&gemm::SHADERS[f][1])),
        Variant::new("tiled", std::slice::from_ref(&gemm::SHADERS[f][2])),
        Variant::new("grouped", std::slice::from_ref(&gemm_grouped::SHADERS[0][f])),
        Variant::new("grouped_tiled", std::slice::from_ref(&gemm_grouped::SHADERS[1][f])),
        Variant::new("grouped_small", std::slice::from_ref(&gemm_grouped::SHADERS[2][f])),
    ]
}

/// The scaled formats' variants: the WGSL ones, then the MSL grouped fast paths.
const fn msl_row(f: usize) -> [Variant; 8] {
    let [a, b, c, d, e, g] = wgsl_row(f);
    [a, b, c, d, e, g, Variant::new("msl_simd", std::slice::from_ref(&gemm_grouped::MSL[0][f - 1])), Variant::new("msl_tiled", std::slice::from_ref(&gemm_grouped::MSL[1][f - 1]))]
}

/// bf16's variants: the WGSL ones, then the MSL dense tiled fast path.
static BF16_VARIANTS: [Variant; 7] = {
    let [a, b, c, d, e, g] = wgsl_row(0);
    [a, b, c, d, e, g, Variant::new("msl_tiled", std::slice::from_ref(&gemm::MSL_DENSE_BF16))]
};
static E4M3_VARIANTS: [Variant; 8] = msl_row(1);
static E2M1_VARIANTS: [Variant; 8] = msl_row(2);

impl Kernel for GemmKernel {
    fn name(&self) -> &'static str {
        self.name
    }

    fn variants(&self) -> &'static [Variant] {
        match self.fmt {
            WeightFormat::Bf16 => &BF16_VARIANTS,
            WeightFormat::E4m3 => &E4M3_VARIANTS,
            WeightFormat::E2m1 => &E2M1_VARIANTS,
        }
    }

    fn supports(&self, variant: &Variant, case: &Case) -> bool {
        match Path::of(variant) {
            Path::Gemv => case.rows <= GEMV_MAX_ROWS,
            Path::MslSimd => case.k <= gemm_grouped::SIMD_MAX_K,
            _ => true,
        }
    }

    fn cases(&self, quick: bool) -> Vec<Case> {
        let mut c = Vec::new();
        for &(label, n, k) in real_shapes(self.fmt) {
            let n_cut = if quick { n.min(512) } else { n };
            c.push(Case::new(&format!("{label} {}x{}x{k}", 4, n_cut), 4, n_cut, k));
        }
        for &(label, n, k) in real_shapes(self.fmt).iter().take(2) {
            let (rows, n_cut) = if quick { (17, n.min(256)) } else { (130, n.min(4096)) };
            c.push(Case::new(&format!("{label} prefill {rows}x{n_cut}x{k}"), rows, n_cut, k));
        }
        c.push(Case::new("tiny 3x64x64", 3, 64, 64));
        c.push(Case::new("tiny 9x96x64", 9, 96, 64));
        c.push(Case::new("awkward 1x33x288", 1, 33, 288));
        c.push(Case::new("awkward 7x65x96", 7, 65, 96));
        c.push(Case::new("awkward 70x1x2336", 70, 1, 2336));
        c.push(Case::new("edge 5x40x320", 5, 40, 320).edge());
        c
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Inputs {
        let (m, n, k) = (case.rows, case.n, case.k);
        let nb = Self::nb(k);
        let bf16 = self.fmt == WeightFormat::Bf16;
        let mut x = vec![0.0f32; m * k];
        let mut xs = vec![1.0f32; m * nb];
        for i in 0..m {
            for t in 0..k {
                x[i * k + t] = match (bf16, case.edge) {
                    (true, false) => bf16_normal(rng, 1.0),
                    (false, false) => e4m3_to_f32(e4m3_code(rng)),
                    (true, true) if i + 1 == m => tiny(rng, -70, -50),
                    (true, true) => [65280.0, -65280.0, 0.0, -0.0, 1.0][(i + t) % 5],
                    (false, true) => [448.0, -448.0, 0.0, -0.0, 0.001953125][(i * 3 + t) % 5],
                };
            }
            if !bf16 {
                for b in 0..nb {
                    xs[i * nb + b] = pow2(if case.edge && b % 2 == 0 { -22 } else { rng.below(13) as i32 - 10 });
                }
            }
        }
        let mut w = Vec::with_capacity(gemm::row_bytes(self.fmt, k) * n);
        for j in 0..n {
            for t in 0..k {
                match self.fmt {
                    WeightFormat::Bf16 => {
                        let v = match case.edge {
                            true if j + 1 == n => tiny(rng, -60, -40),
                            true => [1.0, -1.0, 0.0, 65280.0][(j + t) % 4],
                            false => bf16_normal(rng, 0.05),
                        };
                        w.extend_from_slice(&bf16_from_f32(v).to_le_bytes());
                    }
                    WeightFormat::E4m3 => w.push(if case.edge { [0x7e, 0xfe, 0x00, 0x80, 0x01][(j + 2 * t) % 5] } else { e4m3_code(rng) }),
                    WeightFormat::E2m1 if t % 2 == 0 => {
                        let v = |t: usize| [6.0f32, -6.0, 0.0, 0.5][(j + t) % 4];
                        let lo = if case.edge { e2m1_from_f32(v(t)) } else { (rng.next_u32() & 15) as u8 };
                        let hi = if case.edge { e2m1_from_f32(v(t + 1)) } else { (rng.next_u32() & 15) as u8 };
                        w.push(lo | (hi << 4));
                    }
                    WeightFormat::E2m1 => {}
                }
            }
        }
        // Edge scales include the loader's floors (2^-85 for e4m3, 2^-93 for e2m1), where the smallest scaled block sums are 2^-125.
        let floor = if self.fmt == WeightFormat::E4m3 { 42 } else { 34 };
        let ws: Vec<u8> = (0..gemm::scale_bytes(self.fmt, n, k)).map(|i| if case.edge && i % 3 == 0 { floor } else { 120 + rng.below(15) as u8 }).collect();
        let mut data = vec![Data::rows_f32(&x, k)];
        if !bf16 {
            data.push(Data::rows_f32(&xs, nb));
        }
        data.push(Data::shared(w));
        data.push(Data::shared(ws));
        Inputs { data }
    }

    fn out_row_words(&self, case: &Case) -> Vec<usize> {
        vec![case.n]
    }

    fn oracle(&self, case: &Case, inputs: &Inputs) -> Outputs {
        let (x, xs, w, ws) = self.unpack(inputs);
        vec![words(&gemm::oracle(self.fmt, case.rows, case.n, case.k, &x, &xs, w, ws))]
    }

    fn reference(&self, case: &Case, inputs: &Inputs) -> Vec<f64> {
        let (x, xs, w, ws) = self.unpack(inputs);
        gemm::reference(self.fmt, case.rows, case.n, case.k, &x, &xs, w, ws).0
    }

    fn bound(&self, case: &Case, inputs: &Inputs, _reference: &[f64]) -> Vec<f64> {
        let (x, xs, w, ws) = self.unpack(inputs);
        let g = gamma(canonical_depth(case.k));
        gemm::reference(self.fmt, case.rows, case.n, case.k, &x, &xs, w, ws).1.iter().map(|a| g * a + case.k as f64 * TERM).collect()
    }

    fn values(&self, _case: &Case, outputs: &Outputs) -> Vec<f64> {
        f64s(&outputs[0])
    }

    fn run(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32) -> Result<Outputs, GpuError> {
        self.run_mode(gpu, variant, case, inputs, control, false)
    }

    /// The bf16 stores: the same call asked to round must give round_bf16 of each f32 output (checked with no control and with the one planted against it).
    fn other_mode(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32, out: &Outputs) -> Result<bool, GpuError> {
        if control != 0 && control != ROUND_CONTROL {
            return Ok(true);
        }
        let rounded = self.run_mode(gpu, variant, case, inputs, control, true)?;
        let want: Vec<u32> = out[0].iter().map(|&w| round_bf16(f32::from_bits(w)).to_bits()).collect();
        Ok(rounded[0] == want)
    }

    fn controls(&self) -> &'static [Control] {
        if self.fmt == WeightFormat::Bf16 { BF16_CONTROLS } else { CONTROLS }
    }

    fn footprint(&self, variant: &Variant) -> Footprint {
        let path = Path::of(variant);
        let bindings = u32::from(path.grouped().is_some()) * if matches!(path, Path::MslSimd | Path::MslTiled) { 2 } else { 3 } + if self.fmt == WeightFormat::Bf16 { 3 } else { 5 };
        match path {
            Path::Ref => Footprint { workgroup_size: 64, workgroup_bytes: 0, bindings },
            Path::Grouped => Footprint { workgroup_size: 256, workgroup_bytes: 4 * (gemm_grouped::PART as u32 + 5), bindings },
            Path::MslSimd => Footprint { workgroup_size: 256, workgroup_bytes: 0, bindings },
            Path::GroupedSmall => Footprint { workgroup_size: 256, workgroup_bytes: 16 * 64 + 8 * 1024, bindings },
            Path::Gemv | Path::Tiled | Path::GroupedTiled | Path::MslTiled | Path::MslDense => Footprint { workgroup_size: 256, workgroup_bytes: 16384, bindings },
        }
    }
}

/// Where the contract splits a grouped GEMM's weights over two buffers: at the second column block of `tiling` (its entries' first rows) where the format's scale rows divide there; the row and its first scale byte.
fn grouped_split(fmt: WeightFormat, n: usize, k: usize) -> Option<(usize, usize)> {
    let row = n.div_ceil(n.clamp(1, 3));
    let scale_byte = match fmt {
        WeightFormat::Bf16 => 0,
        WeightFormat::E4m3 if !row.is_multiple_of(32) => return None,
        WeightFormat::E4m3 => row / 32 * (k / 32),
        WeightFormat::E2m1 => row * (k / 32),
    };
    (row < n).then_some((row, scale_byte))
}

impl GemmKernel {
    /// One run of `variant`, storing f32 sums or (`round`) their bf16 roundings.
    fn run_mode(&self, gpu: &Gpu, variant: &Variant, case: &Case, inputs: &Inputs, control: u32, round: bool) -> Result<Outputs, GpuError> {
        let path = Path::of(variant);
        let bf16 = self.fmt == WeightFormat::Bf16;
        let x = gpu.upload(&inputs.data[0].bytes)?;
        let xs = if bf16 { None } else { Some(gpu.upload(&inputs.data[1].bytes)?) };
        let wi = if bf16 { 1 } else { 2 };
        let (w, ws) = gpu.upload_gemm_weights(&inputs.data[wi].bytes, &inputs.data[wi + 1].bytes)?;
        let words = case.rows * case.n;
        let out = poisoned(gpu, words)?;
        let mut rec = Recorder::new(gpu);
        if let Some(tile) = path.grouped() {
            let (entries, picks) = gemm_grouped::tiling_with_picks(case.rows, case.n, tile.max_rows());
            let table = gpu.upload_pod(&gemm_grouped::table_words(&entries))?;
            let picks = gpu.upload_pod(&picks)?;
            let lang = variant.lang();
            // WGSL: the weight rows from the second column block on in a second buffer, where the format's rows and scales divide there.
            let split = (lang == Lang::Wgsl).then(|| grouped_split(self.fmt, case.n, case.k)).flatten();
            let w_lo = match split {
                Some((row, _)) => gpu.upload(&inputs.data[wi].bytes[..row * gemm::row_bytes(self.fmt, case.k)])?,
                None => w.clone(),
            };
            let w_hi = split.map(|(row, _)| gpu.upload(&inputs.data[wi].bytes[row * gemm::row_bytes(self.fmt, case.k)..])).transpose()?;
            let hi = split.zip(w_hi.as_ref()).map(|((row, scale_byte), w)| GroupedHi { w, row, scale_byte });
            let a = GroupedArgs { fmt: self.fmt, m: case.rows, k: case.k, x: &x, xs: xs.as_ref(), w: &w_lo, ws: ws.as_ref().map(Arg::Whole), hi, out: &out, ldo: case.n, entries: &entries, table: &table, picks: &picks, round };
            gemm_grouped::record_grouped(&mut rec, &a, tile, lang, control)?;
        } else {
            let args = GemmArgs { fmt: self.fmt, m: case.rows, n: case.n, k: case.k, x: &x, xs: xs.as_ref(), w: &w, ws: ws.as_ref(), out: &out, n_base: 0, ldo: case.n, round };
            if path == Path::MslDense {
                gemm::record_msl_dense(&mut rec, &args, control)?;
            } else {
                gemm::record(&mut rec, &args, path.plain().unwrap_or(GemmVariant::Ref), control)?;
            }
        }
        rec.submit()?;
        read_outputs(gpu, &[(&out, words)])
    }

    fn unpack<'a>(&self, inputs: &'a Inputs) -> (Vec<f32>, Vec<f32>, &'a [u8], &'a [u8]) {
        let x = inputs.data[0].f32s();
        if self.fmt == WeightFormat::Bf16 {
            (x, Vec::new(), &inputs.data[1].bytes, &inputs.data[2].bytes)
        } else {
            (x, inputs.data[1].f32s(), &inputs.data[2].bytes, &inputs.data[3].bytes)
        }
    }
}
