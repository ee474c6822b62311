//! Canonical reduction order (rule N4): blocks of 32 from +0.0, segments of 8 blocks, segments in order; every partial sum flushed (N7).
use super::edge::{add, flush};

/// Elements per block: the quantization block.
pub const BLOCK: usize = 32;
/// Blocks per segment.
pub const SEG_BLOCKS: usize = 8;

/// Sums `n` terms in the canonical order; `term(i)` gives term i, `scale(b)` multiplies block b's sum; subnormal partial sums flush (scales are powers of two the loader keeps scaled sums normal with).
#[inline]
pub fn canonical_sum(n: usize, term: impl Fn(usize) -> f32, scale: impl Fn(usize) -> f32) -> f32 {
    let nblocks = n.div_ceil(BLOCK);
    let mut total = 0.0f32;
    let mut seg = 0.0f32;
    for b in 0..nblocks {
        let mut bs = 0.0f32;
        for i in b * BLOCK..((b + 1) * BLOCK).min(n) {
            bs = add(bs, term(i));
        }
        seg = add(seg, flush(bs * scale(b)));
        if b % SEG_BLOCKS == SEG_BLOCKS - 1 || b + 1 == nblocks {
            total = add(total, seg);
            seg = 0.0;
        }
    }
    total
}

/// Canonical sum of a slice with unit block scales.
#[inline]
pub fn sum(xs: &[f32]) -> f32 {
    canonical_sum(xs.len(), |i| xs[i], |_| 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sum_follows_block_then_segment_order_not_sequential_order() {
        // 1e8 then 300 ones then -1e8: sequential f32 order loses the ones; blocked order keeps some of them.
        let mut xs = vec![1.0f32; 302];
        xs[0] = 1e8;
        xs[301] = -1e8;
        let mut manual = 0.0f32;
        for seg in xs.chunks(256) {
            let mut s = 0.0f32;
            for blk in seg.chunks(32) {
                s += blk.iter().fold(0.0f32, |a, &b| a + b);
            }
            manual += s;
        }
        assert_eq!(sum(&xs).to_bits(), manual.to_bits());
        assert_ne!(sum(&xs).to_bits(), xs.iter().fold(0.0f32, |a, &b| a + b).to_bits());
    }
}
