//! Engram n-gram hash ids (spec §2.3): per-layer multipliers from numpy's RNG and the xor/mod hash over compressed-id history, bit-identical to the reference `NgramHashState`.
use super::engram_map::TokenMap;
use super::numpy_rng::Pcg64;

/// History value of a position that takes no part in n-grams (image spans).
pub const DEAD: i64 = -1;

/// What failed while setting up or running the hash.
#[derive(Debug, thiserror::Error)]
pub enum EngramHashError {
    /// A per-layer table has the wrong number of entries.
    #[error("engram layer {layer}: {what} has {got} entries, expected {expected}")]
    Shape { layer: usize, what: &'static str, got: usize, expected: usize },
    /// A prime is zero, so ids could not be reduced.
    #[error("engram layer {layer}: prime {index} is zero")]
    ZeroPrime { layer: usize, index: usize },
    /// A hash id would not fit in u32.
    #[error("engram layer {layer}: offset {offset} + prime {prime} exceeds u32")]
    IdRange { layer: usize, offset: u64, prime: u64 },
    /// A multiplier is negative or large enough to overflow i64 products.
    #[error("engram layer {layer}: multiplier {value} overflows with compressed ids below {vocab}")]
    Multiplier { layer: usize, value: i64, vocab: u64 },
    /// A token id has no compressed class.
    #[error("token id {0} is outside the engram token map")]
    UnknownToken(u32),
    /// Positions asked for beyond the recorded history.
    #[error("hash of positions {start}..{end} needs history up to {end}, only {len} recorded")]
    History { start: usize, end: usize, len: usize },
    /// The compressed vocabulary size is zero.
    #[error("compressed vocabulary size must be positive")]
    EmptyVocab,
}

/// Multipliers of one engram layer: `2·v+1` for `v = default_rng(10007·layer_id).integers(0, (i64::MAX // vocab)//2, size=n)`.
pub fn hash_multipliers(layer_id: u64, compressed_vocab: u64, n: usize) -> Result<Vec<i64>, EngramHashError> {
    if compressed_vocab == 0 {
        return Err(EngramHashError::EmptyVocab);
    }
    let bound = ((i64::MAX as u64 / compressed_vocab) / 2).max(1) as i64;
    let mut rng = Pcg64::from_seed(10007 * u128::from(layer_id));
    Ok(rng.integers_i64(0, bound, n).into_iter().map(|v| 2 * v + 1).collect())
}

/// Exclusive running sum of one layer's primes: the table row where each (n-gram, head) range starts.
pub fn prime_offsets(primes: &[u64]) -> Vec<u64> {
    primes
        .iter()
        .scan(0u64, |acc, &p| {
            let start = *acc;
            *acc = acc.saturating_add(p);
            Some(start)
        })
        .collect()
}

/// Hash parameters of one engram layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerHash {
    /// One multiplier per look-back shift `s = 0..N`.
    pub multipliers: Vec<i64>,
    /// Bucket moduli, n-gram-major then head: `primes[(n-1)·H + k]` for `n = 1..N`.
    pub primes: Vec<u64>,
    /// Table row offset of each (n-gram, head) range, same layout as `primes`.
    pub offsets: Vec<u64>,
}

/// The n-gram hash over a compressed-id history for every engram layer.
#[derive(Clone, Debug)]
pub struct NgramHasher {
    max_ngram: usize,
    n_heads: usize,
    pad: i64,
    layers: Vec<LayerHash>,
}

