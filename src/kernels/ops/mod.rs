//! Row and elementwise ops: act_quant, RMSNorm, clamped SwiGLU, add, scale, bf16 rounding, softmax, argmax, top-k.
pub mod contract;
pub mod select_contract;

use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::kernels::dispatch::{grid64, key};
use crate::numerics::edge::{add, max, sub};
use crate::numerics::math::{exp, mul_rn, recip, rsqrt, silu};
use crate::numerics::{act_quant_elem, act_scale_exp, e4m3_to_f32, pow2, round_bf16, sum::canonical_sum};

macro_rules! op_shader {
    ($kernel:literal, $file:literal) => {
        Shader { lang: crate::gpu::Lang::Wgsl, kernel: $kernel, variant: "ref", source: include_str!(concat!("../../../wgsl/ops/", $file)) }
    };
    ($kernel:literal, $file:literal, rows) => {
        Shader {
            lang: crate::gpu::Lang::Wgsl,
            kernel: $kernel,
            variant: "ref",
            source: concat!(include_str!("../../../wgsl/ops/row_reduce.wgsl"), include_str!(concat!("../../../wgsl/ops/", $file))),
        }
    };
}

pub(crate) const ACT_QUANT: Shader = op_shader!("act_quant", "act_quant.wgsl");
pub(crate) const RMSNORM: Shader = op_shader!("rmsnorm", "rmsnorm.wgsl", rows);
pub(crate) const SWIGLU: Shader = op_shader!("swiglu", "swiglu.wgsl");
pub(crate) const SOFTMAX: Shader = op_shader!("softmax", "softmax.wgsl", rows);
pub(crate) const SELECT: Shader = op_shader!("topk", "select.wgsl");
pub(crate) const ARGMAX: Shader = Shader { kernel: "argmax", ..SELECT };

/// Elementwise ops sharing one shader (override OP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elementwise {
    /// y = a + b.
    Add = 0,
    /// y = a * s[row].
    Scale = 1,
    /// y = round_bf16(a).
    RoundBf16 = 2,
}

pub(crate) const ELEMENTWISE: [Shader; 3] = [
    op_shader!("add", "elementwise.wgsl"),
    op_shader!("scale", "elementwise.wgsl"),
    op_shader!("round_bf16", "elementwise.wgsl"),
];

/// Records act_quant of x [m, k] into e4m3 values q [m, k] and power-of-two scales s [m, k/32].
pub fn record_act_quant(rec: &mut Recorder, x: &Buf, q: &Buf, s: &Buf, m: usize, k: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * k / 32 * 8);
    rec.dispatch(&key(ACT_QUANT, control, &[]), &[m as u32, k as u32, g[0]], &[Arg::Whole(x), Arg::Whole(q), Arg::Whole(s)], g)
}

/// act_quant on the CPU: (e4m3 values, scales).
pub fn act_quant(x: &[f32], k: usize) -> (Vec<f32>, Vec<f32>) {
    let mut q = Vec::with_capacity(x.len());
    let mut s = Vec::with_capacity(x.len() / 32);
    for blk in x.chunks(32) {
        let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let e = act_scale_exp(amax);
        q.extend(blk.iter().map(|&v| e4m3_to_f32(act_quant_elem(v, e))));
        s.push(pow2(e));
    }
    debug_assert_eq!(q.len() % k.max(1), 0);
    (q, s)
}

/// RMSNorm parameters.
#[derive(Clone, Copy, Debug)]
pub struct RmsNorm {
    pub m: usize,
    pub d: usize,
    pub eps: f32,
    pub bf16_out: bool,
}

impl RmsNorm {
    /// 1/D rounded once from f64.
    pub fn inv_d(&self) -> f32 {
        (1.0 / self.d as f64) as f32
    }
}

/// Records RMSNorm of x [m, d] with weight w [d] into y.
pub fn record_rmsnorm(rec: &mut Recorder, p: &RmsNorm, x: &Buf, w: &Buf, y: &Buf, control: u32) -> Result<(), GpuError> {
    record_rmsnorm_args(rec, p, Arg::Whole(x), w, y, control)
}

/// `record_rmsnorm` with x bound as given (a range of a larger buffer starting on 16 bytes).
pub fn record_rmsnorm_args(rec: &mut Recorder, p: &RmsNorm, x: Arg, w: &Buf, y: &Buf, control: u32) -> Result<(), GpuError> {
    let params = [p.m as u32, p.d as u32, p.inv_d().to_bits(), p.eps.to_bits(), u32::from(p.bf16_out)];
    rec.dispatch(&key(RMSNORM, control, &[]), &params, &[x, Arg::Whole(w), Arg::Whole(y), x], [p.m as u32, 1, 1])
}

/// RMSNorm on the CPU.
pub fn rmsnorm(p: &RmsNorm, x: &[f32], w: &[f32]) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(p.d) {
        let total = canonical_sum(p.d, |i| mul_rn(row[i], row[i]), |_| 1.0);
        let r = rsqrt(mul_rn(total, p.inv_d()) + p.eps);
        y.extend(row.iter().zip(w).map(|(&v, &wi)| {
            let o = mul_rn(wi, mul_rn(v, r));
            if p.bf16_out {
                round_bf16(o)
            } else {
                o
            }
        }));
    }
    y
}

