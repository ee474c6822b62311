//! Helpers shared by kernel registrations: unit roundoff bounds, output buffers, random formats.
use crate::contract::{Outputs, Rng, POISON};
use crate::gpu::{Buf, Gpu, GpuError};

/// Unit roundoff of f32.
pub const U: f64 = 1.0 / 16_777_216.0;

/// gamma_n = n u / (1 - n u): the classic bound factor for n rounded operations.
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// The most a canonical flush moves one result (N7): a value at or below 2^-126 becomes zero.
pub const FLUSH: f64 = 1.0 / (1u128 << 126) as f64;

/// The most a dropped term moves a sum (N7): terms below 2^-103 are zero.
pub const TERM: f64 = 1.0 / (1u128 << 103) as f64;

/// A random value of magnitude in [2^lo, 2^(hi+1)), either sign, rounded to bf16 (the edge inputs that drive sums and products below 2^-126).
pub fn tiny(rng: &mut Rng, lo: i32, hi: i32) -> f32 {
    let e = lo + rng.below((hi - lo + 1) as u64) as i32;
    let m = 1.0 + rng.below(128) as f32 / 128.0;
    let v = m * crate::numerics::pow2(e);
    if rng.next_u32() & 1 == 0 { v } else { -v }
}

/// Additions on the longest path of a canonical sum of `len` terms (block, segment, total) plus the scaling.
pub fn canonical_depth(len: usize) -> usize {
    let nb = len.div_ceil(32);
    32 + 8 + nb.div_ceil(8) + 1
}

/// An output buffer of `words` 32-bit words filled with the NaN poison.
pub fn poisoned(gpu: &Gpu, words: usize) -> Result<Buf, GpuError> {
    let b = gpu.alloc(words as u64 * 4)?;
    gpu.fill_u32(&b, POISON);
    Ok(b)
}

/// Reads output buffers back, each truncated to its word count.
pub fn read_outputs(gpu: &Gpu, bufs: &[(&Buf, usize)]) -> Result<Outputs, GpuError> {
    bufs.iter().map(|(b, n)| Ok(gpu.read_u32(b)?[..*n].to_vec())).collect()
}

/// f32 words as f64 values.
pub fn f64s(words: &[u32]) -> Vec<f64> {
    words.iter().map(|&w| f64::from(f32::from_bits(w))).collect()
}

/// f32 values as words.
pub fn words(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A random finite e4m3 code (never NaN), full range.
pub fn e4m3_code(rng: &mut Rng) -> u8 {
    loop {
        let c = rng.next_u32() as u8;
        if c & 0x7f != 0x7f {
            return c;
        }
    }
}

/// A random bf16 value of about `scale` magnitude, as f32.
pub fn bf16_normal(rng: &mut Rng, scale: f32) -> f32 {
    crate::numerics::round_bf16(rng.normal() * scale)
}

/// Uploads every input, allocates poisoned outputs of `out_words` words each, records one call, submits and reads the outputs back.
pub fn run_uploaded(
    gpu: &Gpu,
    inputs: &crate::contract::Inputs,
    out_words: &[usize],
    record: impl FnOnce(&mut crate::gpu::Recorder, &[Buf], &[Buf]) -> Result<(), GpuError>,
) -> Result<Outputs, GpuError> {
    let ins = inputs.data.iter().map(|d| gpu.upload(&d.bytes)).collect::<Result<Vec<_>, _>>()?;
    let outs = out_words.iter().map(|&w| poisoned(gpu, w)).collect::<Result<Vec<_>, _>>()?;
    let mut rec = crate::gpu::Recorder::new(gpu);
    record(&mut rec, &ins, &outs)?;
    rec.submit()?;
    let pairs: Vec<(&Buf, usize)> = outs.iter().zip(out_words).map(|(b, &w)| (b, w)).collect();
    read_outputs(gpu, &pairs)
}

/// Per-row u32 data.
pub fn rows_u32(v: &[u32], per_row: usize) -> crate::contract::Data {
    crate::contract::Data { bytes: bytemuck::cast_slice(v).to_vec(), row_bytes: Some(per_row * 4) }
}

/// The values of u32 data.
pub fn u32s(d: &crate::contract::Data) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(&d.bytes)
}
