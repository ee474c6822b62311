//! GEMM y[m,n] = sum_k x[m,k] w[n,k] for bf16, e4m3 (32x32 e8m0 blocks) and e2m1 (e8m0 per 32 along K) weights.
pub mod contract;
pub mod grouped;

use crate::gpu::{Arg, Buf, Gpu, GpuError, PipelineKey, Recorder, Shader};
use crate::numerics::edge::term;
use crate::numerics::{bf16_to_f32, e2m1_to_f32, e4m3_to_f32, e8m0_to_f32, sum::canonical_sum};

/// Weight storage formats of the model's GEMMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// bf16 weights with bf16 activations, no scales.
    Bf16,
    /// e4m3 weights with one e8m0 scale per 32x32 block; activations act_quant'd to e4m3 per 32.
    E4m3,
    /// e2m1 weights, two per byte (low nibble first), one e8m0 scale per 32 along K; e4m3 activations.
    E2m1,
}

/// Which kernel computes the GEMM; all give the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmVariant {
    /// One invocation per output (the WGSL reference).
    Ref,
    /// Block-parallel over K for 1-8 rows (decode).
    Gemv,
    /// 64x64 tiles (prefill).
    Tiled,
}

/// Most rows the gemv variant handles.
pub const GEMV_MAX_ROWS: usize = 8;

impl GemmVariant {
    /// The variant the engine runs for `m` rows.
    pub fn for_rows(m: usize) -> GemmVariant {
        if m <= GEMV_MAX_ROWS {
            GemmVariant::Gemv
        } else {
            GemmVariant::Tiled
        }
    }

    /// The contract's name for the variant.
    pub fn name(self) -> &'static str {
        match self {
            GemmVariant::Ref => "ref",
            GemmVariant::Gemv => "gemv",
            GemmVariant::Tiled => "tiled",
        }
    }
}

macro_rules! gemm_shader {
    ($kernel:literal, $fmt:literal, $variant:literal $(, $part:literal)*) => {
        Shader {
            lang: crate::gpu::Lang::Wgsl,
            kernel: $kernel,
            variant: $variant,
            source: concat!(
                include_str!(concat!("../../../wgsl/gemm/fmt_", $fmt, ".wgsl")),
                include_str!("../../../wgsl/gemm/common.wgsl"),
                $(include_str!(concat!("../../../wgsl/gemm/", $part, ".wgsl")),)*
                include_str!(concat!("../../../wgsl/gemm/", $variant, ".wgsl"))
            ),
        }
    };
}
pub(crate) use gemm_shader;

pub(crate) const SHADERS: [[Shader; 3]; 3] = [
    [gemm_shader!("gemm_bf16", "bf16", "ref", "w_one"), gemm_shader!("gemm_bf16", "bf16", "gemv", "w_one", "gemv_core"), gemm_shader!("gemm_bf16", "bf16", "tiled", "w_one", "tile_entry", "tile")],
    [gemm_shader!("gemm_e4m3", "e4m3", "ref", "w_one", "ws_one"), gemm_shader!("gemm_e4m3", "e4m3", "gemv", "w_one", "ws_one", "gemv_core"), gemm_shader!("gemm_e4m3", "e4m3", "tiled", "w_one", "ws_one", "tile_entry", "tile")],
    [gemm_shader!("gemm_e2m1", "e2m1", "ref", "w_one", "ws_one"), gemm_shader!("gemm_e2m1", "e2m1", "gemv", "w_one", "ws_one", "gemv_core"), gemm_shader!("gemm_e2m1", "e2m1", "tiled", "w_one", "ws_one", "tile_entry", "tile")],
];

/// The MSL fast path for bf16 weights on Apple GPUs (the vision tower's MLP and the aligner): 64x64 threadgroup tiles over the whole output.
pub(crate) const MSL_DENSE_BF16: Shader = Shader { lang: crate::gpu::Lang::Msl, kernel: "gemm_bf16", variant: "msl_tiled", source: crate::gpu::msl_lib!("msl/gemm/common.metal", "msl/gemm/fmt_bf16.metal", "msl/gemm/tile.metal", "msl/gemm/dense_tiled.metal") };

/// Whether a dense GEMM of `fmt` over `m` rows runs the MSL tiled fast path on a device that takes MSL (bf16 weights, prefill shapes).
pub fn dense_msl(native_msl: bool, fmt: WeightFormat, m: usize) -> bool {
    native_msl && fmt == WeightFormat::Bf16 && m > GEMV_MAX_ROWS
}