/// Records clamped SwiGLU of g, u [m, f] with per-row weights rw [m] into a.
pub fn record_swiglu(rec: &mut Recorder, g: &Buf, u: &Buf, rw: &Buf, a: &Buf, m: usize, f: usize, limit: f32, bf16_out: bool, control: u32) -> Result<(), GpuError> {
    record_swiglu_args(rec, [Arg::Whole(g), Arg::Whole(u)], rw, a, m, f, limit, bf16_out, control)
}

/// `record_swiglu` with g and u bound as given (whole buffers or ranges of one).
#[allow(clippy::too_many_arguments)]
pub fn record_swiglu_args(rec: &mut Recorder, [g, u]: [Arg<'_>; 2], rw: &Buf, a: &Buf, m: usize, f: usize, limit: f32, bf16_out: bool, control: u32) -> Result<(), GpuError> {
    let grid = grid64(m * f);
    let params = [m as u32, f as u32, limit.to_bits(), u32::from(bf16_out), grid[0]];
    rec.dispatch(&key(SWIGLU, control, &[]), &params, &[g, u, Arg::Whole(rw), Arg::Whole(a)], grid)
}

/// Clamped SwiGLU on the CPU.
pub fn swiglu(g: &[f32], u: &[f32], rw: &[f32], f: usize, limit: f32, bf16_out: bool) -> Vec<f32> {
    g.iter()
        .zip(u)
        .enumerate()
        .map(|(i, (&gv, &uv))| {
            let v = mul_rn(mul_rn(silu(gv.min(limit)), uv.clamp(-limit, limit)), rw[i / f]);
            if bf16_out {
                round_bf16(v)
            } else {
                v
            }
        })
        .collect()
}

/// Records an elementwise op over [m, d]: `b` is the second operand [m, d] (add) or per-row scales [m] (scale).
pub fn record_elementwise(rec: &mut Recorder, op: Elementwise, a: &Buf, b: &Buf, y: &Buf, m: usize, d: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * d);
    let k = key(ELEMENTWISE[op as usize], control, &[("OP", op as u32 as f64)]);
    rec.dispatch(&k, &[m as u32, d as u32, g[0]], &[Arg::Whole(a), Arg::Whole(b), Arg::Whole(y)], g)
}

/// The elementwise op on the CPU.
pub fn elementwise(op: Elementwise, a: &[f32], b: &[f32], d: usize) -> Vec<f32> {
    match op {
        Elementwise::Add => a.iter().zip(b).map(|(&x, &y)| add(x, y)).collect(),
        Elementwise::Scale => a.iter().enumerate().map(|(i, &x)| mul_rn(x, b[i / d])).collect(),
        Elementwise::RoundBf16 => a.iter().map(|&x| round_bf16(x)).collect(),
    }
}

/// Records the softmax of scale * x over rows of d.
pub fn record_softmax(rec: &mut Recorder, x: &Buf, y: &Buf, m: usize, d: usize, scale: f32, control: u32) -> Result<(), GpuError> {
    rec.dispatch(&key(SOFTMAX, control, &[]), &[m as u32, d as u32, scale.to_bits()], &[Arg::Whole(x), Arg::Whole(y)], [m as u32, 1, 1])
}

/// Row softmax of scale * x on the CPU.
pub fn softmax(x: &[f32], d: usize, scale: f32) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mx = row.iter().fold(f32::MIN, |a, &v| max(a, mul_rn(v, scale)));
        let total = canonical_sum(d, |i| exp(sub(mul_rn(row[i], scale), mx)), |_| 1.0);
        let r = recip(total);
        y.extend(row.iter().map(|&v| mul_rn(exp(sub(mul_rn(v, scale), mx)), r)));
    }
    y
}

/// Records top-k of each row of x [m, d] (k = 1 is argmax): indices and values, best first, ties to the lower index.
pub fn record_topk(rec: &mut Recorder, x: &Buf, idx: &Buf, val: &Buf, m: usize, d: usize, k: usize, control: u32) -> Result<(), GpuError> {
    let shader = if k == 1 { ARGMAX } else { SELECT };
    let params = [m as u32, d as u32, k.min(d) as u32];
    rec.dispatch(&key(shader, control, &[]), &params, &[Arg::Whole(x), Arg::Whole(idx), Arg::Whole(val)], [m as u32, 1, 1])
}

/// Top-k of each row on the CPU: (indices, values), larger value first, ties to the lower index.
pub fn topk(x: &[f32], d: usize, k: usize) -> (Vec<u32>, Vec<f32>) {
    let mut idx = Vec::new();
    let mut val = Vec::new();
    for row in x.chunks(d) {
        let mut order: Vec<usize> = (0..d).collect();
        order.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
        for &i in order.iter().take(k.min(d)) {
            idx.push(i as u32);
            val.push(row[i]);
        }
    }
    (idx, val)
}
