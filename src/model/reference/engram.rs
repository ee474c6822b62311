//! Engram in f64 (spec 2.3): table rows by hash id, `wkv` into per-stream keys and a shared value, the signed-sqrt sigmoid gate, the residual add.
use super::mhc::{rms_factor, sigmoid};
use super::weights::Linear;

/// One engram layer's weights.
#[derive(Debug, Clone)]
pub struct Engram {
    /// Position of this layer in `engram_layer_ids` (its slot in the hash ids).
    pub index: usize,
    /// Dequantized table `[rows, engram_head_dim]` (`engram.embed`).
    pub embed: Vec<f64>,
    /// Width of one table row.
    pub head_dim: usize,
    /// `engram.wkv` `[D*(HC+1), cols*head_dim]`.
    pub wkv: Linear,
    /// `q_weight * k_weight` `[HC, D]`, the only form the gate uses.
    pub weight: Vec<f64>,
}

/// The engram's intermediate values for one token.
#[derive(Debug, Clone, PartialEq)]
pub struct EngramTrace {
    /// `bf16(wkv E)`: HC keys then the value, `[(HC+1) D]`.
    pub kv: Vec<f64>,
    /// Gate per stream.
    pub gate: Vec<f64>,
    /// `h + gate * value` per stream before its bf16 rounding, `[HC D]`.
    pub raw: Vec<f64>,
}

impl Engram {
    /// The concatenated table rows of one token's hash ids.
    pub fn rows(&self, ids: &[u32]) -> Vec<f64> {
        ids.iter().flat_map(|&id| {
            let r = id as usize * self.head_dim;
            self.embed[r..r + self.head_dim].iter().copied()
        }).collect()
    }

    /// The engram on one token's streams `[HC D]`; `dead` (image span) shuts the gate.
    pub fn run(&self, flat: &[f64], ids: &[u32], dead: bool, hc: usize, eps: f64) -> EngramTrace {
        let d = flat.len() / hc;
        let kv: Vec<f64> = self.wkv.apply(&self.rows(ids)).into_iter().map(super::quant::bf16).collect();
        let value = &kv[hc * d..];
        let mut gate = vec![0.0; hc];
        let mut raw = flat.to_vec();
        for c in 0..hc {
            let (h, key, w) = (&flat[c * d..(c + 1) * d], &kv[c * d..(c + 1) * d], &self.weight[c * d..(c + 1) * d]);
            let rstd = rms_factor(h, eps) * rms_factor(key, eps);
            let dot = h.iter().zip(w).zip(key).map(|((a, b), k)| a * b * k).sum::<f64>() * rstd / (d as f64).sqrt();
            let g = if dead { 0.0 } else { sigmoid(dot.abs().max(1e-6).sqrt().copysign(dot)) };
            gate[c] = g;
            raw[c * d..(c + 1) * d].iter_mut().zip(value).for_each(|(x, v)| *x += g * v);
        }
        EngramTrace { kv, gate, raw }
    }
}
