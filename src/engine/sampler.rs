//! Token sampling: greedy argmax, or temperature and top-p with a draw that depends only on (seed, absolute position).
use crate::kernels::ops::softmax;
use crate::numerics::sum::{BLOCK, SEG_BLOCKS};

/// Why a token could not be sampled.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// No logits.
    #[error("no logits to sample from")]
    Empty,
    /// A logit is NaN.
    #[error("logit {0} is NaN (an engine error; `lockstep run --device cpu` names the op that produced it)")]
    NaN(usize),
    /// Settings out of range.
    #[error("{0}")]
    Settings(String),
}

/// How tokens are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// Argmax, lower index on ties.
    Greedy,
    /// Softmax of logits / max(temperature, 1e-5), nucleus of mass `top_p`, one uniform draw per position from `seed`.
    Random { temperature: f32, top_p: f32, seed: u64 },
}

/// A deterministic sampler.
#[derive(Clone, Copy, Debug)]
pub struct Sampler {
    mode: Sampling,
}

/// splitmix64 of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The uniform draw in [0, 1) for `position`: the top 24 bits of splitmix64(seed ^ position) times 2^-24.
pub fn uniform(seed: u64, position: u64) -> f32 {
    (splitmix64(seed ^ position) >> 40) as f32 * (1.0 / 16_777_216.0)
}

/// Prefix sums where entry i is exactly `canonical_sum` of the first i + 1 terms (blocks of 32, segments of 8 blocks).
pub fn canonical_prefix_sums(xs: &[f32]) -> Vec<f32> {
    let (mut total, mut seg, mut block) = (0.0f32, 0.0f32, 0.0f32);
    let mut out = Vec::with_capacity(xs.len());
    for (i, &x) in xs.iter().enumerate() {
        block += x;
        out.push(total + (seg + block));
        if (i + 1).is_multiple_of(BLOCK) {
            seg += block;
            block = 0.0;
            if ((i + 1) / BLOCK).is_multiple_of(SEG_BLOCKS) {
                total += seg;
                seg = 0.0;
            }
        }
    }
    out
}

/// Index of the largest value, the lower index on ties.
fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

impl Sampler {
    /// A sampler; a temperature of 0 means greedy.
    pub fn new(mode: Sampling) -> Result<Sampler, SamplerError> {
        if let Sampling::Random { temperature, top_p, .. } = mode {
            if !(temperature >= 0.0 && temperature.is_finite()) {
                return Err(SamplerError::Settings(format!("temperature {temperature} must be a finite number >= 0")));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(SamplerError::Settings(format!("top-p {top_p} must be in (0, 1]")));
            }
            if temperature == 0.0 {
                return Ok(Sampler { mode: Sampling::Greedy });
            }
        }
        Ok(Sampler { mode })
    }

    /// The token for the logits of the row at absolute `position`.
    pub fn sample(&self, logits: &[f32], position: usize) -> Result<u32, SamplerError> {
        if logits.is_empty() {
            return Err(SamplerError::Empty);
        }
        if let Some(i) = logits.iter().position(|v| v.is_nan()) {
            return Err(SamplerError::NaN(i));
        }
        let Sampling::Random { temperature, top_p, seed } = self.mode else { return Ok(argmax(logits) as u32) };
        let inv_t = (1.0 / f64::from(temperature).max(1e-5)) as f32;
        let probs = softmax(logits, logits.len(), inv_t);
        let mut order: Vec<usize> = (0..probs.len()).collect();
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        let sorted: Vec<f32> = order.iter().map(|&i| probs[i]).collect();
        let prefix = canonical_prefix_sums(&sorted);
        let keep = prefix.iter().position(|&c| c >= top_p).map_or(prefix.len(), |i| i + 1);
        let target = uniform(seed, position as u64) * prefix[keep - 1];
        let pick = prefix[..keep].iter().position(|&c| c > target).unwrap_or(keep - 1);
        Ok(order[pick] as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numerics::sum::canonical_sum;

    #[test]
    fn prefix_sums_equal_canonical_sums_of_every_prefix() {
        let xs: Vec<f32> = (0..700).map(|i| ((i * 7919 % 1013) as f32 - 500.0) * 1.37e-3 + if i == 3 { 1e7 } else { 0.0 }).collect();
        let p = canonical_prefix_sums(&xs);
        for n in 1..=xs.len() {
            assert_eq!(p[n - 1].to_bits(), canonical_sum(n, |i| xs[i], |_| 1.0).to_bits(), "n = {n}");
        }
    }

    #[test]
    fn greedy_takes_the_lower_index_on_ties_and_random_depends_on_seed_and_position_only() {
        let g = Sampler::new(Sampling::Greedy).unwrap();
        assert_eq!(g.sample(&[1.0, 3.0, 3.0, 2.0], 0).unwrap(), 1);
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let s = |seed| Sampler::new(Sampling::Random { temperature: 1.0, top_p: 0.9, seed }).unwrap();
        let a: Vec<u32> = (0..40).map(|p| s(7).sample(&logits, p).unwrap()).collect();
        let b: Vec<u32> = (0..40).map(|p| s(7).sample(&logits, p).unwrap()).collect();
        let c: Vec<u32> = (0..40).map(|p| s(8).sample(&logits, p).unwrap()).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(g.sample(&[f32::NAN], 0).is_err());
    }
}
