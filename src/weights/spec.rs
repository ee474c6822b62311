//! What a checkpoint must hold: each tensor's name, dtype, shape and byte encoding.
use crate::weights::safetensors::{numel, Dtype};

/// How a tensor's bytes encode its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    /// Plain BF16 or F32 values.
    Plain,
    /// fp8 e4m3 weight `[out, in]` with 32x32 e8m0 blocks in the matching `.scale`.
    Fp8Block,
    /// fp8 e4m3 engram table `[rows, width]` with 1x32 e8m0 blocks in the matching `.scale`.
    Fp8Rows,
    /// fp4 e2m1 pairs `[out, in/2]` with e8m0 per 32 along K in the matching `.scale`.
    Fp4,
    /// e8m0 scales of the matching `.weight`.
    Scale,
}

/// One expected tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// Canonical (release) name.
    pub name: String,
    /// Storage dtype.
    pub dtype: Dtype,
    /// Storage shape.
    pub shape: Vec<usize>,
    /// Encoding of the bytes.
    pub quant: Quant,
}

impl TensorSpec {
    /// Bytes of the stored tensor.
    pub fn byte_len(&self) -> u64 {
        numel(&self.shape) * self.dtype.size() as u64
    }

    /// Logical `[rows, cols]` of a quantized weight (fp4 columns unpacked); the storage shape otherwise.
    pub fn logical_shape(&self) -> Vec<usize> {
        match self.quant {
            Quant::Fp4 => vec![self.shape[0], self.shape[1] * 2],
            _ => self.shape.clone(),
        }
    }

    /// Name of the scale tensor of a quantized weight.
    pub fn scale_name(&self) -> Option<String> {
        match self.quant {
            Quant::Fp8Block | Quant::Fp8Rows | Quant::Fp4 => Some(scale_name_of(&self.name)),
            _ => None,
        }
    }
}

/// `X.weight` -> `X.scale`.
pub fn scale_name_of(weight: &str) -> String {
    format!("{}.scale", weight.strip_suffix(".weight").unwrap_or(weight))
}
