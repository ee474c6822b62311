//! Checkpoint values made canonical at load: subnormal BF16 and F32 values become zeros of their sign, and quantized blocks whose e8m0 scale is below their format's floor have their weight codes zeroed.
use crate::weights::Dtype;

/// Lowest e8m0 code (2^-85) of an fp8 32x32 block that may hold a non-zero weight: e4m3 x e4m3 block sums (multiples of 2^-18) times an activation scale of at least 2^-22 are then 0 or at least 2^-125.
pub const FP8_BLOCK_FLOOR: u8 = 42;
/// Lowest e8m0 code (2^-93) of an fp4 block of 32 along K that may hold a non-zero weight: e4m3 x e2m1 block sums are multiples of 2^-10, so scaled sums are 0 or at least 2^-125.
pub const FP4_BLOCK_FLOOR: u8 = 34;
/// Lowest e8m0 code (2^-116) of an engram row block that may hold a non-zero code: its dequantized values (e4m3 of at least 2^-9 times the scale) are at least 2^-125.
pub const FP8_ROWS_FLOOR: u8 = 11;

/// How a quantized weight's e8m0 scales cover its codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// e4m3 `[rows, cols]`, one scale per 32x32 block.
    Fp8Block { rows: usize, cols: usize },
    /// e4m3 `[rows, cols]`, one scale per 32 columns of each row (engram tables).
    Fp8Rows { rows: usize, cols: usize },
    /// e2m1 pairs `[rows, half]`, one scale per 32 values (16 bytes) of each row.
    Fp4 { rows: usize, half: usize },
}

impl Blocks {
    /// The layout a weight of `dtype` and `shape` has with a scale of `scale_shape`, if they fit one (a one-row e4m3 weight reads as 32x32 blocks).
    pub fn of(dtype: Dtype, shape: &[usize], scale_shape: &[usize]) -> Option<Blocks> {
        let (&[rows, cols], &[sr, sc]) = (shape, scale_shape) else { return None };
        match dtype {
            Dtype::F8E4M3 if sc == cols.div_ceil(32) && sr == rows.div_ceil(32) => Some(Blocks::Fp8Block { rows, cols }),
            Dtype::F8E4M3 if sc == cols.div_ceil(32) && sr == rows => Some(Blocks::Fp8Rows { rows, cols }),
            Dtype::I8 if sc == (2 * cols).div_ceil(32) && sr == rows => Some(Blocks::Fp4 { rows, half: cols }),
            _ => None,
        }
    }

    /// Lowest scale code a block holding a non-zero weight may have.
    pub fn floor(self) -> u8 {
        match self {
            Blocks::Fp8Block { .. } => FP8_BLOCK_FLOOR,
            Blocks::Fp8Rows { .. } => FP8_ROWS_FLOOR,
            Blocks::Fp4 { .. } => FP4_BLOCK_FLOOR,
        }
    }

    /// Scale bytes this layout needs.
    fn scale_len(self) -> usize {
        match self {
            Blocks::Fp8Block { rows, cols } => rows.div_ceil(32) * cols.div_ceil(32),
            Blocks::Fp8Rows { rows, cols } => rows * cols.div_ceil(32),
            Blocks::Fp4 { rows, half } => rows * (2 * half).div_ceil(32),
        }
    }

    /// Byte ranges of block `b` (scale index order) in the weight, one per row it spans.
    fn ranges(self, b: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
        let (r0, r1, c0, c1, row_bytes) = match self {
            Blocks::Fp8Block { rows, cols } => {
                let (br, bc) = (b / cols.div_ceil(32), b % cols.div_ceil(32));
                (br * 32, (br * 32 + 32).min(rows), bc * 32, (bc * 32 + 32).min(cols), cols)
            }
            Blocks::Fp8Rows { cols, .. } => {
                let (r, bc) = (b / cols.div_ceil(32), b % cols.div_ceil(32));
                (r, r + 1, bc * 32, (bc * 32 + 32).min(cols), cols)
            }
            Blocks::Fp4 { half, .. } => {
                let (r, bc) = (b / (2 * half).div_ceil(32), b % (2 * half).div_ceil(32));
                (r, r + 1, bc * 16, (bc * 16 + 16).min(half), half)
            }
        };
        (r0..r1).map(move |r| r * row_bytes + c0..r * row_bytes + c1)
    }

    /// Whether a weight byte encodes a non-zero value (a negative zero counts as zero).
    fn non_zero(self, byte: u8) -> bool {
        match self {
            Blocks::Fp8Block { .. } | Blocks::Fp8Rows { .. } => byte & 0x7f != 0,
            Blocks::Fp4 { .. } => byte & 0x77 != 0,
        }
    }
}

/// What making one tensor canonical changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changes {
    /// Subnormal BF16 or F32 values replaced by a zero of their sign.
    pub flushed: u64,
    /// Quantized blocks with a scale below the floor whose weight codes were zeroed.
    pub blocks_zeroed: u64,
}