/// Records the MSL tiled GEMM of bf16 weights (`control` is 0 outside the contract).
pub fn record_msl_dense(rec: &mut Recorder, a: &GemmArgs, control: u32) -> Result<(), GpuError> {
    if a.fmt != WeightFormat::Bf16 || a.k % 32 != 0 {
        return Err(GpuError::Shader { kernel: "gemm_bf16/msl_tiled".into(), message: format!("{:?} weights with k {}: needs bf16 and k a multiple of 32", a.fmt, a.k) });
    }
    let (m, n, k) = (a.m as u32, a.n as u32, a.k as u32);
    let groups = [n.div_ceil(64), m.div_ceil(64), 1];
    let key = PipelineKey::new(MSL_DENSE_BF16, &[("CONTROL", f64::from(control))]);
    let params = [m, n, k, a.n_base as u32, a.ldo as u32, groups[0], u32::from(a.round)];
    rec.dispatch(&key, &params, &[Arg::Whole(a.x), Arg::Whole(a.w), Arg::Whole(a.out)], groups)
}

/// Bytes of one weight row of K elements.
pub fn row_bytes(fmt: WeightFormat, k: usize) -> usize {
    match fmt {
        WeightFormat::Bf16 => 2 * k,
        WeightFormat::E4m3 => k,
        WeightFormat::E2m1 => k / 2,
    }
}

/// Scale bytes for an [n, k] weight.
pub fn scale_bytes(fmt: WeightFormat, n: usize, k: usize) -> usize {
    match fmt {
        WeightFormat::Bf16 => 0,
        WeightFormat::E4m3 => n.div_ceil(32) * (k / 32),
        WeightFormat::E2m1 => n * (k / 32),
    }
}

/// Device operands of one GEMM.
pub struct GemmArgs<'a> {
    pub fmt: WeightFormat,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Activations [m, k] as f32 values (bf16 or e4m3 values).
    pub x: &'a Buf,
    /// Activation scales [m, k/32] as f32 powers of two (e4m3 and e2m1 formats).
    pub xs: Option<&'a Buf>,
    pub w: &'a Buf,
    pub ws: Option<&'a Buf>,
    /// Output [m, ldo] f32; columns `n_base..n_base+n` are written.
    pub out: &'a Buf,
    pub n_base: usize,
    pub ldo: usize,
    /// Store each output rounded to bf16 instead of as the f32 sum.
    pub round: bool,
}

/// Rows per workgroup of the gemv variant: within its 4096-word workgroup memory, leaving at least `spread` workgroups (`Gpu::spread`), at most 64 (256 where the device wants few workgroups).
pub fn gemv_rows(m: usize, n: usize, k: usize, spread: usize) -> u32 {
    let fit = 4096 / (m.max(1) * (k / 32).max(1));
    let most = if spread < 256 { 256 } else { 64 };
    fit.min(n / spread.max(1)).clamp(1, most) as u32
}

/// Threads per workgroup of the gemv core for depth `k` and `r` columns: a whole number of thread groups of K/32 (one thread a block), no more than the r x K/32 blocks there are, rounded up to whole warps of 32, at most 256.
pub fn gemv_threads(k: usize, r: u32) -> u32 {
    let nb = (k / 32).max(1);
    let groups = (256 / nb).clamp(1, r.max(1) as usize);
    (groups * nb).next_multiple_of(32).min(256) as u32
}

/// Records one GEMM with `variant` (`control` is 0 outside the contract).
pub fn record(rec: &mut Recorder, a: &GemmArgs, variant: GemmVariant, control: u32) -> Result<(), GpuError> {
    let fi = a.fmt as usize;
    let shader = SHADERS[fi][variant as usize];
    let (m, n, k) = (a.m as u32, a.n as u32, a.k as u32);
    let (constants, groups): (Vec<(&'static str, f64)>, [u32; 3]) = match variant {
        GemmVariant::Ref => (vec![], [n.div_ceil(64), m, 1]),
        GemmVariant::Gemv => {
            let r = gemv_rows(a.m, a.n, a.k, rec.gpu().spread());
            let wgs = n.div_ceil(r);
            let gx = wgs.min(32768);
            (vec![("R", f64::from(r)), ("WG", f64::from(gemv_threads(a.k, r)))], [gx, wgs.div_ceil(gx), 1])
        }
        GemmVariant::Tiled => (vec![], [n.div_ceil(64), m.div_ceil(64), 1]),
    };
    let mut constants = constants;
    constants.push(("CONTROL", f64::from(control)));
    let key = PipelineKey::new(shader, &constants);
    let params = [m, n, k, a.n_base as u32, a.ldo as u32, groups[0], u32::from(a.round)];
    let args = operands(a.fmt, [a.x, a.w, a.out], a.xs, a.ws).ok_or_else(|| GpuError::Shader { kernel: shader.kernel.into(), message: "scales missing for a scaled format".into() })?;
    rec.dispatch(&key, &params, &args, groups)
}

/// A GEMM's bindings in its format's order: x, (x scales), w, (w scales), out; None when a scaled format lacks scales.
pub(crate) fn operands<'a>(fmt: WeightFormat, [x, w, out]: [&'a Buf; 3], xs: Option<&'a Buf>, ws: Option<&'a Buf>) -> Option<Vec<Arg<'a>>> {
    match (fmt, xs, ws) {
        (WeightFormat::Bf16, _, _) => Some(vec![Arg::Whole(x), Arg::Whole(w), Arg::Whole(out)]),
        (_, Some(xs), Some(ws)) => Some(vec![Arg::Whole(x), Arg::Whole(xs), Arg::Whole(w), Arg::Whole(ws), Arg::Whole(out)]),
        _ => None,
    }
}

