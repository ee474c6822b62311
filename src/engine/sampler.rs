//! Token sampling: greedy argmax, or temperature and top-p with a draw that depends only on (seed, absolute position).
use crate::numerics::edge::{add, max, sub};
use crate::numerics::math::{exp, log, mul_rn, recip};
use crate::numerics::sum::{canonical_sum, BLOCK, SEG_BLOCKS};

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

/// The settings past temperature and nucleus (OpenAI's names); the default changes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Filters {
    /// Keep at most this many tokens (0 = all).
    pub top_k: usize,
    /// Keep tokens whose probability is at least `min_p` times the best one's (0 = all).
    pub min_p: f32,
    /// Subtracted from the logit of every token the reply has produced.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time the reply has produced it.
    pub frequency_penalty: f32,
}

/// A deterministic sampler.
#[derive(Clone, Copy, Debug)]
pub struct Sampler {
    mode: Sampling,
    filters: Filters,
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

/// `kernels::ops::softmax` of one row, each exponential computed once.
fn softmax_once(x: &[f32], scale: f32) -> Vec<f32> {
    let mx = x.iter().fold(f32::MIN, |a, &v| max(a, mul_rn(v, scale)));
    let mut e = vec![0.0f32; x.len()];
    // each exponential is independent, so threads change no bit
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let chunk = x.len().div_ceil(threads).max(8192);
    std::thread::scope(|s| {
        for (out, inp) in e.chunks_mut(chunk).zip(x.chunks(chunk)) {
            s.spawn(move || out.iter_mut().zip(inp).for_each(|(o, &v)| *o = exp(sub(mul_rn(v, scale), mx))));
        }
    });
    let r = recip(canonical_sum(e.len(), |i| e[i], |_| 1.0));
    e.into_iter().map(|v| mul_rn(v, r)).collect()
}

/// Indices of non-negative `probs` from the largest down, ties to the lower index: a stable radix sort on the inverted bits.
fn descending(probs: &[f32]) -> Vec<usize> {
    let mut keys: Vec<u64> = probs.iter().enumerate().map(|(i, p)| (u64::from(!p.to_bits()) << 32) | i as u64).collect();
    let mut next = vec![0u64; keys.len()];
    for pass in 0..4 {
        let digit = |k: u64| ((k >> (32 + 8 * pass)) & 0xff) as usize;
        let mut count = [0usize; 257];
        keys.iter().for_each(|&k| count[digit(k) + 1] += 1);
        if count[1..].iter().any(|&c| c == keys.len()) {
            continue;
        }
        for d in 0..256 {
            count[d + 1] += count[d];
        }
        for &k in &keys {
            let d = digit(k);
            next[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(&mut keys, &mut next);
    }
    keys.into_iter().map(|k| (k & 0xffff_ffff) as usize).collect()
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
        Sampler::with_filters(mode, Filters::default())
    }

    /// A sampler with top-k, min-p and the penalties; a temperature of 0 means greedy (penalties still apply).
    pub fn with_filters(mode: Sampling, filters: Filters) -> Result<Sampler, SamplerError> {
        let finite = |name: &str, v: f32, lo: f32, hi: f32| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(SamplerError::Settings(format!("{name} {v} must be in [{lo}, {hi}]")))
            }
        };
        finite("min_p", filters.min_p, 0.0, 1.0)?;
        finite("presence_penalty", filters.presence_penalty, -2.0, 2.0)?;
        finite("frequency_penalty", filters.frequency_penalty, -2.0, 2.0)?;
        let base = Sampler::checked(mode)?;
        Ok(Sampler { filters, ..base })
    }

    fn checked(mode: Sampling) -> Result<Sampler, SamplerError> {
        let filters = Filters::default();
        if let Sampling::Random { temperature, top_p, .. } = mode {
            if !(temperature >= 0.0 && temperature.is_finite()) {
                return Err(SamplerError::Settings(format!("temperature {temperature} must be a finite number >= 0")));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return Err(SamplerError::Settings(format!("top-p {top_p} must be in (0, 1]")));
            }
            if temperature == 0.0 {
                return Ok(Sampler { mode: Sampling::Greedy, filters });
            }
        }
        Ok(Sampler { mode, filters })
    }

    /// Whether the penalties need the reply's token counts.
    pub fn needs_counts(&self) -> bool {
        self.filters.presence_penalty != 0.0 || self.filters.frequency_penalty != 0.0
    }

    /// The token for the logits of the row at absolute `position`.
    pub fn sample(&self, logits: &[f32], position: usize) -> Result<u32, SamplerError> {
        self.sample_counted(logits, position, &[])
    }