/// The outcome of scanning one tensor's bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// Finite and canonical as stored.
    Canonical,
    /// Finite; these bytes replace the stored ones.
    Patched(Changes, Vec<u8>),
    /// The element at this index is NaN or infinite.
    NonFinite(usize),
}

/// Scans a tensor once: the first non-finite element, else the canonical bytes if they differ from `bytes`; `blocks` and `scale` for quantized weights.
pub fn scan(dtype: Dtype, bytes: &[u8], blocks: Option<(Blocks, &[u8])>) -> Scan {
    match dtype {
        Dtype::F32 => flush_subnormals::<4>(bytes, 0x7f80_0000, 0x007f_ffff),
        Dtype::BF16 => flush_subnormals::<2>(bytes, 0x7f80, 0x007f),
        Dtype::F8E4M3 => match bytes.iter().position(|&x| x & 0x7f == 0x7f) {
            Some(at) => Scan::NonFinite(at),
            None => zero_blocks(bytes, blocks),
        },
        Dtype::F8E8M0 => bytes.iter().position(|&x| x == 0xff).map_or(Scan::Canonical, Scan::NonFinite),
        Dtype::I8 => zero_blocks(bytes, blocks),
    }
}

/// The non-finite check and the subnormal flush of little-endian floats of `N` bytes in one pass.
fn flush_subnormals<const N: usize>(bytes: &[u8], exp: u32, man: u32) -> Scan {
    let mut out: Option<Vec<u8>> = None;
    let mut flushed = 0u64;
    for (i, c) in bytes.chunks_exact(N).enumerate() {
        let mut le = [0u8; 4];
        le[..N].copy_from_slice(c);
        let x = u32::from_le_bytes(le);
        if x & exp == exp {
            return Scan::NonFinite(i);
        }
        if x & exp == 0 && x & man != 0 {
            let patched = out.get_or_insert_with(|| bytes.to_vec());
            let sign = (x & !(exp | man)).to_le_bytes();
            patched[i * N..(i + 1) * N].copy_from_slice(&sign[..N]);
            flushed += 1;
        }
    }
    match out {
        Some(b) => Scan::Patched(Changes { flushed, blocks_zeroed: 0 }, b),
        None => Scan::Canonical,
    }
}

/// Zeroes the weight codes of every block whose scale is below the floor and that holds a non-zero weight; only those blocks' bytes are read.
fn zero_blocks(bytes: &[u8], blocks: Option<(Blocks, &[u8])>) -> Scan {
    let Some((layout, scale)) = blocks else { return Scan::Canonical };
    if scale.len() != layout.scale_len() {
        return Scan::Canonical;
    }
    let mut out: Option<Vec<u8>> = None;
    let mut zeroed = 0u64;
    for (b, _) in scale.iter().enumerate().filter(|&(_, &s)| s < layout.floor()) {
        if !layout.ranges(b).any(|r| bytes[r].iter().any(|&x| layout.non_zero(x))) {
            continue;
        }
        let patched = out.get_or_insert_with(|| bytes.to_vec());
        layout.ranges(b).for_each(|r| patched[r].fill(0));
        zeroed += 1;
    }
    match out {
        Some(b) => Scan::Patched(Changes { flushed: 0, blocks_zeroed: zeroed }, b),
        None => Scan::Canonical,
    }
}

/// What the load changed to make a checkpoint canonical.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CanonicalSummary {
    /// Each changed tensor by canonical name, sorted, with what changed.
    pub tensors: Vec<(String, Changes)>,
}

impl CanonicalSummary {
    /// Whether nothing was changed.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Values flushed over all tensors.
    pub fn flushed(&self) -> u64 {
        self.tensors.iter().map(|(_, c)| c.flushed).sum()
    }

    /// Blocks zeroed over all tensors.
    pub fn blocks_zeroed(&self) -> u64 {
        self.tensors.iter().map(|(_, c)| c.blocks_zeroed).sum()
    }
}

