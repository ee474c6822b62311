//! numpy's `default_rng(seed).integers(low, high, dtype=int64)`: SeedSequence, PCG64 (XSL-RR) and Lemire bounded draws, bit-identical to numpy >= 1.17.

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;
const PCG_MULT: u128 = (2_549_297_995_355_413_924u128 << 64) | 4_865_540_595_714_422_341u128;

/// numpy's `SeedSequence(entropy)` with no spawn key, reduced to its entropy pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

/// `hashmix` of numpy's SeedSequence, advancing the running hash constant.
fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

/// `mix` of numpy's SeedSequence.
fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

impl SeedSequence {
    /// Mixes a non-negative integer seed into the pool, as `SeedSequence(seed)` does.
    pub fn new(seed: u128) -> Self {
        // the integer is split into little-endian 32-bit words; zero is one word
        let mut entropy = Vec::new();
        let mut s = seed;
        loop {
            entropy.push(s as u32);
            s >>= 32;
            if s == 0 {
                break;
            }
        }
        let mut hash_const = INIT_A;
        let mut pool = [0u32; POOL_SIZE];
        for (i, slot) in pool.iter_mut().enumerate() {
            *slot = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
        }
        for src in 0..POOL_SIZE {
            for dst in 0..POOL_SIZE {
                if src != dst {
                    let h = hashmix(pool[src], &mut hash_const);
                    pool[dst] = mix(pool[dst], h);
                }
            }
        }
        for &word in entropy.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                let h = hashmix(word, &mut hash_const);
                *slot = mix(*slot, h);
            }
        }
        Self { pool }
    }

    /// `generate_state(n, np.uint64)`: pairs of 32-bit words, low word first.
    pub fn generate_state_u64(&self, n: usize) -> Vec<u64> {
        let mut hash_const = INIT_B;
        let words: Vec<u32> = (0..2 * n)
            .map(|i| {
                let mut v = self.pool[i % POOL_SIZE] ^ hash_const;
                hash_const = hash_const.wrapping_mul(MULT_B);
                v = v.wrapping_mul(hash_const);
                v ^ (v >> XSHIFT)
            })
            .collect();
        words.chunks_exact(2).map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32)).collect()
    }
}

/// numpy's PCG64 bit generator (128-bit LCG, XSL-RR output) with its 32-bit draw buffer.
#[derive(Clone, Debug)]
pub struct Pcg64 {
    state: u128,
    inc: u128,
    buffered_u32: Option<u32>,
}

impl Pcg64 {
    /// `PCG64(seed)`: seeded through SeedSequence like `np.random.default_rng(seed)`.
    pub fn from_seed(seed: u128) -> Self {
        let s = SeedSequence::new(seed).generate_state_u64(4);
        let init_state = (u128::from(s[0]) << 64) | u128::from(s[1]);
        let init_seq = (u128::from(s[2]) << 64) | u128::from(s[3]);
        let mut rng = Self { state: 0, inc: (init_seq << 1) | 1, buffered_u32: None };
        rng.step();
        rng.state = rng.state.wrapping_add(init_state);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    /// Next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let hi = (self.state >> 64) as u64;
        let lo = self.state as u64;
        (hi ^ lo).rotate_right((self.state >> 122) as u32)
    }

    /// Next 32-bit output: low half of a 64-bit draw, then its high half.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(v) = self.buffered_u32.take() {
            return v;
        }
        let v = self.next_u64();
        self.buffered_u32 = Some((v >> 32) as u32);
        v as u32
    }

    /// A value in `[0, rng]` inclusive, numpy's `random_bounded_uint64` (Lemire, not masked).
    pub fn bounded_u64(&mut self, rng: u64) -> u64 {
        if rng == 0 {
            return 0;
        }
        if rng <= u64::from(u32::MAX) {
            return u64::from(self.bounded_u32(rng as u32));
        }
        if rng == u64::MAX {
            return self.next_u64();
        }
        let excl = rng + 1;
        let mut m = u128::from(self.next_u64()) * u128::from(excl);
        let mut leftover = m as u64;
        if leftover < excl {
            let threshold = (u64::MAX - rng) % excl;
            while leftover < threshold {
                m = u128::from(self.next_u64()) * u128::from(excl);
                leftover = m as u64;
            }
        }
        (m >> 64) as u64
    }

    fn bounded_u32(&mut self, rng: u32) -> u32 {
        if rng == u32::MAX {
            return self.next_u32();
        }
        let excl = rng + 1;
        let mut m = u64::from(self.next_u32()) * u64::from(excl);
        let mut leftover = m as u32;
        if leftover < excl {
            let threshold = (u32::MAX - rng) % excl;
            while leftover < threshold {
                m = u64::from(self.next_u32()) * u64::from(excl);
                leftover = m as u32;
            }
        }
        (m >> 32) as u32
    }

    /// `integers(low, high, size=n, dtype=np.int64)` with `endpoint=False`; requires `low < high`.
    pub fn integers_i64(&mut self, low: i64, high: i64, n: usize) -> Vec<i64> {
        let span = (high as i128 - 1 - low as i128).max(0) as u64;
        (0..n).map(|_| (low as i128 + i128::from(self.bounded_u64(span))) as i64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcg64_seed_42_matches_numpy_raw_draws() {
        // np.random.PCG64(42).random_raw(3)
        let mut rng = Pcg64::from_seed(42);
        let got: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(got, vec![14276969152011380360, 8095878257575067585, 15838336090824644132]);
    }

    #[test]
    fn seed_sequence_of_a_multiword_seed_matches_numpy() {
        // np.random.SeedSequence(2**70 + 12345).generate_state(2, np.uint64)
        let s = SeedSequence::new((1u128 << 70) + 12345).generate_state_u64(2);
        assert_eq!(s, vec![3413318692302920546, 15772906575999264829]);
    }

    #[test]
    fn small_ranges_take_numpys_32_bit_lemire_path() {
        // np.random.default_rng(7).integers(0, 1000, size=6, dtype=np.int64)
        let mut rng = Pcg64::from_seed(7);
        assert_eq!(rng.integers_i64(0, 1000, 6), vec![944, 625, 684, 897, 578, 775]);
    }

    #[test]
    fn wide_ranges_take_numpys_64_bit_lemire_path() {
        // np.random.default_rng(7).integers(-5, 2**62, size=4, dtype=np.int64)
        let mut rng = Pcg64::from_seed(7);
        assert_eq!(
            rng.integers_i64(-5, 1i64 << 62, 4),
            vec![2882744023523087008, 4137668341471484580, 3577218852397956695, 1038584849328933324]
        );
    }
}