    /// The token for the logits at `position`, the penalties applied for `counts` (token, times the reply produced it).
    pub fn sample_counted(&self, logits: &[f32], position: usize, counts: &[(u32, u32)]) -> Result<u32, SamplerError> {
        if logits.is_empty() {
            return Err(SamplerError::Empty);
        }
        if let Some(i) = logits.iter().position(|v| v.is_nan()) {
            return Err(SamplerError::NaN(i));
        }
        let penalized;
        let logits = if self.needs_counts() && !counts.is_empty() {
            let mut l = logits.to_vec();
            let f = self.filters;
            for &(t, c) in counts {
                if let Some(v) = l.get_mut(t as usize) {
                    *v = sub(*v, add(mul_rn(f.frequency_penalty, c as f32), f.presence_penalty));
                }
            }
            penalized = l;
            &penalized[..]
        } else {
            logits
        };
        let Sampling::Random { temperature, top_p, seed } = self.mode else { return Ok(argmax(logits) as u32) };
        let inv_t = (1.0 / f64::from(temperature).max(1e-5)) as f32;
        let probs = softmax_once(logits, inv_t);
        let order = descending(&probs);
        let sorted: Vec<f32> = order.iter().map(|&i| probs[i]).collect();
        let prefix = canonical_prefix_sums(&sorted);
        let mut keep = prefix.iter().position(|&c| c >= top_p).map_or(prefix.len(), |i| i + 1);
        if self.filters.top_k > 0 {
            keep = keep.min(self.filters.top_k);
        }
        if self.filters.min_p > 0.0 {
            let floor = mul_rn(self.filters.min_p, sorted[0]);
            keep = keep.min(sorted.iter().take_while(|&&p| p >= floor).count().max(1));
        }
        let target = uniform(seed, position as u64) * prefix[keep - 1];
        let pick = prefix[..keep].iter().position(|&c| c > target).unwrap_or(keep - 1);
        Ok(order[pick] as u32)
    }
}

/// Log-probabilities from the model's logits (before temperature and penalties): the chosen token's and the `top` best (ties to the lower index).
pub fn logprobs(logits: &[f32], token: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let mx = logits.iter().fold(f32::MIN, |a, &v| max(a, v));
    let lse = log(canonical_sum(logits.len(), |i| exp(sub(logits[i], mx)), |_| 1.0));
    let lp = |i: usize| sub(sub(logits[i], mx), lse);
    let mut best: Vec<u32> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &v) in logits.iter().enumerate() {
            if best.len() < top || v > logits[best[best.len() - 1] as usize] {
                let at = best.iter().position(|&b| v > logits[b as usize]).unwrap_or(best.len());
                best.insert(at, i as u32);
                best.truncate(top);
            }
        }
    }
    let chosen = logits.get(token as usize).map_or(f32::NEG_INFINITY, |_| lp(token as usize));
    (chosen, best.into_iter().map(|i| (i, lp(i as usize))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn filters_cut_the_nucleus_and_penalties_move_the_argmax() {
        let logits = [2.0f32, 1.9, 1.8, -5.0];
        let greedy = Sampler::with_filters(Sampling::Greedy, Filters { frequency_penalty: 0.5, ..Filters::default() }).unwrap();
        assert_eq!(greedy.sample_counted(&logits, 0, &[]).unwrap(), 0);
        assert_eq!(greedy.sample_counted(&logits, 0, &[(0, 1)]).unwrap(), 1);
        let k1 = Sampler::with_filters(Sampling::Random { temperature: 1.0, top_p: 1.0, seed: 3 }, Filters { top_k: 1, ..Filters::default() }).unwrap();
        assert!((0..50).all(|p| k1.sample(&logits, p).unwrap() == 0));
        let minp = Sampler::with_filters(Sampling::Random { temperature: 1.0, top_p: 1.0, seed: 3 }, Filters { min_p: 0.5, ..Filters::default() }).unwrap();
        assert!((0..200).all(|p| minp.sample(&logits, p).unwrap() < 3));
        assert!(Sampler::with_filters(Sampling::Greedy, Filters { min_p: f32::NAN, ..Filters::default() }).is_err());
    }

    #[test]
    fn logprobs_are_a_log_softmax_with_the_best_first() {
        let logits = [0.5f32, 2.0, -1.0, 2.0];
        let (lp, top) = logprobs(&logits, 2, 3);
        let z: f64 = logits.iter().map(|&v| (v as f64).exp()).sum();
        assert!((lp as f64 - (-1.0 - z.ln())).abs() < 1e-5);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 0]);
    }

    #[test]
    fn the_radix_order_and_one_pass_softmax_equal_the_comparator_and_the_kernel_oracle() {
        let probs: Vec<f32> = (0..5000u32).map(|i| if i % 7 == 0 { 0.0 } else { ((i.wrapping_mul(2654435761) >> 20) % 97) as f32 * 1.0e-4 }).collect();
        let mut want: Vec<usize> = (0..probs.len()).collect();
        want.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        assert_eq!(descending(&probs), want);
        let logits: Vec<f32> = (0..3000).map(|i| ((i * 7919 % 1013) as f32 - 500.0) * 0.01).collect();
        let a = crate::kernels::ops::softmax(&logits, logits.len(), 1.7);
        let b = softmax_once(&logits, 1.7);
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        let t = std::time::Instant::now();
        let big: Vec<f32> = (0..129_280).map(|i| ((i * 7919 % 100_003) as f32) * 1e-4).collect();
        let s = Sampler::new(Sampling::Random { temperature: 1.0, top_p: 1.0, seed: 1 }).unwrap();
        (0..5).for_each(|p| drop(s.sample(&big, p)));
        println!("a 129280-entry sample: {:?}", t.elapsed() / 5);
        let t = std::time::Instant::now();
        let p = softmax_once(&big, 1.0);
        let t1 = t.elapsed();
        let o = descending(&p);
        let t2 = t.elapsed();
        let sorted: Vec<f32> = o.iter().map(|&i| p[i]).collect();
        let _ = canonical_prefix_sums(&sorted);
        println!("softmax {:?} sort {:?} prefix {:?}", t1, t2 - t1, t.elapsed() - t2);
    }
}