impl std::fmt::Display for CanonicalSummary {
    /// One line: tensors changed, values flushed, blocks zeroed, and the first tensor named.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "canonical values: {} tensors changed, {} subnormal values flushed to zero, {} quantized blocks below their scale floor zeroed", self.tensors.len(), self.flushed(), self.blocks_zeroed())?;
        if let Some((first, _)) = self.tensors.first() {
            write!(f, " (first: {first})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// splitmix64 stream for test data.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (self.0 ^ (self.0 >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// A finite e4m3 code (never 0x7f or 0xff).
        fn e4m3(&mut self) -> u8 {
            (self.next() % 0x7f) as u8 | if self.next() & 1 == 1 { 0x80 } else { 0 }
        }
    }

    /// Random normal f32 values of both signs across many binades.
    fn normals(rng: &mut Rng, n: usize) -> Vec<u32> {
        (0..n).map(|_| (rng.next() as u32 & 0x807f_ffff) | ((1 + rng.next() % 253) as u32) << 23).collect()
    }

    #[test]
    fn subnormal_bf16_and_f32_values_become_zeros_of_their_sign_and_nothing_else_changes() {
        let mut rng = Rng(7);
        let mut f32s = normals(&mut rng, 1000);
        f32s[3] = 0x8000_0000;
        f32s[4] = 0;
        let canonical: Vec<u8> = f32s.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(scan(Dtype::F32, &canonical, None), Scan::Canonical, "normals and signed zeros are canonical");
        let mut want = f32s.clone();
        let mut planted = 0;
        for i in (0..1000).step_by(37) {
            let sign = rng.next() as u32 & 0x8000_0000;
            f32s[i] = sign | (1 + rng.next() as u32 % 0x007f_ffff);
            want[i] = sign;
            planted += 1;
        }
        let bytes: Vec<u8> = f32s.iter().flat_map(|x| x.to_le_bytes()).collect();
        let want: Vec<u8> = want.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(scan(Dtype::F32, &bytes, None), Scan::Patched(Changes { flushed: planted, blocks_zeroed: 0 }, want));
        let mut bf: Vec<u16> = normals(&mut rng, 999).iter().map(|x| (x >> 16) as u16).collect();
        let mut want = bf.clone();
        for (i, code) in [(0usize, 0x0001u16), (500, 0x807f), (998, 0x8040)] {
            bf[i] = code;
            want[i] = code & 0x8000;
        }
        let le = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(scan(Dtype::BF16, &le(&bf), None), Scan::Patched(Changes { flushed: 3, blocks_zeroed: 0 }, le(&want)));
        bf[10] = 0xff80;
        assert_eq!(scan(Dtype::BF16, &le(&bf), None), Scan::NonFinite(10), "a non-finite value is refused, not patched");
    }

    #[test]
    fn fp8_blocks_below_the_floor_holding_a_non_zero_weight_are_zeroed() {
        let (rows, cols) = (70, 96);
        let mut rng = Rng(11);
        let mut w: Vec<u8> = (0..rows * cols).map(|_| rng.e4m3()).collect();
        let mut scale: Vec<u8> = (0..9).map(|_| FP8_BLOCK_FLOOR + (rng.next() % 100) as u8).collect();
        let layout = Blocks::of(Dtype::F8E4M3, &[rows, cols], &[3, 3]).expect("32x32 blocks");
        assert_eq!(scan(Dtype::F8E4M3, &w, Some((layout, &scale))), Scan::Canonical, "scales at or above the floor");
        scale[1] = FP8_BLOCK_FLOOR - 1;
        scale[8] = 0;
        scale[3] = 5;
        for r in 32..64 {
            w[r * cols..r * cols + 32].iter_mut().enumerate().for_each(|(i, x)| *x = if i % 2 == 0 { 0x80 } else { 0 });
        }
        let mut want = w.clone();
        for r in 0..32 {
            want[r * cols + 32..r * cols + 64].fill(0);
        }
        for r in 64..70 {
            want[r * cols + 64..r * cols + 96].fill(0);
        }
        let got = scan(Dtype::F8E4M3, &w, Some((layout, &scale)));
        assert_eq!(got, Scan::Patched(Changes { flushed: 0, blocks_zeroed: 2 }, want), "a block of zeros of both signs is left as stored");
    }

    #[test]
    fn fp4_and_engram_row_blocks_below_their_floors_are_zeroed() {
        let (rows, half) = (8, 64);
        let mut rng = Rng(13);
        let w: Vec<u8> = (0..rows * half).map(|_| rng.next() as u8 | 1).collect();
        let mut scale: Vec<u8> = (0..rows * 4).map(|_| FP4_BLOCK_FLOOR + (rng.next() % 90) as u8).collect();
        let layout = Blocks::of(Dtype::I8, &[rows, half], &[rows, 4]).expect("fp4 blocks");
        assert_eq!(scan(Dtype::I8, &w, Some((layout, &scale))), Scan::Canonical);
        scale[2 * 4 + 1] = FP4_BLOCK_FLOOR - 1;
        scale[7 * 4 + 3] = 0;
        let mut want = w.clone();
        want[2 * half + 16..2 * half + 32].fill(0);
        want[7 * half + 48..7 * half + 64].fill(0);
        assert_eq!(scan(Dtype::I8, &w, Some((layout, &scale))), Scan::Patched(Changes { flushed: 0, blocks_zeroed: 2 }, want));
        let (rows, cols) = (40, 64);
        let w: Vec<u8> = (0..rows * cols).map(|_| (rng.next() % 0x7e) as u8 | 1).collect();
        let mut scale = vec![FP8_ROWS_FLOOR; rows * 2];
        let layout = Blocks::of(Dtype::F8E4M3, &[rows, cols], &[rows, 2]).expect("row blocks");
        assert_eq!(scan(Dtype::F8E4M3, &w, Some((layout, &scale))), Scan::Canonical, "the floor itself is kept");
        scale[33 * 2] = FP8_ROWS_FLOOR - 1;
        let mut want = w.clone();
        want[33 * cols..33 * cols + 32].fill(0);
        assert_eq!(scan(Dtype::F8E4M3, &w, Some((layout, &scale))), Scan::Patched(Changes { flushed: 0, blocks_zeroed: 1 }, want));
    }
}