impl NgramHasher {
    /// Checks the tables; `pad` is the compressed class of the pad token, `compressed_vocab` bounds the classes.
    pub fn new(
        max_ngram: usize,
        n_heads: usize,
        pad: u32,
        compressed_vocab: u64,
        layers: Vec<LayerHash>,
    ) -> Result<Self, EngramHashError> {
        if compressed_vocab == 0 {
            return Err(EngramHashError::EmptyVocab);
        }
        let cols = max_ngram.saturating_sub(1) * n_heads;
        for (layer, l) in layers.iter().enumerate() {
            let shape = |what, got: usize, expected| {
                if got == expected {
                    Ok(())
                } else {
                    Err(EngramHashError::Shape { layer, what, got, expected })
                }
            };
            shape("multipliers", l.multipliers.len(), max_ngram)?;
            shape("primes", l.primes.len(), cols)?;
            shape("offsets", l.offsets.len(), cols)?;
            let limit = i64::MAX as u64 / compressed_vocab.max(u64::from(pad) + 1);
            if let Some(&value) = l.multipliers.iter().find(|&&m| m < 0 || m as u64 > limit) {
                return Err(EngramHashError::Multiplier { layer, value, vocab: compressed_vocab });
            }
            for (index, (&prime, &offset)) in l.primes.iter().zip(&l.offsets).enumerate() {
                if prime == 0 {
                    return Err(EngramHashError::ZeroPrime { layer, index });
                }
                if offset.saturating_add(prime) > u64::from(u32::MAX) + 1 {
                    return Err(EngramHashError::IdRange { layer, offset, prime });
                }
            }
        }
        Ok(Self { max_ngram, n_heads, pad: i64::from(pad), layers })
    }

    /// Hash ids per position: `layers · (N-1) · H`.
    pub fn ids_per_position(&self) -> usize {
        self.layers.len() * self.cols()
    }

    fn cols(&self) -> usize {
        self.max_ngram.saturating_sub(1) * self.n_heads
    }

    /// Hash ids of positions `start..start+len`, laid out `[position][layer][(n-1)·H + k]`.
    pub fn hash(&self, history: &EngramHistory, start: usize, len: usize) -> Result<Vec<u32>, EngramHashError> {
        let end = start + len;
        let c = history.as_slice();
        if end > c.len() {
            return Err(EngramHashError::History { start, end, len: c.len() });
        }
        let mut out = Vec::with_capacity(len * self.ids_per_position());
        let mut tokens = vec![0i64; self.max_ngram];
        for p in start..end {
            self.ngram_tokens(c, p, &mut tokens);
            for l in &self.layers {
                let mut rolling = tokens[0].wrapping_mul(l.multipliers[0]);
                for (n, (&t, &m)) in tokens.iter().zip(&l.multipliers).enumerate().skip(1) {
                    rolling ^= t.wrapping_mul(m);
                    for k in 0..self.n_heads {
                        let col = (n - 1) * self.n_heads + k;
                        let bucket = rolling.rem_euclid(l.primes[col] as i64) as u64;
                        out.push((bucket + l.offsets[col]) as u32);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The N look-back tokens of position `p`, padded from the sequence start or a dead position on (sticky).
    fn ngram_tokens(&self, c: &[i64], p: usize, tokens: &mut [i64]) {
        let mut blocked = false;
        for (s, t) in tokens.iter_mut().enumerate() {
            let src = c[p.saturating_sub(s)];
            blocked = blocked || p < s || src == DEAD;
            *t = if blocked { self.pad } else { src };
        }
    }
}

/// Per-sequence compressed-id history, indexed by absolute position (DEAD for image positions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngramHistory {
    ids: Vec<i64>,
}

impl EngramHistory {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends tokens through the map; `image_mask[i]` marks a dead position.
    pub fn extend(&mut self, map: &TokenMap, ids: &[u32], image_mask: Option<&[bool]>) -> Result<(), EngramHashError> {
        let mut staged = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            let dead = image_mask.and_then(|m| m.get(i)).copied().unwrap_or(false);
            let class = map.class(id).ok_or(EngramHashError::UnknownToken(id))?;
            staged.push(if dead { DEAD } else { i64::from(class) });
        }
        self.ids.extend(staged);
        Ok(())
    }

    /// Appends raw compressed ids (or DEAD) as they are.
    pub fn extend_raw(&mut self, compressed: &[i64]) {
        self.ids.extend_from_slice(compressed);
    }

    /// Drops positions from `len` on (speculative rollback).
    pub fn truncate(&mut self, len: usize) {
        self.ids.truncate(len);
    }

    /// Number of recorded positions.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether no position is recorded.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The recorded compressed ids.
    pub fn as_slice(&self) -> &[i64] {
        &self.ids
    }
}

#[cfg(test)]
mod tests;
