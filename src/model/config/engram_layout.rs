//! Engram bucket layout: the per-(n-gram, head) prime moduli and their row offsets (the reference `EngramLayout`).
use crate::model::config::Config;
use std::collections::BTreeSet;

/// The prime moduli and row offsets of one engram layer's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngramPrimes {
    /// The backbone layer this table belongs to.
    pub layer_id: usize,
    /// Moduli indexed `[n-gram size - 2][head]`.
    pub primes: Vec<Vec<u64>>,
    /// First table row of each hash column, n-gram-major then head: exclusive running sums of `primes`.
    pub offsets: Vec<u64>,
    /// Rows the table needs: the sum of all primes.
    pub rows: u64,
}

/// Whether `n` is prime (deterministic Miller-Rabin for every u64).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    for p in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let mul = |a: u64, b: u64| ((u128::from(a) * u128::from(b)) % u128::from(n)) as u64;
    let pow = |mut b: u64, mut e: u64| {
        let mut r = 1u64;
        while e > 0 {
            if e & 1 == 1 {
                r = mul(r, b);
            }
            b = mul(b, b);
            e >>= 1;
        }
        r
    };
    let (mut d, mut s) = (n - 1, 0);
    while d % 2 == 0 {
        d /= 2;
        s += 1;
    }
    'witness: for a in [2u64, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37] {
        let mut x = pow(a, d);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul(x, x);
            if x == n - 1 {
                continue 'witness;
            }
        }
        return false;
    }
    true
}

/// The smallest prime above `start` not handed out yet (the reference's `find_next_prime`).
fn next_unseen_prime(start: u64, seen: &BTreeSet<u64>) -> u64 {
    let mut c = start + 1;
    while !is_prime(c) || seen.contains(&c) {
        c += 1;
    }
    c
}

/// Primes and offsets of every engram layer, in `engram_layer_ids` order; primes are never reused across layers.
pub fn engram_primes(cfg: &Config) -> Vec<EngramPrimes> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(cfg.engram_layer_ids.len());
    for &layer_id in &cfg.engram_layer_ids {
        let mut primes = Vec::new();
        for _ in 1..cfg.engram_max_ngram_size {
            let mut current = (cfg.engram_vocab_size as u64).saturating_sub(1);
            let mut per_head = Vec::with_capacity(cfg.engram_n_heads);
            for _ in 0..cfg.engram_n_heads {
                current = next_unseen_prime(current, &seen);
                seen.insert(current);
                per_head.push(current);
            }
            primes.push(per_head);
        }
        let mut offsets = Vec::new();
        let mut rows = 0u64;
        for &p in primes.iter().flatten() {
            offsets.push(rows);
            rows += p;
        }
        out.push(EngramPrimes { layer_id, primes, offsets, rows });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miller_rabin_agrees_with_trial_division_below_20000() {
        let trial = |n: u64| n >= 2 && (2..).take_while(|d| d * d <= n).all(|d| !n.is_multiple_of(d));
        for n in 0..20000u64 {
            assert_eq!(is_prime(n), trial(n), "n = {n}");
        }
        assert!(is_prime(16_000_057));
        assert!(!is_prime(16_000_057 * 3));
    }
}
