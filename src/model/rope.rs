//! RoPE inverse-frequency tables in f64 (spec 2.5): the main table and the compress table with YaRN.
use crate::model::config::{Config, Yarn};

/// Which RoPE table a layer rotates with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeTable {
    /// `rope_theta`, no YaRN: ratio-0 layers and DSpark stages.
    Main,
    /// `compress_rope_theta` with YaRN always applied: layers with ratio > 0.
    Compress,
}

/// The YaRN ramp band `(low, high)` in pair indices: `low = max(floor(c(beta_fast)), 0)`, `high = min(ceil(c(beta_slow)), rd - 1)`.
pub fn yarn_band(rope_dim: usize, base: f64, yarn: &Yarn) -> (f64, f64) {
    let d = rope_dim as f64;
    let corrected = |rotations: f64| {
        d * (yarn.original_seq_len as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * base.ln())
    };
    let low = corrected(yarn.beta_fast).floor().max(0.0);
    let high = corrected(yarn.beta_slow).ceil().min(d - 1.0);
    (low, high)
}

/// Inverse frequency of each of the `rope_dim / 2` pairs: `base^(-2i/rd)`, blended towards `/factor` over the YaRN band when `yarn` is given.
pub fn rope_inv_freq(rope_dim: usize, base: f64, yarn: Option<&Yarn>) -> Vec<f64> {
    let d = rope_dim as f64;
    let plain = (0..rope_dim / 2).map(|i| 1.0 / base.powf((2 * i) as f64 / d));
    let Some(y) = yarn else { return plain.collect() };
    let (low, high) = yarn_band(rope_dim, base, y);
    plain
        .enumerate()
        .map(|(i, f)| {
            let ramp = ((i as f64 - low) / (high - low).max(1e-3)).clamp(0.0, 1.0);
            let smooth = 1.0 - ramp;
            f / y.factor * (1.0 - smooth) + f * smooth
        })
        .collect()
}

impl Config {
    /// The inverse frequencies of `table` for this config's rope dims.
    pub fn rope_inv_freq(&self, table: RopeTable) -> Vec<f64> {
        match table {
            RopeTable::Main => rope_inv_freq(self.qk_rope_head_dim, self.rope_theta, None),
            RopeTable::Compress => {
                rope_inv_freq(self.qk_rope_head_dim, self.compress_rope_theta, self.rope_scaling.as_ref())
            }
        }
    }
}
