//! Checkpoint weights dequantized to f64 (exact): bf16 and f32 vectors, fp8 32x32 blocks, fp4 rows, engram fp8 rows.
use super::quant::act_quant;
use super::ReferenceError;
use crate::weights::{Checkpoint, TensorView};
use crate::model::Dtype;
use crate::numerics::{e2m1_to_f32, e4m3_to_f32, e8m0_to_f32};

/// A linear map `y = W x` with W `[out, inp]` in f64; `quant_input` applies the official GEMM-input act_quant (fp8 and fp4 weights).
#[derive(Debug, Clone)]
pub struct Linear {
    /// Output features.
    pub out: usize,
    /// Input features.
    pub inp: usize,
    /// Row-major `[out, inp]` weights.
    pub w: Vec<f64>,
    /// Whether the input goes through act_quant first.
    pub quant_input: bool,
}

impl Linear {
    /// The GEMM input as the weight sees it: act_quant of `x` for quantized weights, `x` otherwise.
    pub fn input(&self, x: &[f64]) -> Vec<f64> {
        if self.quant_input {
            act_quant(x)
        } else {
            x.to_vec()
        }
    }

    /// `W q(x)` in f64, without output rounding.
    pub fn apply(&self, x: &[f64]) -> Vec<f64> {
        let xq = self.input(x);
        self.w.chunks_exact(self.inp).map(|row| row.iter().zip(&xq).map(|(a, b)| a * b).sum()).collect()
    }

    /// `sum_k |W_jk q(x)_k|` per output: the magnitude a GEMM error bound scales with.
    pub fn abs_terms(&self, x: &[f64]) -> Vec<f64> {
        let xq = self.input(x);
        self.w.chunks_exact(self.inp).map(|row| row.iter().zip(&xq).map(|(a, b)| (a * b).abs()).sum()).collect()
    }
}

/// The tensor `name` with the expected dtype.
fn view<'a>(ck: &'a Checkpoint, name: &str, dtype: Dtype) -> Result<TensorView<'a>, ReferenceError> {
    let t = ck.verified(name)?;
    if t.dtype != dtype {
        return Err(ReferenceError::Dtype { name: name.into(), expected: dtype, found: t.dtype });
    }
    Ok(t)
}

/// Fails unless the 2-D tensor `name` has shape `[rows, cols]`.
fn check_shape(name: &str, shape: &[usize], want: &[usize]) -> Result<(), ReferenceError> {
    if shape == want {
        Ok(())
    } else {
        Err(ReferenceError::Shape { name: name.into(), expected: want.to_vec(), found: shape.to_vec() })
    }
}

/// A BF16 or F32 tensor as f64 values.
pub fn plain(ck: &Checkpoint, name: &str) -> Result<Vec<f64>, ReferenceError> {
    let t = ck.verified(name)?;
    let v = t.to_f32().ok_or_else(|| ReferenceError::Dtype { name: name.into(), expected: Dtype::BF16, found: t.dtype })?;
    Ok(v.into_iter().map(f64::from).collect())
}

/// A BF16 or F32 tensor of `n` values.
pub fn vector(ck: &Checkpoint, name: &str, n: usize) -> Result<Vec<f64>, ReferenceError> {
    let v = plain(ck, name)?;
    if v.len() != n {
        return Err(ReferenceError::Shape { name: name.into(), expected: vec![n], found: vec![v.len()] });
    }
    Ok(v)
}

/// A BF16 weight `{base}.weight` `[out, inp]`, applied without input quantization.
pub fn bf16_linear(ck: &Checkpoint, base: &str, out: usize, inp: usize) -> Result<Linear, ReferenceError> {
    let name = format!("{base}.weight");
    let t = view(ck, &name, Dtype::BF16)?;
    check_shape(&name, t.shape, &[out, inp])?;
    Ok(Linear { out, inp, w: plain(ck, &name)?, quant_input: false })
}

/// fp8 values of `{base}.weight` `[out, inp]` times their 32x32 e8m0 block scales.
fn fp8_values(ck: &Checkpoint, base: &str, out: usize, inp: usize) -> Result<Vec<f64>, ReferenceError> {
    let (wn, sn) = (format!("{base}.weight"), format!("{base}.scale"));
    let w = view(ck, &wn, Dtype::F8E4M3)?;
    check_shape(&wn, w.shape, &[out, inp])?;
    let s = view(ck, &sn, Dtype::F8E8M0)?;
    let nbc = inp.div_ceil(32);
    check_shape(&sn, s.shape, &[out.div_ceil(32), nbc])?;
    Ok((0..out * inp)
        .map(|i| f64::from(e4m3_to_f32(w.bytes[i])) * f64::from(e8m0_to_f32(s.bytes[(i / inp / 32) * nbc + (i % inp) / 32])))
        .collect())
}

/// An fp8 weight `{base}.weight` + `.scale`, applied with GEMM-input act_quant.
pub fn fp8_linear(ck: &Checkpoint, base: &str, out: usize, inp: usize) -> Result<Linear, ReferenceError> {
    Ok(Linear { out, inp, w: fp8_values(ck, base, out, inp)?, quant_input: true })
}

/// An fp8 weight dequantized to bf16 (exact) and applied without input quantization (`wo_a`, as the official convert.py does).
pub fn fp8_as_bf16_linear(ck: &Checkpoint, base: &str, out: usize, inp: usize) -> Result<Linear, ReferenceError> {
    Ok(Linear { out, inp, w: fp8_values(ck, base, out, inp)?, quant_input: false })
}

/// An fp4 expert weight: I8 `[out, inp/2]` (low nibble = even column) + e8m0 `[out, inp/32]`, applied with GEMM-input act_quant.
pub fn fp4_linear(ck: &Checkpoint, base: &str, out: usize, inp: usize) -> Result<Linear, ReferenceError> {
    let (wn, sn) = (format!("{base}.weight"), format!("{base}.scale"));
    let w = view(ck, &wn, Dtype::I8)?;
    check_shape(&wn, w.shape, &[out, inp / 2])?;
    let s = view(ck, &sn, Dtype::F8E8M0)?;
    let nb = inp / 32;
    check_shape(&sn, s.shape, &[out, nb])?;
    let values = (0..out * inp)
        .map(|i| {
            let (r, c) = (i / inp, i % inp);
            let byte = w.bytes[r * (inp / 2) + c / 2];
            let nib = if c % 2 == 0 { byte & 15 } else { byte >> 4 };
            f64::from(e2m1_to_f32(nib)) * f64::from(e8m0_to_f32(s.bytes[r * nb + c / 32]))
        })
        .collect();
    Ok(Linear { out, inp, w: values, quant_input: true })
}

/// An engram table `{base}.weight` F8_E4M3 `[rows, width]` with one e8m0 scale per 32 columns, dequantized.
pub fn fp8_rows(ck: &Checkpoint, base: &str, rows: usize, width: usize) -> Result<Vec<f64>, ReferenceError> {
    let (wn, sn) = (format!("{base}.weight"), format!("{base}.scale"));
    let w = view(ck, &wn, Dtype::F8E4M3)?;
    check_shape(&wn, w.shape, &[rows, width])?;
    let s = view(ck, &sn, Dtype::F8E8M0)?;
    let nb = width.div_ceil(32);
    check_shape(&sn, s.shape, &[rows, nb])?;
    Ok((0..rows * width)
        .map(|i| f64::from(e4m3_to_f32(w.bytes[i])) * f64::from(e8m0_to_f32(s.bytes[(i / width) * nb + (i % width) / 32])))
        .collect())
}