/// Decodes weight row `n` (K values) and its per-block scales.
pub fn decode_row(fmt: WeightFormat, k: usize, w: &[u8], ws: &[u8], n: usize) -> (Vec<f32>, Vec<f32>) {
    let nb = k / 32;
    match fmt {
        WeightFormat::Bf16 => {
            let row = &w[n * 2 * k..(n + 1) * 2 * k];
            (row.chunks_exact(2).map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect(), vec![1.0; k.div_ceil(32)])
        }
        WeightFormat::E4m3 => {
            let row = &w[n * k..(n + 1) * k];
            let s = (0..nb).map(|b| e8m0_to_f32(ws[(n / 32) * nb + b])).collect();
            (row.iter().map(|&c| e4m3_to_f32(c)).collect(), s)
        }
        WeightFormat::E2m1 => {
            let row = &w[n * k / 2..(n + 1) * k / 2];
            let v = row.iter().flat_map(|&b| [e2m1_to_f32(b & 15), e2m1_to_f32(b >> 4)]).collect();
            (v, (0..nb).map(|b| e8m0_to_f32(ws[n * nb + b])).collect())
        }
    }
}

/// The CPU oracle: canonical order, scales multiplying block sums.
pub fn oracle(fmt: WeightFormat, m: usize, n: usize, k: usize, x: &[f32], xs: &[f32], w: &[u8], ws: &[u8]) -> Vec<f32> {
    let nb = k.div_ceil(32);
    let mut out = vec![0.0f32; m * n];
    for j in 0..n {
        let (wr, wsc) = decode_row(fmt, k, w, ws, j);
        for i in 0..m {
            let xr = &x[i * k..(i + 1) * k];
            let xsc = |b: usize| if fmt == WeightFormat::Bf16 { 1.0 } else { xs[i * nb + b] };
            out[i * n + j] = canonical_sum(k, |t| term(xr[t] * wr[t]), |b| xsc(b) * wsc[b]);
        }
    }
    out
}

/// The f64 reference and the sum of |terms| (for the bound), per output.
pub fn reference(fmt: WeightFormat, m: usize, n: usize, k: usize, x: &[f32], xs: &[f32], w: &[u8], ws: &[u8]) -> (Vec<f64>, Vec<f64>) {
    let nb = k.div_ceil(32);
    let mut val = vec![0.0f64; m * n];
    let mut mag = vec![0.0f64; m * n];
    for j in 0..n {
        let (wr, wsc) = decode_row(fmt, k, w, ws, j);
        for i in 0..m {
            let (mut v, mut a) = (0.0f64, 0.0f64);
            for t in 0..k {
                let b = t / 32;
                let s = f64::from(wsc[b]) * if fmt == WeightFormat::Bf16 { 1.0 } else { f64::from(xs[i * nb + b]) };
                let p = f64::from(x[i * k + t]) * f64::from(wr[t]) * s;
                v += p;
                a += p.abs();
            }
            val[i * n + j] = v;
            mag[i * n + j] = a;
        }
    }
    (val, mag)
}

impl Gpu {
    /// Uploads GEMM weights and scales (scales may be empty for bf16).
    pub fn upload_gemm_weights(&self, w: &[u8], ws: &[u8]) -> Result<(Buf, Option<Buf>), GpuError> {
        let wb = self.upload(w)?;
        let sb = if ws.is_empty() { None } else { Some(self.upload(ws)?) };
        Ok((wb, sb))
    }
}
